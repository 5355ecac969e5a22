/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * alloctab.bpf.h - the allocation table: allocs_fast, a small array of slots
 * of gpuleak's own, in front of allocs, the kernel's hash map (maps.bpf.h).
 *
 * An allocation of a kind allocs_fast takes goes into one of the GL_FAST_PROBE
 * slots after its key's home slot when one is free, else into allocs; a key
 * is in one of the two, never both. Every insert into a hash map sized for a
 * million entries lands on a random bucket of a 16 MiB array, a cache and TLB
 * miss that costs more than the rest of the insert; allocs_fast holds the
 * allocations of a process that has few outstanding (most do at the driver
 * level: PyTorch's allocator asks it for a few hundred segments) within a few
 * hundred KiB that stay in the caches. A slot is claimed with a compare-and-
 * swap of its state word (FREE or FULL to BUSY), filled or emptied by its
 * claimer alone, and released with an atomic exchange: two frees of one key
 * at once, or a free and a teardown's walk, claim it once.
 */
#ifndef GPULEAK_ALLOCTAB_BPF_H
#define GPULEAK_ALLOCTAB_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "call.bpf.h" /* kind_in_ctx */

/* The kinds in allocs_fast: those with no references and no walk of their own. */
static __always_inline bool alloc_fast_kind(__u32 kind)
{
	return kind_in_ctx(kind) && kind != GL_KIND_TORCH;
}

static __always_inline __u32 fast_home(const struct gl_alloc_key *k)
{
	__u64 h =
		(k->key ^ ((__u64)k->tgid << 40) ^ ((__u64)k->kind << 58)) * 0x9E3779B97F4A7C15ULL;

	return h >> (64 - GL_FAST_BITS);
}

static __always_inline struct gl_fast_slot *fast_slot(__u32 home, __u32 i)
{
	__u32 idx = (home + i) & (GL_FAST_SLOTS - 1);

	return bpf_map_lookup_elem(&allocs_fast, &idx);
}

static __always_inline bool slot_holds(const struct gl_fast_slot *s, const struct gl_alloc_key *k)
{
	return s->k.key == k->key && s->k.tgid == k->tgid && s->k.kind == k->kind;
}

/*
 * A slot's state word, read before its key and value: the compiler keeps the
 * loads after it in order, and x86-64 (the one architecture gpuleak is built
 * for, docs/fleet.md) does not reorder loads with older loads; a claim then
 * checks that the word, and so the key read with it, is still the slot's.
 */
static __always_inline __u64 slot_word(const struct gl_fast_slot *s)
{
	__u64 word = *(volatile const __u64 *)&s->state;

	asm volatile("" : : : "memory");
	return word;
}

/* A state word with state st and the same use count. */
static __always_inline __u64 slot_as(__u64 word, __u64 st)
{
	return (word & ~3ULL) | st;
}

/* Empties a slot its caller claimed (BUSY): free again, one use later. */
static __always_inline void slot_release(struct gl_fast_slot *s, __u64 claimed)
{
	__sync_lock_test_and_set(&s->state, slot_as(claimed + 4, GL_SLOT_FREE));
}

/*
 * Claims the full slot s, whose state word was seen as word (its key checked
 * since): true when this call took it.
 */
static __always_inline bool slot_claim(struct gl_fast_slot *s, __u64 word)
{
	return __sync_val_compare_and_swap(&s->state, word, slot_as(word, GL_SLOT_BUSY)) == word;
}

/* k with v, when k is in neither table: 0, -EEXIST, or allocs' error (full). */
static __always_inline long fast_insert(const struct gl_alloc_key *k, const struct gl_alloc_val *v)
{
	struct gl_fast_slot *s;
	__u32 home = fast_home(k), free_i = GL_FAST_PROBE;
	__u64 free_word = 0;
	long err;

	for (__u32 i = 0; i < GL_FAST_PROBE; i++) {
		__u64 word;

		s = fast_slot(home, i);
		if (!s)
			continue;
		word = slot_word(s);
		if ((word & 3) == GL_SLOT_FULL && slot_holds(s, k))
			return -EEXIST;
		if ((word & 3) == GL_SLOT_FREE && free_i == GL_FAST_PROBE) {
			free_i = i;
			free_word = word;
		}
	}
	if (*(volatile __u64 *)&allocs_spilled && bpf_map_lookup_elem(&allocs, k))
		return -EEXIST;
	s = free_i < GL_FAST_PROBE ? fast_slot(home, free_i) : NULL;
	if (s && __sync_val_compare_and_swap(&s->state, free_word,
					     slot_as(free_word, GL_SLOT_BUSY)) == free_word) {
		s->k = *k;
		s->v = *v;
		__sync_lock_test_and_set(&s->state, slot_as(free_word, GL_SLOT_FULL));
		return 0;
	}
	/* the key's slots are full (or one was taken under this call): allocs takes it */
	__sync_fetch_and_add(&allocs_spilled, 1);
	err = bpf_map_update_elem(&allocs, k, v, BPF_NOEXIST);
	if (err)
		__sync_fetch_and_add(&allocs_spilled, -1);
	return err;
}

/* Takes k out of allocs_fast into *v: enum gl_claim (TAKEN, RACED or ABSENT). */
static __always_inline __u32 fast_take(const struct gl_alloc_key *k, struct gl_alloc_val *v)
{
	__u32 home = fast_home(k);

	for (__u32 i = 0; i < GL_FAST_PROBE; i++) {
		struct gl_fast_slot *s = fast_slot(home, i);
		__u64 word;

		if (!s)
			continue;
		word = slot_word(s);
		if ((word & 3) != GL_SLOT_FULL || !slot_holds(s, k))
			continue;
		/* another free of the key (or a teardown's walk) took it first */
		if (!slot_claim(s, word))
			return GL_CLAIM_RACED;
		*v = s->v;
		slot_release(s, word);
		return GL_CLAIM_TAKEN;
	}
	return GL_CLAIM_ABSENT;
}

/*
 * Puts k with v in the books, k in neither table: 0, -EEXIST, or the error of
 * a full table. A global function (so are the others the books call in many
 * places): the verifier checks it once, not at each of its callers' states.
 */
__noinline long allocs_insert(const struct gl_alloc_key *k, const struct gl_alloc_val *v)
{
	if (!k || !v)
		return -EINVAL;
	if (alloc_fast_kind(k->kind))
		return fast_insert(k, v);
	return bpf_map_update_elem(&allocs, k, v, BPF_NOEXIST);
}

/*
 * Takes k out of the books into *v: enum gl_claim, TAKEN when this call took
 * it out, RACED when another did first, ABSENT when it was in neither table.
 */
__noinline __u32 allocs_take(const struct gl_alloc_key *k, struct gl_alloc_val *v)
{
	struct gl_alloc_val *cur;
	bool fast;

	if (!k || !v)
		return GL_CLAIM_ABSENT;
	fast = alloc_fast_kind(k->kind);
	if (fast) {
		__u32 claim = fast_take(k, v);

		if (claim != GL_CLAIM_ABSENT || !*(volatile __u64 *)&allocs_spilled)
			return claim;
	}
	cur = bpf_map_lookup_elem(&allocs, k);
	if (!cur)
		return GL_CLAIM_ABSENT;
	*v = *cur;
	if (bpf_map_delete_elem(&allocs, k))
		return GL_CLAIM_RACED;
	if (fast)
		__sync_fetch_and_add(&allocs_spilled, -1);
	return GL_CLAIM_TAKEN;
}

#endif /* GPULEAK_ALLOCTAB_BPF_H */
