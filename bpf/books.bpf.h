/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * books.bpf.h - what a returning call does to the exact in-kernel books.
 *
 * allocs holds every outstanding allocation, handle, mapping and reservation
 * of every traced process with its size; procs holds per-process counters.
 * Only successful calls change them. Each change is also written to the ring
 * buffer (struct gl_call) so that user space can attribute it to a stack;
 * comparing user space's totals with procs proves no record was lost.
 *
 * A driver hands an address freed on one thread to an allocation on another
 * at once, before the free has returned: the free's entry therefore takes its
 * key out of allocs (claim_key()), and its return books what it took. A
 * context torn down while other threads call into it: a call that entered
 * before the teardown and returns after it acted on memory the driver has
 * since dropped with the context (ctx_dead, ctx_gone()).
 */
#ifndef GPULEAK_BOOKS_BPF_H
#define GPULEAK_BOOKS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "stack.bpf.h" /* fill_hdr */

#define CUDA_SUCCESS 0

struct gl_call_ctx {
	struct gl_slot *slot;
	struct gl_inflight *inf;
	struct task_struct *task;
	struct gl_proc_stats *st;
	struct gl_api_desc desc;
	__u64 pid_tgid;
	__u64 ctx; /* context current on the thread */
	__u64 id;  /* the allocation booked or freed (gl_call.id) */
	__s32 dev;
	__u32 api;
	int rc;
};

static __always_inline __u32 tgid_of(struct gl_call_ctx *c)
{
	return c->pid_tgid >> 32;
}

static __always_inline struct gl_proc_stats *proc_stats(struct task_struct *task, __u32 tgid)
{
	struct gl_proc_stats *st = bpf_map_lookup_elem(&procs, &tgid), fresh = {};
	__u64 start = proc_start_time(task);

	if (st && st->start_time == start)
		return st;
	/* first call of this process, or a reused PID whose exit we missed */
	fresh.start_time = start;
	if (bpf_map_update_elem(&procs, &tgid, &fresh, BPF_ANY)) {
		stat_inc(GL_STAT_PROC_TABLE_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&procs, &tgid);
}

/* A zeroed call record of c in the ring buffer, header and seq set; NULL (counted) if full. */
static __always_inline struct gl_call *reserve_call(struct gl_call_ctx *c)
{
	struct gl_call *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		stat_inc(GL_STAT_LOST_CALL);
		return NULL;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, GL_REC_CALL, sizeof(*r), c->task, c->pid_tgid);
	r->seq = c->slot->seq;
	return r;
}

static __always_inline void emit_call(struct gl_call_ctx *c, __u8 op, __u8 kind, __u64 key,
				      __u64 bytes, __u8 cls, __u16 flags, __s16 dev)
{
	struct gl_call *r = reserve_call(c);

	if (!r)
		return;
	r->key = key;
	r->bytes = bytes;
	r->ctx = c->ctx;
	r->dur_ns = r->hdr.ts - c->slot->ts;
	r->rc = c->rc;
	r->api = c->api;
	r->op = op;
	r->cls = cls;
	r->dev = dev;
	r->flags = flags;
	r->kind = kind;
	r->id = c->id;
	bpf_ringbuf_submit(r, rb_flags(r->hdr.ts));
}

/* A class as an index the verifier can bound (the compiler drops a plain mask). */
static __always_inline __u32 class_slot(__u8 cls)
{
	__u32 i = cls;

	asm volatile("%0 &= 7" : "+r"(i));
	return i;
}

static __always_inline void count(struct gl_proc_stats *st, __u8 cls, __s64 bytes, __s64 n)
{
	if (!st || cls >= GL_NR_CLASSES)
		return;
	__sync_fetch_and_add(&st->bytes[class_slot(cls)], bytes);
	__sync_fetch_and_add(&st->allocs[class_slot(cls)], n);
}

static __always_inline __u64 read_user_u64(__u64 addr, bool narrow)
{
	__u64 v = 0;
	__u32 v32 = 0;

	if (narrow) {
		if (bpf_probe_read_user(&v32, sizeof(v32), (void *)addr))
			stat_inc(GL_STAT_READ_ERROR);
		return v32;
	}
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		stat_inc(GL_STAT_READ_ERROR);
	return v;
}

