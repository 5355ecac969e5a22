// SPDX-License-Identifier: BSD-2-Clause
/*
 * stacks.c - the stack table: all frames in one growing array, each stack a
 * (first, count) range in it, found by hash with collision chains.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "stacks.h"
#include "util/htab.h"

struct stack_ref {
	uint64_t first;
	uint32_t n;
	uint32_t next; /* next stack with the same hash, 0 = none */
};

struct stacks {
	struct frame *frames;
	uint64_t nr_frames, cap_frames;
	struct stack_ref *refs; /* index = id; refs[0] unused */
	uint32_t nr_refs, cap_refs;
	struct htab *by_hash; /* u64 hash -> first id with that hash */
};

struct stacks *stacks__new(void)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->by_hash = htab__new(sizeof(uint64_t), sizeof(uint32_t));
	s->refs = calloc(64, sizeof(*s->refs));
	if (!s->by_hash || !s->refs) {
		stacks__free(s);
		return NULL;
	}
	s->cap_refs = 64;
	s->nr_refs = 1;
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	htab__free(s->by_hash);
	free(s->frames);
	free(s->refs);
	free(s);
}

static bool same(const struct stacks *s, uint32_t id, const struct frame *f, uint32_t n)
{
	const struct stack_ref *r = &s->refs[id];

	return r->n == n && (!n || !memcmp(&s->frames[r->first], f, n * sizeof(*f)));
}

static int reserve(struct stacks *s, uint32_t n)
{
	if (s->nr_refs == s->cap_refs) {
		struct stack_ref *refs = realloc(s->refs, 2 * s->cap_refs * sizeof(*refs));

		if (!refs)
			return -ENOMEM;
		s->refs = refs;
		s->cap_refs *= 2;
	}
	if (s->nr_frames + n > s->cap_frames) {
		uint64_t cap = s->cap_frames ? s->cap_frames : 1024;
		struct frame *frames;

		while (cap < s->nr_frames + n)
			cap *= 2;
		frames = realloc(s->frames, cap * sizeof(*frames));
		if (!frames)
			return -ENOMEM;
		s->frames = frames;
		s->cap_frames = cap;
	}
	return 0;
}

uint32_t stacks__intern(struct stacks *s, const struct frame *frames, uint32_t n)
{
	uint64_t h = hash_bytes(frames, n * sizeof(*frames), 0x5eed);
	uint32_t *head, id;
	bool created;

	head = htab__upsert(s->by_hash, &h, &created);
	if (!head)
		return 0;
	if (!created)
		for (id = *head; id; id = s->refs[id].next)
			if (same(s, id, frames, n))
				return id;
	if (reserve(s, n)) {
		if (created)
			htab__delete(s->by_hash, &h);
		return 0;
	}
	id = s->nr_refs++;
	if (n)
		memcpy(&s->frames[s->nr_frames], frames, n * sizeof(*frames));
	s->refs[id] = (struct stack_ref){ s->nr_frames, n, created ? 0 : *head };
	s->nr_frames += n;
	*head = id;
	return id;
}

const struct frame *stacks__get(const struct stacks *s, uint32_t id, uint32_t *n)
{
	if (id == STACK_NONE || id >= s->nr_refs) {
		*n = 0;
		return NULL;
	}
	*n = s->refs[id].n;
	return *n ? &s->frames[s->refs[id].first] : NULL; /* an empty stack may have no array */
}

uint32_t stacks__count(const struct stacks *s)
{
	return s->nr_refs - 1;
}

size_t stacks__mem(const struct stacks *s)
{
	return sizeof(*s) + s->cap_frames * sizeof(struct frame) +
	       s->cap_refs * sizeof(struct stack_ref) + htab__mem(s->by_hash);
}
