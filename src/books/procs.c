// SPDX-License-Identifier: BSD-2-Clause
/*
 * procs.c - process table. Processes live in an array (creation order, for
 * stable reports) with a hash index on (pid, start time). Also the devices a
 * process's allocations are on, where BPF could not tell, and the job's ranks
 * from the launcher's variables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"
#include "proc_int.h"
#include "procs.h"
#include "util/log.h"
#include "util/procfs.h"

struct proc_key {
	uint64_t start_time;
	int32_t pid;
	int32_t pad;
};

struct procs {
	struct proc **list;
	uint32_t nr, cap;
	struct htab *index; /* proc_key -> struct proc * */
	uint32_t max;
	uint64_t refused;
};

struct procs *procs__new(void)
{
	struct procs *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->index = htab__new(sizeof(struct proc_key), sizeof(struct proc *));
	if (!p->index) {
		free(p);
		return NULL;
	}
	return p;
}

static void free_aggs(struct htab *aggs)
{
	struct agg *a;
	size_t it = 0;

	if (!aggs)
		return;
	while ((a = htab__next(aggs, &it, NULL)))
		series__free(a->series);
}

static void proc_free(struct proc *proc)
{
	if (!proc)
		return;
	proc__retire(proc);
	htab__free(proc->at_exit);
	free_aggs(proc->aggs);
	htab__free(proc->aggs);
	series__free(proc->device_series);
	free(proc->ctxs);
	free(proc->unknown);
	free(proc);
}

void procs__free(struct procs *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nr; i++)
		proc_free(p->list[i]);
	free(p->list);
	htab__free(p->index);
	free(p);
}

static struct proc *proc_new(int pid, uint64_t start_time)
{
	struct proc *proc = calloc(1, sizeof(*proc));
	char state;

	if (!proc)
		return NULL;
	proc->t.pid = pid;
	proc->t.start_time = start_time;
	proc->allocs = htab__new(sizeof(struct alloc_key), sizeof(struct alloc_val));
	proc->aggs = htab__new(sizeof(struct agg_key), sizeof(struct agg));
	proc->pending = htab__new(sizeof(struct pending_key), sizeof(struct pending));
	if (!proc->allocs || !proc->aggs || !proc->pending) {
		proc_free(proc);
		return NULL;
	}
	if (procfs__comm(pid, proc->t.comm, sizeof(proc->t.comm)))
		snprintf(proc->t.comm, sizeof(proc->t.comm), "?");
	proc->t.ns_pid = procfs__ns_pid(pid);
	if (procfs__stat(pid, &proc->t.ppid, &state))
		proc->t.ppid = 0;
	proc->t.rank = proc->t.local_rank = proc->t.world_size = -1;
	return proc;
}

struct proc *procs__get(struct procs *p, int pid, uint64_t start_time, bool *created)
{
	struct proc_key k = { .start_time = start_time, .pid = pid };
	struct proc **slot, *proc;
	bool fresh;

	if (created)
		*created = false;
	if (p->max && p->nr >= p->max && !htab__lookup(p->index, &k)) {
		p->refused++;
		errno = ENOSPC;
		return NULL;
	}
	slot = htab__upsert(p->index, &k, &fresh);
	if (!slot)
		return NULL;
	if (!fresh)
		return *slot;
	if (p->nr == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 16;
		struct proc **list = realloc(p->list, cap * sizeof(*list));

		if (!list) {
			htab__delete(p->index, &k);
			return NULL;
		}
		p->list = list;
		p->cap = cap;
	}
	proc = proc_new(pid, start_time);
	if (!proc) {
		htab__delete(p->index, &k);
		return NULL;
	}
	*slot = proc;
	p->list[p->nr++] = proc;
	if (created)
		*created = true;
	return proc;
}

struct proc *procs__find_pid(struct procs *p, int pid)
{
	for (uint32_t i = p->nr; i > 0; i--)
		if (p->list[i - 1]->t.pid == pid)
			return p->list[i - 1];
	return NULL;
}

void procs__remove(struct procs *p, struct proc *proc)
{
	struct proc_key k = { .start_time = proc->t.start_time, .pid = proc->t.pid };

	htab__delete(p->index, &k);
	for (uint32_t i = 0; i < p->nr; i++) {
		if (p->list[i] != proc)
			continue;
		memmove(&p->list[i], &p->list[i + 1], (p->nr - i - 1) * sizeof(*p->list));
		p->nr--;
		break;
	}
	proc_free(proc);
}

void procs__set_max(struct procs *p, uint32_t max)
{
	p->max = max;
}

uint64_t procs__refused(const struct procs *p)
{
	return p->refused;
}