/* Kinds whose allocations belong to a context and go with it (the rule of drop_one()). */
static __always_inline bool kind_in_ctx(__u32 kind)
{
	return kind != GL_KIND_HANDLE && kind != GL_KIND_MAPPING && kind != GL_KIND_VA;
}

/* Memory classes, as dropped_bytes and untracked_bytes count them. */
static __always_inline bool cls_is_memory(__u8 cls)
{
	return cls != GL_CLASS_ADDRESS && cls != GL_CLASS_IMPORTED && cls < GL_NR_CLASSES;
}

/* Whether context ctx was torn down after this call entered. */
static __always_inline bool ctx_gone(struct gl_call_ctx *c, __u64 ctx)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = ctx };
	__u64 *dead;

	if (!ctx)
		return false;
	dead = bpf_map_lookup_elem(&ctx_dead, &k);
	return dead && *dead > c->slot->ts;
}

/*
 * Whether allocation v went with a teardown of its context: booked before the
 * teardown's time, which a later allocation in a new context at the same
 * address is not.
 */
static __always_inline bool went_with_ctx(struct gl_call_ctx *c, const struct gl_alloc_val *v)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = v->ctx };
	__u64 *dead;

	if (!v->ctx)
		return false;
	dead = bpf_map_lookup_elem(&ctx_dead, &k);
	return dead && *dead > v->ns;
}

/*
 * A full memory barrier, between a write to one map and a read of another that
 * another CPU does the other way round (an atomic that fetches: lock-prefixed
 * on x86, acquire-release on arm64). A hash map's update ends with a plain
 * store, which a later load may pass.
 */
static __always_inline void full_barrier(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&alloc_ids, &zero), v;

	if (!n)
		return;
	v = __sync_fetch_and_add(n, 0);
	asm volatile("" : : "r"(v) : "memory");
}

/*
 * A successful allocation: key gains size bytes of class cls. When its context
 * was torn down while it was in flight, the driver dropped it with the
 * context: the allocation is inserted before ctx_dead is read, and the
 * teardown writes ctx_dead before it walks allocs (a full barrier on each
 * side), so either the walk takes it or this call sees the teardown and takes
 * it out itself.
 */
static __always_inline void book_alloc(struct gl_call_ctx *c, __u32 kind, __u64 key, __u64 size,
				       __u8 cls, __s16 dev)
{
	struct gl_alloc_key k = { .tgid = tgid_of(c), .kind = kind, .key = key };
	struct gl_alloc_val v = { .size = size,
				  .ctx = c->ctx,
				  .refs = 1,
				  .cls = cls,
				  .dev = dev,
				  .id = next_alloc_id(),
				  .ns = bpf_ktime_get_ns() };
	struct gl_alloc_val *old = bpf_map_lookup_elem(&allocs, &k);
	__u16 flags = 0;

	c->st = proc_stats(c->task, tgid_of(c));
	c->id = v.id;
	if (c->st)
		__sync_fetch_and_add(&c->st->alloc_calls, 1);
	if (old) {
		/* the driver reused a key whose release we never saw */
		count(c->st, old->cls, -(__s64)old->size, -1);
		bpf_map_delete_elem(&allocs, &k);
		flags |= GL_CALL_REPLACED;
	}
	if (bpf_map_update_elem(&allocs, &k, &v, BPF_ANY)) {
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
		flags |= GL_CALL_TABLE_FULL;
		if (c->st) {
			__sync_fetch_and_add(&c->st->untracked_allocs, 1);
			if (cls_is_memory(cls))
				__sync_fetch_and_add(&c->st->untracked_bytes, size);
		}
	} else {
		count(c->st, cls, size, 1);
		full_barrier();
		if (kind_in_ctx(kind) && ctx_gone(c, c->ctx) &&
		    bpf_map_delete_elem(&allocs, &k) == 0) {
			count(c->st, cls, -(__s64)size, -1);
			if (c->st && cls_is_memory(cls))
				__sync_fetch_and_add(&c->st->dropped_bytes, size);
		}
	}
	emit_call(c, GL_OP_ALLOC, kind, key, size, cls, flags, dev);
}

