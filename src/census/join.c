// SPDX-License-Identifier: BSD-2-Clause
/*
 * join.c - the census joined with the books: each tensor's storage looked up
 * by address among the outstanding allocations (blocks before segments), and
 * the leaking sites gathered with the holders of the tensors in them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "join.h"

/* Blocks first, then segments; each by address. */
static int cmp_book(const void *x, const void *y)
{
	const struct census_book *a = x, *b = y;

	if (a->block != b->block)
		return a->block ? -1 : 1;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->size < b->size ? -1 : a->size > b->size;
}

void census__join_prepare(struct census_books *b)
{
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), cmp_book);
	for (b->nblocks = 0; b->nblocks < b->n && b->v[b->nblocks].block; b->nblocks++)
		;
}

/*
 * The allocation in v[0..n) (sorted by start, not overlapping: blocks do not overlap
 * blocks, nor segments segments) holding addr: the last one starting at or before it.
 */
static const struct census_book *find(const struct census_book *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first starting after addr */
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr - v[lo - 1].addr < v[lo - 1].size ? &v[lo - 1] : NULL;
}

static void join_one(const struct census *c, const struct census_books *b,
		     const struct census_tensor *t, struct census_join *j)
{
	*j = (struct census_join){ 0 };
	if (!c->layout_ok || !t->storage) {
		j->kind = CENSUS_JOIN_UNVERIFIED;
		return;
	}
	if (!b || !b->traced) {
		j->kind = CENSUS_JOIN_NO_BOOKS;
		return;
	}
	if (!t->data || !t->nbytes) {
		j->kind = CENSUS_JOIN_EMPTY;
		return;
	}
	j->book = find(b->v, b->nblocks, t->data);
	if (j->book) {
		j->kind = CENSUS_JOIN_BLOCK;
		return;
	}
	j->book = find(b->v + b->nblocks, b->n - b->nblocks, t->data);
	if (j->book) {
		j->kind = CENSUS_JOIN_SEGMENT;
		j->block_unknown = b->blocks_windowed;
		return;
	}
	/* CPU memory is never in the books; device memory in none seen is older than them */
	j->kind = t->dev_type == 0 ? CENSUS_JOIN_CPU : CENSUS_JOIN_PRE_ATTACH;
}

static struct census_leak *leak_of(struct census_joined *out, size_t *cap, const char *site)
{
	for (size_t i = 0; i < out->nr_leaks; i++)
		if (out->leaks[i].site == site ||
		    (site && out->leaks[i].site && !strcmp(out->leaks[i].site, site)))
			return &out->leaks[i];
	if (out->nr_leaks == *cap) {
		size_t n = *cap ? *cap * 2 : 8;
		struct census_leak *p = realloc(out->leaks, n * sizeof(*p));

		if (!p)
			return NULL;
		out->leaks = p;
		*cap = n;
	}
	out->leaks[out->nr_leaks] = (struct census_leak){ .site = site };
	return &out->leaks[out->nr_leaks++];
}

static void add_holder(struct census_leak *l, const char *path)
{
	for (int i = 0; i < l->nr_holders; i++)
		if (!strcmp(l->holders[i], path))
			return;
	if (l->nr_holders < CENSUS_MAX_HOLDERS)
		l->holders[l->nr_holders++] = path;
}

/* Whether an earlier tensor of the same storage was counted already. */
static bool storage_seen(const struct census *c, const struct census_joined *out, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (c->tensors[k].storage == c->tensors[i].storage &&
		    out->tensors[k].book == out->tensors[i].book)
			return true;
	return false;
}

static int cmp_leak(const void *x, const void *y)
{
	const struct census_leak *a = x, *b = y;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(a->site ?: "", b->site ?: "");
}

int census__join(const struct census *c, const struct census_books *b, struct census_joined *out)
{
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	out->tensors = calloc(c->nr_tensors ? c->nr_tensors : 1, sizeof(*out->tensors));
	if (!out->tensors)
		return -ENOMEM;
	for (size_t i = 0; i < c->nr_tensors; i++) {
		const struct census_tensor *t = &c->tensors[i];
		struct census_join *j = &out->tensors[i];
		bool again;
		struct census_leak *l;

		join_one(c, b, t, j);
		again = storage_seen(c, out, i);
		if (j->kind == CENSUS_JOIN_PRE_ATTACH) {
			out->pre_attach_tensors++;
			out->pre_attach_bytes += again ? 0 : t->nbytes;
		}
		if (j->book)
			out->joined_tensors++;
		if (!j->book || !j->book->leak)
			continue;
		l = leak_of(out, &cap, j->book->site);
		if (!l) {
			census__joined_free(out);
			return -ENOMEM;
		}
		l->tensors++;
		if (!again) {
			l->storages++;
			l->bytes += t->nbytes;
		}
		if (t->group >= 0 && (size_t)t->group < c->nr_groups)
			add_holder(l, c->groups[t->group].path);
		else if (t->nr_holders)
			add_holder(l, t->holders[0]);
		else
			l->no_holder++;
	}
	if (out->nr_leaks)
		qsort(out->leaks, out->nr_leaks, sizeof(*out->leaks), cmp_leak);
	return 0;
}

