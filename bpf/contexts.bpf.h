/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * contexts.bpf.h - CUDA contexts in the in-kernel books: the context stack of
 * each thread, each context's device (ctx_dev), and a teardown (a destroyed
 * context, a reset device's primary context, a process's end): its number into
 * ctx_dead, then the allocations the driver dropped with it out of allocs.
 */
#ifndef GPULEAK_CONTEXTS_BPF_H
#define GPULEAK_CONTEXTS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "call.bpf.h"
#include "alloctab.bpf.h"

struct drop_walk {
	__u32 tgid;
	__u32 all_kinds; /* exit/exec: everything; context teardown: non-VMM only */
	__u64 ctx;	 /* drop this context's allocations (and unknown-context ones) */
	__s32 dev;	 /* primary reset: drop this device's primary context's (-1: none) */
	__u32 pad;
	__u64 bytes[GL_CLASS_SLOTS];
	__u32 allocs[GL_CLASS_SLOTS]; /* (a walk meets at most the tables' entries) */
};

static __always_inline bool ctx_is_primary_of(__u32 tgid, __u64 ctx, __s32 dev)
{
	struct gl_ctx_key k = { .tgid = tgid, .ctx = ctx };
	__s32 *d = bpf_map_lookup_elem(&ctx_dev, &k);

	return d && (*d & 0xffff) == dev && (*d & 0x10000);
}

/* Whether the walk w drops the allocation k, v. */
static __always_inline bool drop_wanted(const struct gl_alloc_key *k, const struct gl_alloc_val *v,
					const struct drop_walk *w)
{
	if (k->tgid != w->tgid)
		return false;
	if (w->all_kinds)
		return true;
	if (k->kind == GL_KIND_HANDLE || k->kind == GL_KIND_MAPPING || k->kind == GL_KIND_VA)
		return false;
	if (v->ctx && w->dev < 0 && v->ctx != w->ctx)
		return false;
	if (v->ctx && w->dev >= 0 && !ctx_is_primary_of(w->tgid, v->ctx, w->dev))
		return false;
	return true;
}

/* An allocation the walk took out of the books, into its totals. */
static __always_inline void drop_count(__u32 kind, __u64 size, __u8 cls, struct drop_walk *w)
{
	if (cls < GL_NR_CLASSES && kind != GL_KIND_MAPPING) {
		w->bytes[class_slot(cls)] += size;
		w->allocs[class_slot(cls)] += 1;
	}
}

static long drop_one(struct bpf_map *map, struct gl_alloc_key *k, struct gl_alloc_val *v,
		     struct drop_walk *w)
{
	__u64 size = v->size;
	__u8 cls = v->cls;
	__u32 kind = k->kind;

	if (!drop_wanted(k, v, w))
		return 0;
	/* a free's entry (claim_key()) or return (book_failed_free()) took it first */
	if (bpf_map_delete_elem(map, k))
		return 0;
	if (alloc_fast_kind(kind))
		__sync_fetch_and_add(&allocs_spilled, -1);
	drop_count(kind, size, cls, w);
	return 0;
}

/* drop_one() for a slot of allocs_fast: claimed as a free's entry claims it. */
static long drop_fast_one(struct bpf_map *map, __u32 *idx, struct gl_fast_slot *s,
			  struct drop_walk *w)
{
	__u64 word = slot_word(s);

	if ((word & 3) != GL_SLOT_FULL || !drop_wanted(&s->k, &s->v, w) || !slot_claim(s, word))
		return 0;
	/* unchanged since its state was read: what drop_wanted() read is what was claimed */
	drop_count(s->k.kind, s->v.size, s->v.cls, w);
	slot_release(s, word);
	return 0;
}

/* Drop allocations the driver freed by itself; returns the walk's totals in w. */
static __always_inline void drop_books(struct gl_proc_stats *st, struct drop_walk *w)
{
	/* counted first: a reader of procs sees a teardown in flight as a change to come */
	if (st)
		__sync_fetch_and_add(&st->ctx_drops, 1);
	bpf_for_each_map_elem(&allocs_fast, drop_fast_one, w, 0);
	bpf_for_each_map_elem(&allocs, drop_one, w, 0);
	if (!st)
		return;
	for (int i = 0; i < GL_NR_CLASSES; i++) {
		__sync_fetch_and_add(&st->bytes[i], -w->bytes[i]);
		__sync_fetch_and_add(&st->allocs[i], -(__s64)w->allocs[i]);
		if (i != GL_CLASS_ADDRESS && i != GL_CLASS_IMPORTED)
			__sync_fetch_and_add(&st->dropped_bytes, w->bytes[i]);
	}
}

struct dead_walk {
	__u32 tgid;
	__s32 dev;
	__u64 nr;
};

/* A primary context of the device being reset: torn down by teardown w->nr. */
static long mark_primary_dead(struct bpf_map *map, struct gl_ctx_key *k, __s32 *v,
			      struct dead_walk *w)
{
	if (k->tgid == w->tgid && (*v & 0xffff) == w->dev && (*v & 0x10000))
		bpf_map_update_elem(&ctx_dead, k, &w->nr, BPF_ANY);
	return 0;
}

/*
 * Context ctx (or, for dev >= 0, device dev's primary context) is torn down:
 * the teardown is counted, and its number goes into ctx_dead (returned),
 * before book_ctx_drop() walks the books, so that calls in flight in it see
 * the teardown (book_alloc()). Called beside book_ctx_drop(), not from it:
 * the two frames' stacks do not add up.
 */