/*
 * Takes (tgid, kind, key) out of allocs into *k, *v; with last_only, only a
 * handle down to its last reference. Returns the enum gl_claim.
 */
static __always_inline __u32 take_key(struct gl_alloc_key *k, struct gl_alloc_val *v, __u32 tgid,
				      __u32 kind, __u64 key, bool last_only)
{
	struct gl_alloc_val *cur;

	if (!key)
		return GL_CLAIM_NONE;
	k->tgid = tgid;
	k->kind = kind;
	k->key = key;
	cur = bpf_map_lookup_elem(&allocs, k);
	if (!cur)
		return GL_CLAIM_ABSENT;
	if (last_only && cur->refs > 1)
		return GL_CLAIM_NONE; /* the return takes one reference */
	*v = *cur;
	/* two threads freeing one key at once: one of them takes it */
	return bpf_map_delete_elem(&allocs, k) ? GL_CLAIM_ABSENT : GL_CLAIM_TAKEN;
}

/*
 * At a free's entry: take its key out of allocs, so that an allocation that
 * gets the same address back on another thread before this free returns is
 * booked apart; the return books what was taken (book_free()), or puts it
 * back when the free failed (unclaim()). A release takes a handle down to its
 * last reference; an unmap takes the mapping at its start, and that mapping's
 * handle when it is down to its last reference (the unmap frees it).
 */
static __always_inline void claim_key(struct gl_slot *slot, __u32 tgid, const struct gl_api_desc *d)
{
	__u64 key = (d->flags & GL_API_V1) ? (__u32)slot->args[0] : slot->args[0];

	slot->claim = GL_CLAIM_NONE;
	slot->claim_aux = GL_CLAIM_NONE;
	switch (d->role) {
	case GL_ROLE_FREE:
	case GL_ROLE_VA_FREE:
		slot->claim =
			take_key(&slot->claimed_key, &slot->claimed, tgid, d->kind, key, false);
		break;
	case GL_ROLE_VMM_RELEASE:
		slot->claim = take_key(&slot->claimed_key, &slot->claimed, tgid, GL_KIND_HANDLE,
				       key, true);
		break;
	case GL_ROLE_VMM_UNMAP:
		slot->claim = take_key(&slot->claimed_key, &slot->claimed, tgid, GL_KIND_MAPPING,
				       key, false);
		if (slot->claim == GL_CLAIM_TAKEN)
			slot->claim_aux = take_key(&slot->aux_key, &slot->aux, tgid, GL_KIND_HANDLE,
						   slot->claimed.handle, true);
		break;
	}
}

/* Claimed keys go back into the books: their call failed or never returned. */
static __noinline void unclaim(struct gl_slot *slot)
{
	if (slot->claim == GL_CLAIM_TAKEN &&
	    bpf_map_update_elem(&allocs, &slot->claimed_key, &slot->claimed, BPF_NOEXIST))
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
	if (slot->claim_aux == GL_CLAIM_TAKEN &&
	    bpf_map_update_elem(&allocs, &slot->aux_key, &slot->aux, BPF_NOEXIST))
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
	slot->claim = GL_CLAIM_NONE;
	slot->claim_aux = GL_CLAIM_NONE;
}

