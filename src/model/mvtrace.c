// SPDX-License-Identifier: BSD-2-Clause
/*
 * mvtrace.c - each process's PyTorch memory events, as the books apply them,
 * for the memory_viz snapshot's device_traces (--memory-viz): a tensor block
 * handed out ("alloc") or given back ("free_completed"), a segment PyTorch's
 * caching allocator took from the driver ("segment_alloc") or gave back
 * ("segment_free"), each with its time, address, size and stack. Kept in a
 * ring per process, as PyTorch's own recorder keeps max_entries: the oldest
 * go first and are counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "books/books.h"
#include "mvtrace.h"
#include "snapshot_int.h"
#include "util/htab.h"

struct mv_proc {
	int pid;
	uint64_t start_time;
	struct mv_event *ev; /* a ring of max events */
	uint32_t head, n;
	uint64_t dropped;
	struct htab *segs; /* live segments of PyTorch's allocator: address -> size */
};

struct mvtrace {
	struct books *b;
	uint32_t max;
	struct mv_proc *procs;
	uint32_t nprocs, cap_procs;
	struct htab *torch_stacks; /* stack id -> 1 (PyTorch's allocator) or 2 (not) */
};

static struct mv_proc *proc_of(struct mvtrace *t, int pid, uint64_t start_time)
{
	for (uint32_t i = t->nprocs; i-- > 0;)
		if (t->procs[i].pid == pid && t->procs[i].start_time == start_time)
			return &t->procs[i];
	if (t->nprocs == t->cap_procs) {
		uint32_t cap = t->cap_procs ? t->cap_procs * 2 : 8;
		struct mv_proc *n = realloc(t->procs, cap * sizeof(*n));

		if (!n)
			return NULL;
		t->procs = n;
		t->cap_procs = cap;
	}
	t->procs[t->nprocs] = (struct mv_proc){ .pid = pid, .start_time = start_time };
	t->procs[t->nprocs].segs = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	t->procs[t->nprocs].ev = calloc(t->max, sizeof(struct mv_event));
	if (!t->procs[t->nprocs].segs || !t->procs[t->nprocs].ev) {
		htab__free(t->procs[t->nprocs].segs);
		free(t->procs[t->nprocs].ev);
		return NULL;
	}
	return &t->procs[t->nprocs++];
}

/* Whether a stack allocates for PyTorch's caching allocator (its segments), cached. */
static bool torch_stack(struct mvtrace *t, uint32_t id)
{
	uint32_t *known = htab__lookup(t->torch_stacks, &id);
	bool created;

	if (known)
		return *known == 1;
	known = htab__upsert(t->torch_stacks, &id, &created);
	if (!known)
		return snap_stacks__torch_allocator(t->b, id);
	*known = snap_stacks__torch_allocator(t->b, id) ? 1 : 2;
	return *known == 1;
}

static void add(struct mvtrace *t, struct mv_proc *p, const struct mv_event *e)
{
	if (p->n == t->max) {
		p->head = (p->head + 1) % t->max;
		p->n--;
		p->dropped++;
	}
	p->ev[(p->head + p->n++) % t->max] = *e;
}

static void on_applied(void *ctx, const void *data, size_t size, uint32_t stack)
{
	struct mvtrace *t = ctx;
	const struct gl_call *c = data;
	struct mv_event e = { 0 };
	struct proc *proc;
	struct mv_proc *p;

	if (size < sizeof(*c) || c->hdr.type != GL_REC_CALL ||
	    (c->op != GL_OP_ALLOC && c->op != GL_OP_FREE) || !c->key)
		return;
	if (c->cls != GL_CLASS_TORCH_BLOCK && c->cls != GL_CLASS_DEVICE)
		return;
	proc = procs__find_pid(books__procs(t->b), c->hdr.pid);
	if (!proc)
		return;
	p = proc_of(t, c->hdr.pid, proc__totals(proc)->start_time);
	if (!p)
		return;
	e = (struct mv_event){ .ts = c->hdr.ts,
			       .addr = c->key,
			       .size = c->bytes,
			       .stack = stack,
			       .dev = (int8_t)c->dev };
	if (c->cls == GL_CLASS_TORCH_BLOCK) {
		e.action = c->op == GL_OP_ALLOC ? MV_ALLOC : MV_FREE_COMPLETED;
	} else if (c->op == GL_OP_ALLOC) {
		bool created;
		uint64_t *v;

		if (!stack || !torch_stack(t, stack))
			return;
		v = htab__upsert(p->segs, &e.addr, &created);
		if (v)
			*v = e.size;
		e.action = MV_SEGMENT_ALLOC;
	} else {
		uint64_t *v = htab__lookup(p->segs, &e.addr);

		if (!v)
			return; /* not a segment of PyTorch's allocator */
		if (!e.size)
			e.size = *v;
		htab__delete(p->segs, &e.addr);
		e.action = MV_SEGMENT_FREE;
	}
	add(t, p, &e);
}

struct mvtrace *mvtrace__new(struct books *b, uint32_t max_events)
{
	struct mvtrace *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->b = b;
	t->max = max_events ? max_events : 1;
	t->torch_stacks = htab__new(sizeof(uint32_t), sizeof(uint32_t));
	if (!t->torch_stacks) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	if (books__observe(b, on_applied, t)) {
		htab__free(t->torch_stacks);
		free(t);
		errno = ENOSPC;
		return NULL;
	}
	return t;
}

void mvtrace__free(struct mvtrace *t)
{
	if (!t)
		return;
	books__unobserve(t->b, on_applied, t);
	for (uint32_t i = 0; i < t->nprocs; i++) {
		free(t->procs[i].ev);
		htab__free(t->procs[i].segs);
	}
	free(t->procs);
	htab__free(t->torch_stacks);
	free(t);
}

int mvtrace__proc(const struct mvtrace *t, int pid, uint64_t start_time, struct mv_event **out,
		  uint32_t *n, uint64_t *dropped)
{
	*out = NULL;
	*n = 0;
	*dropped = 0;
	for (uint32_t i = 0; i < t->nprocs; i++) {
		const struct mv_proc *p = &t->procs[i];

		if (p->pid != pid || p->start_time != start_time)
			continue;
		*out = calloc(p->n ? p->n : 1, sizeof(**out));
		if (!*out)
			return -ENOMEM;
		for (uint32_t j = 0; j < p->n; j++)
			(*out)[j] = p->ev[(p->head + j) % t->max];
		*n = p->n;
		*dropped = p->dropped;
		return 0;
	}
	return 0;
}