void census__joined_free(struct census_joined *j)
{
	if (!j)
		return;
	free(j->tensors);
	free(j->leaks);
	memset(j, 0, sizeof(*j));
}

const char *census__join_name(enum census_join_kind k)
{
	static const char *const names[] = {
		[CENSUS_JOIN_BLOCK] = "block",		 [CENSUS_JOIN_SEGMENT] = "segment",
		[CENSUS_JOIN_PRE_ATTACH] = "pre_attach", [CENSUS_JOIN_CPU] = "cpu",
		[CENSUS_JOIN_NO_BOOKS] = "no_books",	 [CENSUS_JOIN_EMPTY] = "empty",
		[CENSUS_JOIN_UNVERIFIED] = "unverified",
	};

	return k <= CENSUS_JOIN_UNVERIFIED ? names[k] : "unknown";
}

const char *census__join_why(const struct census_books *b, const struct census_join *j)
{
	switch (j->kind) {
	case CENSUS_JOIN_BLOCK: return NULL;
	case CENSUS_JOIN_SEGMENT:
		if (!j->block_unknown)
			return "its block is not in the books (only the segment it lies in)";
		return b && b->window_open ?
			       "its block was made before the open tensor window: only the "
			       "segment it lies in is known" :
			       "the tensor level is traced in windows and none is open: only the "
			       "segment it lies in is known";
	case CENSUS_JOIN_PRE_ATTACH:
		return "device memory in no allocation gpuleak saw: it predates the attach";
	case CENSUS_JOIN_CPU: return "CPU memory: not in gpuleak's books (they hold device memory)";
	case CENSUS_JOIN_NO_BOOKS:
		return "gpuleak did not trace the process (attach --census joins the books)";
	case CENSUS_JOIN_EMPTY: return "no memory (an empty storage)";
	case CENSUS_JOIN_UNVERIFIED: return "the tensor's storage was not read";
	}
	return "unknown";
}

static const struct census_group *group_named(const struct census *c, const char *path)
{
	for (size_t i = 0; i < c->nr_groups; i++)
		if (!strcmp(c->groups[i].path, path))
			return &c->groups[i];
	return NULL;
}

void census__leak_reading(const struct census *c, const struct census_leak *l, char *buf,
			  size_t len)
{
	const struct census_group *g = l->nr_holders ? group_named(c, l->holders[0]) : NULL;
	const char *all = l->nr_holders == 1 && !l->no_holder ? "all" : "some";

	if (g &&
	    (!strcmp(g->kind, "list") || !strcmp(g->kind, "tuple") || !strcmp(g->kind, "dict"))) {
		snprintf(buf, len,
			 "%s, a %s of %llu, holds %s of its %d tensors while the line's memory "
			 "rises step after step: outputs or losses kept in a %s stay in device "
			 "memory; keep .item() of numbers and .detach().cpu() of tensors, or keep "
			 "none",
			 g->path, g->kind, (unsigned long long)g->length, all, l->tensors, g->kind);
	} else if (l->nr_holders) {
		snprintf(buf, len,
			 "%s (%s) holds %s of its %d tensors while the line's memory rises step "
			 "after step: an object that keeps each step's tensor; keep a bounded "
			 "number, or .detach().cpu() copies",
			 l->holders[0], g ? g->kind : "a name", all, l->tensors);
	} else if (c->nr_graphs) {
		snprintf(buf, len,
			 "no Python object holds its %d tensors; the autograd graph reachable "
			 "from %s may: a loss summed across steps keeps every step's graph alive; "
			 "accumulate loss.item(), not the loss",
			 l->tensors, c->graphs[0]);
	} else {
		snprintf(buf, len,
			 "no Python object the census reached holds its %d tensors: C++ code (an "
			 "extension, the autograd engine) or a container the census does not "
			 "enter keeps them",
			 l->tensors);
	}
}
