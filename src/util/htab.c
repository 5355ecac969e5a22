// SPDX-License-Identifier: BSD-2-Clause
/*
 * htab.c - linear probing with backward-shift deletion (no tombstones).
 *
 * A slot is [u32 hash | u32 used] [key, padded to 8] [value, padded to 8].
 * The table doubles at 80% load.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"

struct slot_hdr {
	uint32_t hash;
	uint32_t used;
};

struct htab {
	size_t key_size, val_size, slot_size;
	size_t cap; /* power of two */
	size_t count;
	unsigned char *slots;
};

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
#define MIN_CAP 16

static inline uint64_t fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ULL), w;

	while (len >= 8) {
		memcpy(&w, p, 8);
		h = fmix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
		p += 8;
		len -= 8;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = fmix64(h ^ w);
	}
	return fmix64(h);
}

static inline struct slot_hdr *slot_at(const struct htab *h, size_t i)
{
	return (struct slot_hdr *)(h->slots + i * h->slot_size);
}

static inline void *slot_key(struct slot_hdr *s)
{
	return (unsigned char *)s + sizeof(*s);
}

static inline void *slot_val(const struct htab *h, struct slot_hdr *s)
{
	return (unsigned char *)s + sizeof(*s) + ALIGN8(h->key_size);
}

struct htab *htab__new(size_t key_size, size_t val_size)
{
	struct htab *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->key_size = key_size;
	h->val_size = val_size;
	h->slot_size = sizeof(struct slot_hdr) + ALIGN8(key_size) + ALIGN8(val_size);
	h->cap = MIN_CAP;
	h->slots = calloc(h->cap, h->slot_size);
	if (!h->slots) {
		free(h);
		return NULL;
	}
	return h;
}

void htab__free(struct htab *h)
{
	if (!h)
		return;
	free(h->slots);
	free(h);
}

static uint32_t key_hash(const struct htab *h, const void *key)
{
	return (uint32_t)hash_bytes(key, h->key_size, 0);
}

static struct slot_hdr *find(const struct htab *h, const void *key, uint32_t hash)
{
	size_t mask = h->cap - 1, i = hash & mask;

	for (;;) {
		struct slot_hdr *s = slot_at(h, i);

		if (!s->used)
			return NULL;
		if (s->hash == hash && !memcmp(slot_key(s), key, h->key_size))
			return s;
		i = (i + 1) & mask;
	}
}

void *htab__lookup(const struct htab *h, const void *key)
{
	struct slot_hdr *s = find(h, key, key_hash(h, key));

	return s ? slot_val(h, s) : NULL;
}

static int grow(struct htab *h)
{
	size_t old_cap = h->cap, new_cap = old_cap * 2;
	unsigned char *old = h->slots, *fresh = calloc(new_cap, h->slot_size);

	if (!fresh)
		return -ENOMEM;
	h->slots = fresh;
	h->cap = new_cap;
	for (size_t i = 0; i < old_cap; i++) {
		struct slot_hdr *s = (struct slot_hdr *)(old + i * h->slot_size);
		size_t j;

		if (!s->used)
			continue;
		for (j = s->hash & (new_cap - 1); slot_at(h, j)->used; j = (j + 1) & (new_cap - 1))
			;
		memcpy(slot_at(h, j), s, h->slot_size);
	}
	free(old);
	return 0;
}

void *htab__upsert(struct htab *h, const void *key, bool *created)
{
	uint32_t hash = key_hash(h, key);
	struct slot_hdr *s = find(h, key, hash);
	size_t i;

	if (created)
		*created = false;
	if (s)
		return slot_val(h, s);
	if ((h->count + 1) * 5 > h->cap * 4 && grow(h)) {
		errno = ENOMEM;
		return NULL;
	}
	for (i = hash & (h->cap - 1); slot_at(h, i)->used; i = (i + 1) & (h->cap - 1))
		;
	s = slot_at(h, i);
	s->hash = hash;
	s->used = 1;
	memcpy(slot_key(s), key, h->key_size);
	memset(slot_val(h, s), 0, h->val_size);
	h->count++;
	if (created)
		*created = true;
	return slot_val(h, s);
}

bool htab__delete(struct htab *h, const void *key)
{
	struct slot_hdr *s = find(h, key, key_hash(h, key));
	size_t mask = h->cap - 1, hole, j;

	if (!s)
		return false;
	hole = ((unsigned char *)s - h->slots) / h->slot_size;
	s->used = 0;
	h->count--;
	/* shift back later entries of the cluster whose home is at or before the hole */
	for (j = (hole + 1) & mask;; j = (j + 1) & mask) {
		struct slot_hdr *n = slot_at(h, j);
		size_t home;

		if (!n->used)
			break;
		home = n->hash & mask;
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			memcpy(slot_at(h, hole), n, h->slot_size);
			n->used = 0;
			hole = j;
		}
	}
	return true;
}

size_t htab__count(const struct htab *h)
{
	return h->count;
}

size_t htab__mem(const struct htab *h)
{
	return sizeof(*h) + h->cap * h->slot_size;
}

void htab__clear(struct htab *h)
{
	memset(h->slots, 0, h->cap * h->slot_size);
	h->count = 0;
}

void *htab__next(const struct htab *h, size_t *iter, const void **key)
{
	while (*iter < h->cap) {
		struct slot_hdr *s = slot_at(h, (*iter)++);

		if (s->used) {
			if (key)
				*key = slot_key(s);
			return slot_val(h, s);
		}
	}
	return NULL;
}