uint32_t procs__forget_exited(struct procs *p, uint64_t exited_before,
			      void (*cb)(void *ctx, struct proc *proc), void *ctx)
{
	uint32_t kept = 0, n = p->nr;

	for (uint32_t i = 0; i < n; i++) {
		struct proc *proc = p->list[i];
		struct proc_key k = { .start_time = proc->t.start_time, .pid = proc->t.pid };

		if (!proc->t.exited || proc->t.exit_ns > exited_before) {
			p->list[kept++] = proc;
			continue;
		}
		if (cb)
			cb(ctx, proc);
		htab__delete(p->index, &k);
		proc_free(proc);
	}
	p->nr = kept;
	return n - kept;
}

struct proc *procs__at(struct procs *p, uint32_t i)
{
	return i < p->nr ? p->list[i] : NULL;
}

uint32_t procs__count(const struct procs *p)
{
	return p->nr;
}

void proc__clear_books(struct proc *proc)
{
	if (proc->allocs)
		htab__clear(proc->allocs);
	if (proc->pending)
		htab__clear(proc->pending);
	free_aggs(proc->aggs);
	htab__clear(proc->aggs);
	memset(proc->t.bytes, 0, sizeof(proc->t.bytes));
	memset(proc->t.nallocs, 0, sizeof(proc->t.nallocs));
	memset(proc->t.dev_bytes, 0, sizeof(proc->t.dev_bytes));
	proc->t.unknown_dev_bytes = 0;
	proc->nr_unknown = 0;
	proc->unknown_skipped = 0;
	/* BPF's close_books() zeroes its counters too: both books start over */
	proc->t.peak_device = 0;
	proc->t.alloc_calls = proc->t.free_calls = proc->t.failures = proc->t.oom_failures = 0;
	proc->t.unmatched_frees = proc->t.failed_frees = proc->t.dropped_bytes = proc->t.no_stack =
		0;
	proc->t.ctx_drops = 0;
	series__reset(proc->device_series);
	proc->nr_ctxs = 0;
	proc->nr_fails = 0;
	proc->retry_open = 0;
}

void proc__retire(struct proc *proc)
{
	htab__free(proc->allocs);
	htab__free(proc->pending);
	addr_map__free(proc->am);
	proc->allocs = NULL;
	proc->pending = NULL;
	proc->am = NULL;
}

uint16_t proc__ctx_index(struct proc *proc, uint64_t ctx)
{
	if (!ctx)
		return 0;
	for (uint16_t i = 0; i < proc->nr_ctxs; i++)
		if (proc->ctxs[i].ctx == ctx)
			return i + 1;
	if (proc->nr_ctxs == UINT16_MAX - 1)
		return 0;
	if (proc->nr_ctxs == proc->cap_ctxs) {
		uint32_t cap = proc->cap_ctxs ? proc->cap_ctxs * 2 : 4;
		struct proc_ctx *ctxs;

		if (cap > UINT16_MAX)
			cap = UINT16_MAX;
		ctxs = realloc(proc->ctxs, cap * sizeof(*ctxs));
		if (!ctxs)
			return 0;
		proc->ctxs = ctxs;
		proc->cap_ctxs = cap;
	}
	proc->ctxs[proc->nr_ctxs] = (struct proc_ctx){ .ctx = ctx, .dev = -1 };
	return ++proc->nr_ctxs;
}

size_t proc__mem(const struct proc *proc)
{
	return sizeof(*proc) + (proc->allocs ? htab__mem(proc->allocs) : 0) +
	       htab__mem(proc->aggs) + (proc->pending ? htab__mem(proc->pending) : 0);
}

/*
 * The device of a device allocation is the one of the context current on the
 * calling thread; a context made current before attach is not known to BPF,
 * so its allocations come with device -1. PyTorch's probes name the device of
 * each tensor block, and a block lies inside the segment it was carved from:
 * a segment of unknown device that holds a block of device D is on D, and so
 * is everything allocated in the same context. The candidates are kept in
 * proc->unknown, checked against the books when looked at.
 */
#define MAX_UNKNOWN_DEV 1024

static struct alloc_val *unknown_alloc(struct proc *proc, const struct unknown_dev *u)
{
	struct alloc_key k = { .key = u->addr, .kind = GL_KIND_DPTR };
	struct alloc_val *v = htab__lookup(proc->allocs, &k);

	return v && v->cls == GL_CLASS_DEVICE && v->dev < 0 && v->size == u->size ? v : NULL;
}

static void set_device(struct proc *proc, struct alloc_val *v, int dev)
{
	struct agg_key k = { .stack = v->stack, .cls = v->cls };
	struct agg *a = htab__lookup(proc->aggs, &k);

	v->dev = (int8_t)dev;
	proc->t.unknown_dev_bytes -= v->size;
	proc->t.dev_bytes[dev] += v->size;
	if (a)
		a->dev_bytes[dev] += v->size; /* its stack's share of the device, as of now */
}