/* The allocation under (kind, key) is gone. */
static __always_inline void book_free(struct gl_call_ctx *c, __u32 kind, __u64 key)
{
	struct gl_alloc_key k = { .tgid = tgid_of(c), .kind = kind, .key = key };
	struct gl_alloc_val *v = NULL, val;
	__u32 claim = c->slot->claim;

	c->st = proc_stats(c->task, tgid_of(c));
	if (c->st)
		__sync_fetch_and_add(&c->st->free_calls, 1);
	c->slot->claim = GL_CLAIM_NONE;
	if (claim == GL_CLAIM_TAKEN) {
		val = c->slot->claimed;
	} else {
		if (claim == GL_CLAIM_NONE)
			v = bpf_map_lookup_elem(&allocs, &k);
		if (v) {
			val = *v;
			if (bpf_map_delete_elem(&allocs, &k))
				v = NULL; /* another free took it */
		}
		if (!v) {
			if (c->st)
				__sync_fetch_and_add(&c->st->unmatched_frees, 1);
			emit_call(c, GL_OP_UNMATCHED_FREE, kind, key, 0, c->desc.cls, 0, -1);
			return;
		}
	}
	count(c->st, val.cls, -(__s64)val.size, -1);
	c->id = val.id;
	if (val.ctx)
		c->ctx = val.ctx;
	emit_call(c, GL_OP_FREE, kind, key, val.size, val.cls, 0, val.dev);
}

/*
 * A free failed: what its entry took goes back, unless it went with a teardown
 * of its context (the driver dropped it with the context; the free came after).
 * The teardown's walk of allocs does not see a key a free has taken out, nor
 * one put back after the walk passed it: a teardown whose time is written
 * before the key is back is seen here, and the key taken out again (by this
 * call or by the walk, whichever deletes it: one of them counts it).
 */
static __always_inline __u16 book_failed_free(struct gl_call_ctx *c)
{
	struct gl_alloc_val *v = &c->slot->claimed;

	if (c->slot->claim != GL_CLAIM_TAKEN || !kind_in_ctx(c->slot->claimed_key.kind)) {
		unclaim(c->slot);
		return 0;
	}
	if (went_with_ctx(c, v)) {
		c->slot->claim = GL_CLAIM_NONE;
	} else {
		unclaim(c->slot);
		full_barrier();
		if (!went_with_ctx(c, v) || bpf_map_delete_elem(&allocs, &c->slot->claimed_key))
			return 0;
	}
	c->st = proc_stats(c->task, tgid_of(c));
	if (c->st) {
		__sync_fetch_and_add(&c->st->ctx_drops, 1);
		if (cls_is_memory(v->cls))
			__sync_fetch_and_add(&c->st->dropped_bytes, v->size);
	}
	count(c->st, v->cls, -(__s64)v->size, -1);
	c->id = v->id;
	return GL_CALL_CTX_GONE;
}

/* A handle loses one reference (release or unmap): freed at the last one. */
static __always_inline void handle_unref(struct gl_call_ctx *c, __u64 handle)
{
	struct gl_alloc_key k = { .tgid = tgid_of(c), .kind = GL_KIND_HANDLE, .key = handle };
	struct gl_alloc_val *v = bpf_map_lookup_elem(&allocs, &k);

	if (v && v->refs > 1) {
		__sync_fetch_and_add(&v->refs, -1);
		emit_call(c, GL_OP_NONE, GL_KIND_HANDLE, handle, v->size, v->cls, GL_CALL_DEFERRED,
			  v->dev);
		return;
	}
	book_free(c, GL_KIND_HANDLE, handle);
}

static __always_inline void handle_ref(struct gl_call_ctx *c, __u64 handle)
{
	struct gl_alloc_key k = { .tgid = tgid_of(c), .kind = GL_KIND_HANDLE, .key = handle };
	struct gl_alloc_val *v = bpf_map_lookup_elem(&allocs, &k);

	if (v)
		__sync_fetch_and_add(&v->refs, 1);
}

struct unmap_walk {
	struct gl_call_ctx *c;
	__u64 cur, end;
};

/* One mapping inside an unmapped range: drop it and its handle reference. */
static long unmap_one(__u32 i, void *data)
{
	struct unmap_walk *w = data;
	struct gl_alloc_key k = { .tgid = tgid_of(w->c), .kind = GL_KIND_MAPPING, .key = w->cur };
	struct gl_alloc_val *v;
	__u64 handle, size;

	if (w->cur >= w->end)
		return 1;
	v = bpf_map_lookup_elem(&allocs, &k);
	if (!v)
		return 1; /* mapped before attach, or a gap */
	handle = v->handle;
	size = v->size ? v->size : w->end - w->cur;
	bpf_map_delete_elem(&allocs, &k);
	handle_unref(w->c, handle);
	w->cur += size;
	return 0;
}