static __noinline __u64 mark_ctx_dead(struct gl_call_ctx *c, __u64 ctx, __s32 dev)
{
	struct dead_walk dw = { .tgid = tgid_of(c), .dev = dev };
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = ctx };

	/* before ctx_dead: see ctx_teardowns */
	dw.nr = __sync_fetch_and_add(&ctx_teardowns, 1) + 1;
	if (dev >= 0)
		bpf_for_each_map_elem(&ctx_dev, mark_primary_dead, &dw, 0);
	else
		bpf_map_update_elem(&ctx_dead, &k, &dw.nr, BPF_ANY);
	return dw.nr;
}

/* The allocations that went with teardown nr (mark_ctx_dead()) leave the books. */
static __noinline void book_ctx_drop(struct gl_call_ctx *c, __u64 ctx, __s32 dev, __u64 nr)
{
	struct drop_walk w = { .tgid = tgid_of(c), .ctx = ctx, .dev = dev };
	struct gl_call *r;

	full_barrier();
	c->st = proc_stats(c->task, tgid_of(c));
	drop_books(c->st, &w);
	r = reserve_call(c);
	if (!r)
		return;
	r->key = ctx;
	r->ctx = ctx;
	r->teardowns = nr;
	r->api = c->api;
	r->op = GL_OP_CTX_DROP;
	r->dev = dev;
	bpf_ringbuf_submit(r, rb_flags(r->hdr.ts));
}

/* A teardown: marked dead first, then its allocations dropped (two frames side by side). */
static __always_inline void ctx_teardown(struct gl_call_ctx *c, __u64 ctx, __s32 dev)
{
	book_ctx_drop(c, ctx, dev, mark_ctx_dead(c, ctx, dev));
}

static __always_inline void ctx_push(struct gl_inflight *inf, __u64 ctx)
{
	__u32 d = inf->ctx_depth;

	if (d >= GL_MAX_CTX) {
		/* keep the newest: shift is not worth it, overwrite the top */
		d = GL_MAX_CTX - 1;
	}
	inf->ctx[d & (GL_MAX_CTX - 1)] = ctx;
	inf->ctx_depth = d + 1;
}

static __always_inline void ctx_remember(struct gl_call_ctx *c, __u64 ctx, __s32 dev, bool primary)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = ctx };
	__s32 v = (dev & 0xffff) | (primary ? 0x10000 : 0);

	bpf_map_update_elem(&ctx_dev, &k, &v, BPF_ANY);
	__sync_fetch_and_add(&ctx_dev_changes, 1);
	emit_call(c, GL_OP_CTX_NEW, 0, ctx, 0, 0, primary, dev);
}

static __noinline void apply_ctx_call(struct gl_call_ctx *c)
{
	struct gl_inflight *inf = c->inf;
	__u64 *a = c->slot->args, ctx;
	__u32 d = inf->ctx_depth;

	switch (c->desc.role) {
	case GL_ROLE_CTX_CREATE: {
		/* the device is the last argument: 3rd (v1, v2), 5th (v3), 4th (v4) */
		__s32 dev = c->api == GL_API_cuCtxCreate_v3 ? a[4] :
			    c->api == GL_API_cuCtxCreate_v4 ? a[3] :
							      a[2];

		ctx = read_user_u64(a[0], false);
		ctx_push(inf, ctx);
		ctx_remember(c, ctx, dev, false);
		break;
	}
	case GL_ROLE_PRIMARY_RETAIN: ctx_remember(c, read_user_u64(a[0], false), a[1], true); break;
	case GL_ROLE_CTX_SET:
		if (d == 0)
			ctx_push(inf, a[0]);
		else
			inf->ctx[(d - 1) & (GL_MAX_CTX - 1)] = a[0];
		break;
	case GL_ROLE_CTX_PUSH: ctx_push(inf, a[0]); break;
	case GL_ROLE_CTX_POP:
		if (d > 0)
			inf->ctx_depth = d - 1;
		break;
	case GL_ROLE_CTX_DESTROY: {
		struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = a[0] };

		if (d > 0 && inf->ctx[(d - 1) & (GL_MAX_CTX - 1)] == a[0])
			inf->ctx_depth = d - 1;
		ctx_teardown(c, a[0], -1);
		bpf_map_delete_elem(&ctx_dev, &k);
		__sync_fetch_and_add(&ctx_dev_changes, 1);
		break;
	}
	case GL_ROLE_PRIMARY_RESET: ctx_teardown(c, 0, (__s32)a[0]); break;
	}
}

/* The device of the thread's context: ctx_dev's, kept by the thread until ctx_dev changes. */
static __always_inline __s16 ctx_device(struct gl_call_ctx *c)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = c->ctx };
	struct gl_inflight *inf = c->inf;
	__u32 changes;
	__s32 *d;

	if (!c->ctx)
		return -1;
	changes = *(volatile __u32 *)&ctx_dev_changes;
	if (inf->dev_ctx == c->ctx && inf->dev_changes == changes)
		return (__s16)inf->dev;
	barrier(); /* the count before the lookup: a change after it is seen next time */
	d = bpf_map_lookup_elem(&ctx_dev, &k);
	inf->dev = d ? (__s16)(*d & 0xffff) : -1;
	inf->dev_ctx = c->ctx;
	inf->dev_changes = changes;
	return (__s16)inf->dev;
}

#endif /* GPULEAK_CONTEXTS_BPF_H */
