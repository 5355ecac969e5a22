// SPDX-License-Identifier: BSD-2-Clause
/*
 * timeline.c - outstanding bytes per process and class over time, sampled
 * after every record the books apply: a point whenever a figure changed, the
 * last one of each resolution-wide bucket kept. Past max_points in all, the
 * resolution doubles and each process's points merge into the wider buckets
 * (the last of each), as analysis.c's series do, so memory stays bounded
 * however long the run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "books/books.h"
#include "timeline.h"

struct tl_proc {
	int pid;
	uint64_t start_time;
	uint32_t n, cap;
	struct snap_tpoint *pts;
};

struct timeline {
	struct books *b;
	struct books_hooks next; /* the hooks it is chained in front of */
	uint64_t res_ns, since_ns;
	uint32_t max_points, points;
	struct tl_proc *procs;
	uint32_t nprocs, cap_procs;
};

static struct tl_proc *proc_of(struct timeline *t, int pid, uint64_t start_time, bool create)
{
	for (uint32_t i = t->nprocs; i-- > 0;)
		if (t->procs[i].pid == pid && t->procs[i].start_time == start_time)
			return &t->procs[i];
	if (!create)
		return NULL;
	if (t->nprocs == t->cap_procs) {
		uint32_t cap = t->cap_procs ? t->cap_procs * 2 : 16;
		struct tl_proc *n = realloc(t->procs, cap * sizeof(*n));

		if (!n)
			return NULL;
		t->procs = n;
		t->cap_procs = cap;
	}
	t->procs[t->nprocs] = (struct tl_proc){ .pid = pid, .start_time = start_time };
	return &t->procs[t->nprocs++];
}

/* Doubles the resolution: each process's points merge, the last of each bucket kept. */
static void coarsen(struct timeline *t)
{
	t->res_ns = t->res_ns ? t->res_ns * 2 : 1000;
	t->points = 0;
	for (uint32_t i = 0; i < t->nprocs; i++) {
		struct tl_proc *p = &t->procs[i];
		uint32_t j = 0;

		for (uint32_t k = 0; k < p->n; k++) {
			if (j && p->pts[j - 1].ts / t->res_ns == p->pts[k].ts / t->res_ns)
				p->pts[j - 1] = p->pts[k];
			else
				p->pts[j++] = p->pts[k];
		}
		p->n = j;
		t->points += j;
	}
}

/* A point for the process's totals at ts, if a figure changed. */
static void sample_proc(struct timeline *t, const struct proc_totals *tot, uint64_t ts)
{
	struct snap_tpoint pt = { .ts = ts,
				  .device = tot->bytes[GL_CLASS_DEVICE],
				  .managed = tot->bytes[GL_CLASS_MANAGED],
				  .pinned = tot->bytes[GL_CLASS_HOST_PINNED],
				  .torch_block = tot->bytes[GL_CLASS_TORCH_BLOCK] };
	struct tl_proc *p = proc_of(t, tot->pid, tot->start_time, true);
	struct snap_tpoint *last;

	if (!p)
		return;
	last = p->n ? &p->pts[p->n - 1] : NULL;
	if (last && !memcmp(&last->device, &pt.device, 4 * sizeof(uint64_t)))
		return; /* nothing changed */
	if (last && pt.ts < last->ts)
		pt.ts = last->ts; /* records of several CPUs arrive a little out of order */
	if (last && t->res_ns && p->n > 1 && last->ts / t->res_ns == pt.ts / t->res_ns &&
	    p->pts[p->n - 2].ts / t->res_ns == pt.ts / t->res_ns) {
		*last = pt; /* the bucket's last change; its first stays, so each step is seen */
		return;
	}
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 64;
		struct snap_tpoint *n = realloc(p->pts, cap * sizeof(*n));

		if (!n)
			return; /* out of memory: this change is not drawn */
		p->pts = n;
		p->cap = cap;
	}
	p->pts[p->n++] = pt;
	if (++t->points > t->max_points)
		coarsen(t);
}

static void sample(struct timeline *t, const struct gl_hdr *h)
{
	struct proc *proc = procs__find_pid(books__procs(t->b), h->pid);

	if (proc)
		sample_proc(t, proc__totals(proc), h->ts);
}

static void on_applied(void *ctx, const void *data, size_t size, uint32_t stack)
{
	struct timeline *t = ctx;

	if (t->next.applied)
		t->next.applied(t->next.ctx, data, size, stack);
	if (size >= sizeof(struct gl_hdr))
		sample(t, data);
}

static void on_proc_new(void *ctx, struct proc *proc)
{
	struct timeline *t = ctx;

	if (t->next.proc_new)
		t->next.proc_new(t->next.ctx, proc);
}

static void on_proc_end(void *ctx, struct proc *proc, uint32_t event)
{
	struct timeline *t = ctx;
	const struct proc_totals *tot = proc__totals(proc);
	struct tl_proc *p;

	if (t->next.proc_end)
		t->next.proc_end(t->next.ctx, proc, event);
	/* the books at the exit (the driver frees everything) */
	p = proc_of(t, tot->pid, tot->start_time, false);
	if (p && p->n)
		sample_proc(t, tot,
			    tot->exit_ns > p->pts[p->n - 1].ts ? tot->exit_ns :
								 p->pts[p->n - 1].ts);
}

static void on_libs_changed(void *ctx, int pid)
{
	struct timeline *t = ctx;

	if (t->next.libs_changed)
		t->next.libs_changed(t->next.ctx, pid);
}

static void on_oom_nvml(void *ctx, int pid, int dev, struct oom_facts *facts)
{
	struct timeline *t = ctx;

	if (t->next.oom_nvml)
		t->next.oom_nvml(t->next.ctx, pid, dev, facts);
}

static void on_failure(void *ctx, struct proc *proc, const struct failure *f)
{
	struct timeline *t = ctx;

	if (t->next.failure)
		t->next.failure(t->next.ctx, proc, f);
}

struct timeline *timeline__new(struct books *b, uint64_t resolution_ns, uint32_t max_points)
{
	struct timeline *t = calloc(1, sizeof(*t));
	struct books_hooks h = {
		.proc_new = on_proc_new,
		.proc_end = on_proc_end,
		.libs_changed = on_libs_changed,
		.oom_nvml = on_oom_nvml,
		.failure = on_failure,
		.applied = on_applied,
	};

	if (!t)
		return NULL;
	t->b = b;
	t->res_ns = resolution_ns;
	t->max_points = max_points ? max_points : 1;
	t->next = *books__hooks(b);
	h.ctx = t;
	books__set_hooks(b, &h);
	return t;
}

void timeline__free(struct timeline *t)
{
	if (!t)
		return;
	books__set_hooks(t->b, &t->next);
	for (uint32_t i = 0; i < t->nprocs; i++)
		free(t->procs[i].pts);
	free(t->procs);
	free(t);
}

void timeline__proc(struct timeline *t, int pid, uint64_t start_time, struct snap_timeline *out)
{
	struct tl_proc *p = proc_of(t, pid, start_time, false);

	*out = (struct snap_timeline){ .resolution_ns = t->res_ns };
	if (p) {
		out->n = p->n;
		out->pts = p->pts;
	}
}