/*
 * The mapping an unmap's entry took (claim_key()): its handle loses that
 * reference (freed from what the entry took when it was the last), and the
 * walk goes on after it. No mapping at the start at entry: nothing of this
 * unmap is in the books (a mapping there now is another thread's).
 */
static __always_inline void unmap_claimed(struct gl_call_ctx *c, struct unmap_walk *w)
{
	struct gl_slot *s = c->slot;
	__u64 handle = s->claimed.handle;

	if (s->claim != GL_CLAIM_TAKEN) {
		s->claim = GL_CLAIM_NONE;
		s->claim_aux = GL_CLAIM_NONE;
		w->cur = w->end;
		return;
	}
	w->cur += s->claimed.size ? s->claimed.size : w->end - w->cur;
	if (s->claim_aux == GL_CLAIM_TAKEN) {
		s->claimed_key = s->aux_key;
		s->claimed = s->aux;
		s->claim_aux = GL_CLAIM_NONE;
		book_free(c, GL_KIND_HANDLE, handle);
		return;
	}
	s->claim = GL_CLAIM_NONE;
	s->claim_aux = GL_CLAIM_NONE;
	handle_unref(c, handle);
}

static __always_inline __u64 array_elem_size(__u32 format)
{
	switch (format) {
	case 0x01:
	case 0x08: return 1; /* (un)signed int8 */
	case 0x02:
	case 0x09:
	case 0x10: return 2; /* int16, half */
	case 0x03:
	case 0x0a:
	case 0x20: return 4; /* int32, float */
	default: return 4;
	}
}

struct array3d_desc {
	__u64 width, height, depth;
	__u32 format, channels, flags;
};

struct mip_walk {
	__u64 width, height, depth, elem, total;
};

/* One mip level: add its bytes, halve the extents for the next. */
static long mip_level(__u32 i, void *data)
{
	struct mip_walk *m = data;

	m->total += m->width * (m->height ? m->height : 1) * (m->depth ? m->depth : 1) * m->elem;
	m->width = m->width > 1 ? m->width / 2 : 1;
	m->height = m->height > 1 ? m->height / 2 : m->height;
	m->depth = m->depth > 1 ? m->depth / 2 : m->depth;
	return 0;
}

/*
 * Bytes of a CUDA array: width x height x depth x element size, summed over mip levels
 * (at most 16). The levels are a bpf_loop callback, verified once: an unrolled loop of
 * branchy halvings made this function most of the verifier's work at attach.
 */
static __noinline __u64 array_bytes(__u64 desc_ptr, bool is3d, __u32 levels)
{
	struct array3d_desc d = {};
	struct mip_walk m = {};

	if (is3d) {
		if (bpf_probe_read_user(&d, sizeof(d), (void *)desc_ptr))
			return 0;
	} else {
		struct {
			__u64 width, height;
			__u32 format, channels;
		} d2;

		if (bpf_probe_read_user(&d2, sizeof(d2), (void *)desc_ptr))
			return 0;
		d.width = d2.width;
		d.height = d2.height;
		d.format = d2.format;
		d.channels = d2.channels;
	}
	m.width = d.width;
	m.height = d.height;
	m.depth = d.depth;
	m.elem = array_elem_size(d.format) * d.channels;
	bpf_loop(levels < 16 ? levels : 16, mip_level, &m, 0);
	return m.total;
}

struct drop_walk {
	__u32 tgid;
	__u32 all_kinds; /* exit/exec: everything; context teardown: non-VMM only */
	__u64 ctx;	 /* drop this context's allocations (and unknown-context ones) */
	__s32 dev;	 /* primary reset: drop this device's primary context's (-1: none) */
	__u32 n;
	__u64 bytes[GL_CLASS_SLOTS];
	__u64 allocs[GL_CLASS_SLOTS];
};