void proc__note_unknown_dev(struct proc *proc, uint64_t addr, uint64_t size)
{
	uint32_t n = 0;

	if (proc->nr_unknown == proc->cap_unknown) {
		/* full at the cap of live allocations: look again only after as many
		 * more, so that a call pays O(1) on average */
		if (proc->cap_unknown == MAX_UNKNOWN_DEV &&
		    ++proc->unknown_skipped < MAX_UNKNOWN_DEV)
			return;
		proc->unknown_skipped = 0;
		/* drop what is gone first, then grow up to the cap */
		for (uint32_t i = 0; i < proc->nr_unknown; i++)
			if (unknown_alloc(proc, &proc->unknown[i]))
				proc->unknown[n++] = proc->unknown[i];
		proc->nr_unknown = n;
	}
	if (proc->nr_unknown == proc->cap_unknown) {
		uint32_t cap = proc->cap_unknown ? proc->cap_unknown * 2 : 8;
		struct unknown_dev *u;

		if (cap > MAX_UNKNOWN_DEV || !(u = realloc(proc->unknown, cap * sizeof(*u))))
			return;
		proc->unknown = u;
		proc->cap_unknown = cap;
	}
	proc->unknown[proc->nr_unknown++] = (struct unknown_dev){ addr, size };
}

void proc__learn_device(struct proc *proc, uint64_t block, int dev)
{
	struct alloc_val *v = NULL;
	uint16_t ctx = 0;
	uint32_t n = 0;

	if (dev < 0 || dev >= PROC_MAX_DEVICES)
		return;
	for (uint32_t i = 0; i < proc->nr_unknown && !v; i++) {
		const struct unknown_dev *u = &proc->unknown[i];

		if (block >= u->addr && block - u->addr < u->size)
			v = unknown_alloc(proc, u);
	}
	if (!v)
		return;
	ctx = v->ctx;
	set_device(proc, v, dev);
	if (ctx && proc->ctxs[ctx - 1].dev < 0)
		proc->ctxs[ctx - 1].dev = (int16_t)dev;
	/* the rest of that context's allocations, and what is gone, leave the list */
	for (uint32_t i = 0; i < proc->nr_unknown; i++) {
		v = unknown_alloc(proc, &proc->unknown[i]);
		if (v && ctx && v->ctx == ctx)
			set_device(proc, v, dev);
		else if (v)
			proc->unknown[n++] = proc->unknown[i];
	}
	proc->nr_unknown = n;
}

const struct proc_totals *proc__totals(const struct proc *proc)
{
	return &proc->t;
}

const struct agg *proc__next_agg(const struct proc *proc, size_t *it, const struct agg_key **key)
{
	return htab__next(proc->aggs, it, (const void **)key);
}

const struct alloc_val *proc__next_alloc(const struct proc *proc, size_t *it,
					 const struct alloc_key **key)
{
	return proc->allocs ? htab__next(proc->allocs, it, (const void **)key) : NULL;
}

const struct alloc_val *proc__next_held(const struct proc *proc, size_t *it,
					const struct alloc_key **key)
{
	const struct htab *h = proc->allocs ? proc->allocs : proc->at_exit;

	return h ? htab__next(h, it, (const void **)key) : NULL;
}

void proc__keep_at_exit(struct proc *proc)
{
	if (!proc->allocs)
		return;
	htab__free(proc->at_exit);
	proc->at_exit = proc->allocs;
	proc->allocs = NULL;
}

bool proc__live(const struct proc *proc)
{
	return proc->allocs != NULL;
}

size_t proc__nr_aggs(const struct proc *proc)
{
	return htab__count(proc->aggs);
}

uint32_t proc__nr_failures(const struct proc *proc)
{
	return proc->nr_fails < PROC_MAX_FAILURES ? proc->nr_fails : PROC_MAX_FAILURES;
}

const struct failure *proc__failure(const struct proc *proc, uint32_t i)
{
	uint32_t first = proc->nr_fails - proc__nr_failures(proc);

	return &proc->fails[(first + i) % PROC_MAX_FAILURES];
}

const struct series *proc__device_series(const struct proc *proc)
{
	return proc->device_series;
}

int proc__env_ranks(int pid, uint64_t start_ns, int v[3])
{
	static const char *const names[] = { "RANK", "LOCAL_RANK", "WORLD_SIZE" };
	int err;

	if (!procfs__same_process(pid, start_ns))
		return -ESRCH;
	err = procfs__environ_ints(pid, names, v, 3);
	if (err)
		log_debug("PID %d: cannot read its environment for RANK: %s", pid, strerror(-err));
	return err;
}

void proc__set_ranks(struct proc *proc, const int v[3])
{
	proc->ranks_read = true;
	proc->t.rank = v[0];
	proc->t.local_rank = v[1];
	proc->t.world_size = v[2];
}

void proc__read_ranks(struct proc *proc)
{
	int v[3];

	if (proc->ranks_read)
		return;
	/* at its first call, after any exec: a launcher's child before its exec
	 * still has the launcher's environment */
	proc->ranks_read = true;
	if (!proc__env_ranks(proc->t.pid, proc->t.start_time, v))
		proc__set_ranks(proc, v);
}
