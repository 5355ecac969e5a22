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
#include "util/log.h"

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
	uint32_t max;	      /* distinct stacks kept, 0 = no cap */
	uint32_t overflow_id; /* the stack standing for those past the cap, 0 = none yet */
	uint64_t overflows;
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

/* Id of an interned stack equal to frames[0..n) with hash h, or 0. */
static uint32_t find(const struct stacks *s, uint64_t h, const struct frame *f, uint32_t n)
{
	const uint32_t *head = htab__lookup(s->by_hash, &h);

	for (uint32_t id = head ? *head : 0; id; id = s->refs[id].next)
		if (same(s, id, f, n))
			return id;
	return 0;
}

static uint32_t insert(struct stacks *s, uint64_t h, const struct frame *frames, uint32_t n)
{
	uint32_t *head, id;
	bool created;

	head = htab__upsert(s->by_hash, &h, &created);
	if (!head)
		return 0;
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

uint32_t stacks__intern(struct stacks *s, const struct frame *frames, uint32_t n)
{
	static const struct frame of = { .kind = FRAME_OVERFLOW };
	uint64_t h = hash_bytes(frames, n * sizeof(*frames), 0x5eed);
	uint32_t id = find(s, h, frames, n);

	if (id)
		return id;
	if (!s->max || s->nr_refs - 1 < s->max)
		return insert(s, h, frames, n);
	s->overflows++;
	if (!s->overflow_id) {
		s->overflow_id = insert(s, hash_bytes(&of, sizeof(of), 0x5eed), &of, 1);
		log_warn("the stack table is full (--max-stacks %u): allocations at new stacks "
			 "are counted under \"[stack table full]\" (totals stay exact; counted in "
			 "gpuleak_cap_hits_total{cap=\"stacks\"})",
			 s->max);
	}
	return s->overflow_id;
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

void stacks__set_max(struct stacks *s, uint32_t max)
{
	s->max = max;
}

uint64_t stacks__overflows(const struct stacks *s)
{
	return s->overflows;
}

size_t stacks__mem(const struct stacks *s)
{
	return sizeof(*s) + s->cap_frames * sizeof(struct frame) +
	       s->cap_refs * sizeof(struct stack_ref) + htab__mem(s->by_hash);
}

int stacks__compact(struct stacks *s, const uint8_t *keep, uint32_t *remap)
{
	struct stacks *n = stacks__new(), tmp;

	if (!n)
		return -ENOMEM;
	remap[0] = 0;
	for (uint32_t id = 1; id < s->nr_refs; id++) {
		const struct stack_ref *r = &s->refs[id];
		const struct frame *f = &s->frames[r->first];

		remap[id] = 0;
		if (!keep[id] && id != s->overflow_id)
			continue;
		remap[id] = insert(n, hash_bytes(f, r->n * sizeof(*f), 0x5eed), f, r->n);
		if (!remap[id]) {
			stacks__free(n);
			return -ENOMEM;
		}
	}
	n->max = s->max;
	n->overflows = s->overflows;
	n->overflow_id = remap[s->overflow_id];
	tmp = *s;
	*s = *n;
	*n = tmp;
	stacks__free(n);
	return 0;
}

const char *frame_note__name(uint32_t note)
{
	switch (note) {
	case NOTE_PY_INFERRED:
		return "[inferred caller: this thread runs no Python; below, the only Python thread "
		       "inside Python code at that moment]";
	case NOTE_PY_NONE:
		return "[no Python caller: this thread runs no Python and no Python thread was "
		       "inside Python code]";
	case NOTE_PY_AMBIGUOUS:
		return "[no Python caller: this thread runs no Python and several Python threads "
		       "were inside Python code; none inferred]";
	default: return NULL;
	}
}