static __always_inline bool ctx_is_primary_of(__u32 tgid, __u64 ctx, __s32 dev)
{
	struct gl_ctx_key k = { .tgid = tgid, .ctx = ctx };
	__s32 *d = bpf_map_lookup_elem(&ctx_dev, &k);

	return d && (*d & 0xffff) == dev && (*d & 0x10000);
}

static long drop_one(struct bpf_map *map, struct gl_alloc_key *k, struct gl_alloc_val *v,
		     struct drop_walk *w)
{
	__u64 size = v->size;
	__u8 cls = v->cls;

	if (k->tgid != w->tgid)
		return 0;
	if (!w->all_kinds) {
		if (k->kind == GL_KIND_HANDLE || k->kind == GL_KIND_MAPPING ||
		    k->kind == GL_KIND_VA)
			return 0;
		if (v->ctx && w->dev < 0 && v->ctx != w->ctx)
			return 0;
		if (v->ctx && w->dev >= 0 && !ctx_is_primary_of(w->tgid, v->ctx, w->dev))
			return 0;
	}
	/* a free's entry (claim_key()) or return (book_failed_free()) took it first */
	if (bpf_map_delete_elem(map, k))
		return 0;
	if (cls < GL_NR_CLASSES && k->kind != GL_KIND_MAPPING) {
		w->bytes[class_slot(cls)] += size;
		w->allocs[class_slot(cls)] += 1;
	}
	w->n++;
	return 0;
}

/* Drop allocations the driver freed by itself; returns the walk's totals in w. */
static __always_inline void drop_books(struct gl_proc_stats *st, struct drop_walk *w)
{
	/* counted first: a reader of procs sees a teardown in flight as a change to come */
	if (st)
		__sync_fetch_and_add(&st->ctx_drops, 1);
	bpf_for_each_map_elem(&allocs, drop_one, w, 0);
	if (!st)
		return;
	for (int i = 0; i < GL_NR_CLASSES; i++) {
		__sync_fetch_and_add(&st->bytes[i], -w->bytes[i]);
		__sync_fetch_and_add(&st->allocs[i], -w->allocs[i]);
		if (i != GL_CLASS_ADDRESS && i != GL_CLASS_IMPORTED)
			__sync_fetch_and_add(&st->dropped_bytes, w->bytes[i]);
	}
}

struct dead_walk {
	__u32 tgid;
	__s32 dev;
	__u64 now;
};

/* A primary context of the device being reset: torn down at w->now. */
static long mark_primary_dead(struct bpf_map *map, struct gl_ctx_key *k, __s32 *v,
			      struct dead_walk *w)
{
	if (k->tgid == w->tgid && (*v & 0xffff) == w->dev && (*v & 0x10000))
		bpf_map_update_elem(&ctx_dead, k, &w->now, BPF_ANY);
	return 0;
}

/*
 * Context ctx (or, for dev >= 0, device dev's primary context) is torn down.
 * Its time goes into ctx_dead before the books are walked: calls in flight in
 * it see the teardown (book_alloc()).
 */
static __noinline void book_ctx_drop(struct gl_call_ctx *c, __u64 ctx, __s32 dev)
{
	struct drop_walk w = { .tgid = tgid_of(c), .ctx = ctx, .dev = dev };
	struct dead_walk dw = { .tgid = tgid_of(c), .dev = dev, .now = bpf_ktime_get_ns() };
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = ctx };
	struct gl_call *r;

	if (dev >= 0)
		bpf_for_each_map_elem(&ctx_dev, mark_primary_dead, &dw, 0);
	else
		bpf_map_update_elem(&ctx_dead, &k, &dw.now, BPF_ANY);
	full_barrier();
	c->st = proc_stats(c->task, tgid_of(c));
	drop_books(c->st, &w);
	r = reserve_call(c);
	if (!r)
		return;
	r->key = ctx;
	r->ctx = ctx;
	r->bytes = dw.now;
	r->api = c->api;
	r->op = GL_OP_CTX_DROP;
	r->dev = dev;
	r->dropped_allocs = w.n;
	for (int i = 0; i < GL_NR_CLASSES; i++)
		r->dropped[i] = w.bytes[i];
	bpf_ringbuf_submit(r, rb_flags(r->hdr.ts));
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
		book_ctx_drop(c, a[0], -1);
		bpf_map_delete_elem(&ctx_dev, &k);
		break;
	}
	case GL_ROLE_PRIMARY_RESET: book_ctx_drop(c, 0, (__s32)a[0]); break;
	}
}

