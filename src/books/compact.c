// SPDX-License-Identifier: BSD-2-Clause
/*
 * compact.c - renumbering the books' stacks: the stacks no process refers to
 * any more (aggregates, allocations, stacks parked by calls in flight,
 * failures and their holders) leave the stack table, and every process's ids
 * are rewritten (books__compact_stacks(), books.h).
 */
#include <errno.h>
#include <stdlib.h>
#include "books.h"
#include "proc_int.h"
#include "stacks/stacks.h"
#include "util/log.h"

static void mark_stacks(struct proc *proc, uint8_t *keep)
{
	const struct agg_key *k;
	struct alloc_val *v;
	struct pending *pd;
	size_t it = 0;

	while (htab__next(proc->aggs, &it, (const void **)&k))
		keep[k->stack] = 1;
	it = 0;
	while (proc->allocs && (v = htab__next(proc->allocs, &it, NULL)))
		keep[v->stack] = 1;
	it = 0;
	while (proc->pending && (pd = htab__next(proc->pending, &it, NULL)))
		keep[pd->stack] = 1;
	for (uint32_t i = 0; i < PROC_MAX_FAILURES && i < proc->nr_fails; i++) {
		keep[proc->fails[i].stack] = 1;
		for (uint32_t h = 0; h < proc->fails[i].nr_holders; h++)
			keep[proc->fails[i].holders[h].stack] = 1;
	}
}

/* Rewrites a process's stack ids; aggregates are re-keyed into a new table. */
static int remap_stacks(struct proc *proc, const uint32_t *remap)
{
	struct htab *aggs = htab__new(sizeof(struct agg_key), sizeof(struct agg));
	const struct agg_key *k;
	struct alloc_val *v;
	struct pending *pd;
	struct agg *a, *na;
	size_t it = 0;

	if (!aggs)
		return -ENOMEM;
	while ((a = htab__next(proc->aggs, &it, (const void **)&k))) {
		struct agg_key nk = { .stack = remap[k->stack], .cls = k->cls };

		na = htab__upsert(aggs, &nk, NULL);
		if (!na) {
			htab__free(aggs);
			return -ENOMEM;
		}
		*na = *a;
	}
	htab__free(proc->aggs); /* the series moved to the new table */
	proc->aggs = aggs;
	it = 0;
	while (proc->allocs && (v = htab__next(proc->allocs, &it, NULL)))
		v->stack = remap[v->stack];
	it = 0;
	while (proc->pending && (pd = htab__next(proc->pending, &it, NULL)))
		pd->stack = remap[pd->stack];
	for (uint32_t i = 0; i < PROC_MAX_FAILURES && i < proc->nr_fails; i++) {
		proc->fails[i].stack = remap[proc->fails[i].stack];
		for (uint32_t h = 0; h < proc->fails[i].nr_holders; h++)
			proc->fails[i].holders[h].stack = remap[proc->fails[i].holders[h].stack];
	}
	return 0;
}

int books__compact_stacks(struct books *b)
{
	uint32_t count = stacks__count(books__stacks(b)) + 1, after;
	uint8_t *keep = calloc(count, 1);
	uint32_t *remap = calloc(count, sizeof(*remap));
	struct proc *proc;
	int err = -ENOMEM;

	if (!keep || !remap)
		goto cleanup;
	for (uint32_t i = 0; (proc = procs__at(books__procs(b), i)); i++)
		mark_stacks(proc, keep);
	err = stacks__compact(books__stacks(b), keep, remap);
	if (err)
		goto cleanup;
	for (uint32_t i = 0; (proc = procs__at(books__procs(b), i)); i++)
		if (remap_stacks(proc, remap))
			log_warn("out of memory renumbering the stacks of PID %d", proc->t.pid);
	after = stacks__count(books__stacks(b));
	err = (int)(count - 1 - after);
cleanup:
	free(keep);
	free(remap);
	return err;
}
