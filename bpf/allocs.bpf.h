/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * allocs.bpf.h - the allocs map: booking a successful allocation, claiming a
 * free's key at its entry and booking (or putting back) what it claimed at
 * its return, handle references, and the mappings an unmap covers.
 */
#ifndef GPULEAK_ALLOCS_BPF_H
#define GPULEAK_ALLOCS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "call.bpf.h"
#include "alloctab.bpf.h"

/*
 * A successful allocation: key gains size bytes of class cls. When its context
 * was torn down while it was in flight, the driver dropped it with the
 * context: the allocation is inserted before ctx_dead is read, and the
 * teardown writes ctx_dead before it walks allocs (a full barrier on each
 * side: here the fetching atomic that counts the allocation, see
 * count_fenced()), so either the walk takes it or this call sees the teardown
 * and takes it out itself. It keeps the teardowns counted when its call
 * entered (gl_alloc_val.teardowns), the count ctx_gone() judges the call by:
 * an allocation whose call entered before a teardown of its context went with
 * it.
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
				  .teardowns = c->slot->teardowns };
	__u16 flags = 0;
	long err;

	c->st = proc_stats(c->task, tgid_of(c));
	c->id = v.id;
	if (c->st)
		__sync_fetch_and_add(&c->st->alloc_calls, 1);
	/* the common case in one walk of the table: the key is not there */
	err = allocs_insert(&k, &v);
	if (err == -EEXIST) {
		/* the driver reused a key whose release we never saw; whoever takes the old
		 * entry out (this call, or a free's entry that took it first) counts it (into
		 * the slot's aux, which an allocation's return does not use) */
		if (allocs_take(&k, &c->slot->aux) == GL_CLAIM_TAKEN) {
			count(c->st, c->slot->aux.cls, -(__s64)c->slot->aux.size, -1);
			flags |= GL_CALL_REPLACED;
		}
		err = allocs_insert(&k, &v);
	}
	if (err) {
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
		flags |= GL_CALL_TABLE_FULL;
		if (c->st) {
			__sync_fetch_and_add(&c->st->untracked_allocs, 1);
			if (cls_is_memory(cls))
				__sync_fetch_and_add(&c->st->untracked_bytes, size);
		}
	} else {
		if (!count_fenced(c->st, cls, size, 1))
			full_barrier();
		if (kind_in_ctx(kind) && ctx_gone(c, c->ctx) &&
		    allocs_take(&k, &c->slot->aux) == GL_CLAIM_TAKEN) {
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
	if (!last_only)
		return allocs_take(k, v); /* two threads freeing one key at once: one takes it */
	/* a handle (only in allocs) */
	cur = bpf_map_lookup_elem(&allocs, k);
	if (!cur)
		return GL_CLAIM_ABSENT;
	if (cur->refs > 1)
		return GL_CLAIM_NONE; /* the return takes one reference */
	*v = *cur;
	return bpf_map_delete_elem(&allocs, k) ? GL_CLAIM_RACED : GL_CLAIM_TAKEN;
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
	if (slot->claim == GL_CLAIM_TAKEN && allocs_insert(&slot->claimed_key, &slot->claimed))
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
	if (slot->claim_aux == GL_CLAIM_TAKEN && allocs_insert(&slot->aux_key, &slot->aux))
		stat_inc(GL_STAT_ALLOC_TABLE_FULL);
	slot->claim = GL_CLAIM_NONE;
	slot->claim_aux = GL_CLAIM_NONE;
}

/* The allocation under (kind, key) is gone. */
static __always_inline void book_free(struct gl_call_ctx *c, __u32 kind, __u64 key)
{
	struct gl_alloc_key k = { .tgid = tgid_of(c), .kind = kind, .key = key };
	struct gl_alloc_val val;
	__u32 claim = c->slot->claim;

	c->st = proc_stats(c->task, tgid_of(c));
	if (c->st)
		__sync_fetch_and_add(&c->st->free_calls, 1);
	c->slot->claim = GL_CLAIM_NONE;
	if (claim == GL_CLAIM_TAKEN) {
		val = c->slot->claimed;
	} else {
		/* nothing taken at entry: taken here (another free may take it first) */
		if (claim != GL_CLAIM_NONE || allocs_take(&k, &val) != GL_CLAIM_TAKEN) {
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
		/* (taken into aux, which a free of these kinds does not use) */
		if (!went_with_ctx(c, v) ||
		    allocs_take(&c->slot->claimed_key, &c->slot->aux) != GL_CLAIM_TAKEN)
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

#endif /* GPULEAK_ALLOCS_BPF_H */