static __always_inline __s16 ctx_device(struct gl_call_ctx *c)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = c->ctx };
	__s32 *d;

	if (!c->ctx)
		return -1;
	d = bpf_map_lookup_elem(&ctx_dev, &k);
	return d ? (__s16)(*d & 0xffff) : -1;
}

struct mem_location {
	__s32 type, id;
};

/* Apply a returning call to the books and tell user space what changed. */
static __always_inline void apply_call(struct gl_call_ctx *c)
{
	__u64 *a = c->slot->args;
	bool v1 = c->desc.flags & GL_API_V1;
	bool v1_size = c->desc.flags & (GL_API_V1 | GL_API_V1_SIZE);
	__u8 role = c->desc.role, cls = c->desc.cls, kind = c->desc.kind;
	__u32 d = c->inf->ctx_depth;
	__u64 key, size;

	c->ctx = d > 0 ? c->inf->ctx[(d - 1) & (GL_MAX_CTX - 1)] : 0;
	c->dev = ctx_device(c);

	if (role >= GL_ROLE_CTX_CREATE) {
		if (c->rc == CUDA_SUCCESS)
			apply_ctx_call(c);
		return;
	}

	if (c->rc != CUDA_SUCCESS) {
		switch (role) {
		case GL_ROLE_ALLOC:
		case GL_ROLE_ALLOC_PITCH:
		case GL_ROLE_HOST_REGISTER:
		case GL_ROLE_VMM_CREATE:
		case GL_ROLE_ARRAY_CREATE:
		case GL_ROLE_ARRAY3D_CREATE:
		case GL_ROLE_MIPMAP_CREATE:
			c->st = proc_stats(c->task, tgid_of(c));
			if (c->st)
				__sync_fetch_and_add(&c->st->failures, 1);
			size = role == GL_ROLE_ALLOC_PITCH ? a[2] * a[3] : a[1];
			if (role >= GL_ROLE_ARRAY_CREATE)
				size = 0;
			emit_call(c, GL_OP_FAIL, kind, 0, v1_size ? (__u32)size : size, cls, 0,
				  c->dev);
			break;
		default:
			/* a failed free changes nothing (but see book_failed_free()) */
			emit_call(c, GL_OP_NONE, kind, a[0], 0, cls, book_failed_free(c), c->dev);
		}
		return;
	}

	switch (role) {
	case GL_ROLE_ALLOC:
		key = read_user_u64(a[0], v1);
		book_alloc(c, kind, key, v1_size ? (__u32)a[1] : a[1], cls, c->dev);
		break;
	case GL_ROLE_ALLOC_PITCH:
		key = read_user_u64(a[0], v1);
		size = read_user_u64(a[1], v1) * (v1 ? (__u32)a[3] : a[3]);
		book_alloc(c, kind, key, size, cls, c->dev);
		break;
	case GL_ROLE_HOST_REGISTER: book_alloc(c, kind, a[0], a[1], cls, c->dev); break;
	case GL_ROLE_FREE:
		key = v1 ? (__u32)a[0] : a[0];
		if (key == 0 && kind == GL_KIND_DPTR)
			break; /* cuMemFree(0) is not a free */
		book_free(c, kind, key);
		break;
	case GL_ROLE_VMM_CREATE: {
		struct mem_location loc = {};
		__s16 dev = -1;

		/* CUmemAllocationProp: type, requestedHandleTypes, location {type, id} */
		bpf_probe_read_user(&loc, sizeof(loc), (void *)(a[2] + 8));
		if (loc.type == 1)
			dev = loc.id;
		else if (loc.type >= 2)
			cls = GL_CLASS_HOST_PINNED;
		book_alloc(c, kind, read_user_u64(a[0], false), a[1], cls, dev);
		break;
	}
	case GL_ROLE_VMM_RELEASE:
		/* more than one reference at entry: the return takes one; else what the entry
		 * took (or found absent) is freed */
		if (c->slot->claim == GL_CLAIM_NONE)
			handle_unref(c, a[0]);
		else
			book_free(c, GL_KIND_HANDLE, a[0]);
		break;
	case GL_ROLE_VMM_MAP: {
		struct gl_alloc_key k = { .tgid = tgid_of(c),
					  .kind = GL_KIND_MAPPING,
					  .key = a[0] };
		struct gl_alloc_val v = { .size = a[1],
					  .handle = a[3],
					  .refs = 1,
					  .cls = GL_NR_CLASSES,
					  .dev = -1 };

		handle_ref(c, a[3]);
		if (bpf_map_update_elem(&allocs, &k, &v, BPF_ANY))
			stat_inc(GL_STAT_ALLOC_TABLE_FULL);
		emit_call(c, GL_OP_NONE, kind, a[0], a[1], cls, 0, -1);
		break;
	}
	case GL_ROLE_VMM_UNMAP: {
		struct unmap_walk w = { .c = c, .cur = a[0], .end = a[0] + a[1] };

		unmap_claimed(c, &w);
		bpf_loop(1 << 16, unmap_one, &w, 0);
		break;
	}
	case GL_ROLE_VMM_RETAIN: handle_ref(c, read_user_u64(a[0], false)); break;
	case GL_ROLE_VA_RESERVE:
		book_alloc(c, kind, read_user_u64(a[0], false), a[1], cls, -1);
		break;
	case GL_ROLE_VA_FREE: book_free(c, kind, a[0]); break;
	case GL_ROLE_IMPORT:
	case GL_ROLE_IPC_OPEN:
		book_alloc(c, kind, read_user_u64(a[0], false), 0, cls, c->dev);
		break;
	case GL_ROLE_ARRAY_CREATE:
	case GL_ROLE_ARRAY3D_CREATE:
	case GL_ROLE_MIPMAP_CREATE:
		size = array_bytes(a[1], role != GL_ROLE_ARRAY_CREATE,
				   role == GL_ROLE_MIPMAP_CREATE ? a[2] : 1);
		book_alloc(c, kind, read_user_u64(a[0], false), size, cls, c->dev);
		break;
	}
}

static __always_inline void emit_proc(struct task_struct *task, __u32 tgid, __u32 event, __u32 ppid,
				      struct gl_proc_stats *st)
{
	struct gl_proc *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		stat_inc(GL_STAT_LOST_PROC);
		return;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, GL_REC_PROC, sizeof(*r), task, ((__u64)tgid << 32) | task->pid);
	r->event = event;
	r->ppid = ppid;
	BPF_CORE_READ_STR_INTO(&r->comm, task, group_leader, comm);
	if (st)
		r->stats = *st;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static long drop_ctx_one(struct bpf_map *map, struct gl_ctx_key *k, __s32 *v, __u32 *tgid)
{
	if (k->tgid == *tgid)
		bpf_map_delete_elem(map, k);
	return 0;
}

/* Exit or exec: report the final books, then drop everything the process held. */
static __always_inline void close_books(struct task_struct *task, __u32 tgid, __u32 event)
{
	struct gl_proc_stats *st = bpf_map_lookup_elem(&procs, &tgid);
	struct drop_walk w = { .tgid = tgid, .all_kinds = 1, .dev = -1 };

	if (!st && !bpf_map_lookup_elem(&targets, &tgid))
		return;
	if (st && event == GL_PROC_EXIT)
		st->exit_time = bpf_ktime_get_ns();
	emit_proc(task, tgid, event, 0, st);
	if (!st)
		return;
	drop_books(NULL, &w);
	bpf_for_each_map_elem(&ctx_dev, drop_ctx_one, &tgid, 0);
	if (event != GL_PROC_EXIT) {
		__u64 start = st->start_time;

		__builtin_memset(st, 0, sizeof(*st));
		st->start_time = start;
	}
}

#endif /* GPULEAK_BOOKS_BPF_H */
