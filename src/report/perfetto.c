// SPDX-License-Identifier: BSD-2-Clause
/*
 * perfetto.c - memory over time as a Trace Event Format file (JSON), which
 * ui.perfetto.dev and chrome://tracing open: per process, counter tracks of
 * its outstanding device, pinned host, managed and PyTorch tensor-block bytes
 * (every change the books applied, at the timeline's resolution) and of its
 * top stacks (the books' buckets, each value drawn at its bucket's end); slices
 * for the tensor windows; instant events for out-of-memory failures and for
 * each stack judged to leak. Times are microseconds since tracing began.
 */
#include <errno.h>
#include <string.h>
#include "report.h"
#include "util/jsonw.h"

#define TOP_STACKS 8 /* stacks given a counter track, per process */

struct pf {
	struct jsonw *w;
	uint64_t origin_ns; /* ts 0 */
	uint64_t end_ns;    /* the snapshot's time */
};

static double us(const struct pf *pf, uint64_t ns)
{
	return ns > pf->origin_ns ? (double)(ns - pf->origin_ns) / 1e3 : 0;
}

static void head(struct pf *pf, const char *ph, const char *name, int pid, int tid, double ts)
{
	jsonw__start_object(pf->w);
	jsonw__field_string(pf->w, "ph", ph);
	jsonw__field_string(pf->w, "name", name);
	jsonw__field_s64(pf->w, "pid", pid);
	jsonw__field_s64(pf->w, "tid", tid);
	jsonw__field_double(pf->w, "ts", ts);
}

static void counter(struct pf *pf, const char *name, int pid, uint64_t ns, uint64_t bytes)
{
	head(pf, "C", name, pid, pid, us(pf, ns));
	jsonw__name(pf->w, "args");
	jsonw__start_object(pf->w);
	jsonw__field_u64(pf->w, "bytes", bytes);
	jsonw__end_object(pf->w);
	jsonw__end_object(pf->w);
}

static void meta(struct pf *pf, const char *what, int pid, int tid, const char *name)
{
	head(pf, "M", what, pid, tid, 0);
	jsonw__name(pf->w, "args");
	jsonw__start_object(pf->w);
	jsonw__field_string(pf->w, "name", name);
	jsonw__end_object(pf->w);
	jsonw__end_object(pf->w);
}

/* The process's classes over time: a point where a class's bytes changed. */
static void classes(struct pf *pf, const struct snap_proc *p)
{
	static const char *const names[] = { "device memory", "managed memory",
					     "pinned host memory", "PyTorch tensor blocks" };
	const struct snap_timeline *tl = &p->timeline;

	for (int c = 0; c < 4; c++) {
		uint64_t prev = UINT64_MAX;
		bool any = false;

		for (uint32_t i = 0; i < tl->n; i++) {
			const uint64_t *v = &tl->pts[i].device;

			any |= v[c] != 0;
		}
		if (!any)
			continue;
		for (uint32_t i = 0; i < tl->n; i++) {
			uint64_t v = (&tl->pts[i].device)[c];

			if (v != prev)
				counter(pf, names[c], p->pid, tl->pts[i].ts, v);
			prev = v;
		}
	}
}

/* A top stack's track: nothing before its first allocation, then each bucket's last
 * value at the bucket's end (the snapshot's time for the bucket still open). */
static void stack_track(struct pf *pf, const struct snap_proc *p, const struct snap_stack *st,
			int rank)
{
	char name[160], site[96];

	report__site(st, site, sizeof(site));
	snprintf(name, sizeof(name), "#%d %s (%s)", rank, site, st->verdict);
	counter(pf, name, p->pid, st->first_ns, 0);
	for (uint32_t i = 0; i < st->nhist; i++) {
		uint64_t end = st->hist[i].t_ns + st->hist_width_ns;

		counter(pf, name, p->pid, end < pf->end_ns ? end : pf->end_ns, st->hist[i].last);
	}
}

static void windows(struct pf *pf, const struct snap_proc *p)
{
	const struct snap_tensors *t = &p->tensors;

	if (!p->tensors_known || !t->nwindows)
		return;
	meta(pf, "thread_name", p->pid, p->pid + 1, "tensor windows");
	for (uint32_t i = 0; i < t->nwindows && i < SNAP_MAX_WINDOWS; i++) {
		const struct snap_window *win = &t->windows[i];
		double end = win->end_s >= 0 ? win->end_s : us(pf, pf->end_ns) / 1e6;

		head(pf, "X", "tensor window", p->pid, p->pid + 1, win->start_s * 1e6);
		jsonw__field_double(pf->w, "dur", (end - win->start_s) * 1e6);
		jsonw__name(pf->w, "args");
		jsonw__start_object(pf->w);
		jsonw__field_string(pf->w, "opened_by", win->why);
		jsonw__end_object(pf->w);
		jsonw__end_object(pf->w);
	}
}

static void instants(struct pf *pf, const struct snap_proc *p)
{
	char name[200], site[96];

	for (uint32_t i = 0; i < p->nfailures; i++) {
		const struct snap_failure *f = &p->failures_list[i];

		if (f->stack)
			report__site(f->stack, site, sizeof(site));
		snprintf(name, sizeof(name), "%s failed: %s", f->api ? f->api : "allocation",
			 f->stack ? site : "?");
		head(pf, "i", name, p->pid, p->pid, us(pf, f->ts));
		jsonw__field_string(pf->w, "s", "p");
		jsonw__name(pf->w, "args");
		jsonw__start_object(pf->w);
		jsonw__field_u64(pf->w, "bytes", f->bytes);
		jsonw__field_string(pf->w, "error", f->error);
		jsonw__field_u64(pf->w, "device_bytes_held", f->held_device);
		if (f->oom) {
			jsonw__field_string(pf->w, "cause", f->oom->cause);
			jsonw__field_string(pf->w, "why", f->oom->why);
		}
		jsonw__end_object(pf->w);
		jsonw__end_object(pf->w);
	}
	for (uint32_t i = 0; i < p->nstacks; i++) {
		const struct snap_stack *st = &p->stacks[i];

		if (strcmp(st->verdict, "leak"))
			continue;
		report__site(st, site, sizeof(site));
		snprintf(name, sizeof(name), "leak: %s", site);
		/* judged at the snapshot; its evidence began at its first allocation */
		head(pf, "i", name, p->pid, p->pid, us(pf, pf->end_ns));
		jsonw__field_string(pf->w, "s", "p");
		jsonw__name(pf->w, "args");
		jsonw__start_object(pf->w);
		jsonw__field_u64(pf->w, "outstanding_bytes", st->outstanding_bytes);
		jsonw__field_double(pf->w, "growth_bytes_per_s", st->growth_bytes_per_s);
		jsonw__field_string(pf->w, "why", st->why);
		jsonw__field_double(pf->w, "first_allocation_us", us(pf, st->first_ns));
		jsonw__end_object(pf->w);
		jsonw__end_object(pf->w);
	}
}

int report__perfetto(FILE *f, const struct snapshot *s)
{
	struct pf pf = { .end_ns = s->now_ns };
	char name[64];

	pf.w = jsonw__new(f, false);
	if (!pf.w)
		return -ENOMEM;
	pf.origin_ns = s->start_ns;
	jsonw__start_object(pf.w);
	jsonw__field_string(pf.w, "displayTimeUnit", "ms");
	jsonw__name(pf.w, "traceEvents");
	jsonw__start_array(pf.w);
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		int rank = 0;

		snprintf(name, sizeof(name), "%s (PID %d)", p->comm, p->pid);
		meta(&pf, "process_name", p->pid, p->pid, name);
		classes(&pf, p);
		for (uint32_t j = 0; j < p->nstacks && rank < TOP_STACKS; j++)
			if (p->stacks[j].nhist)
				stack_track(&pf, p, &p->stacks[j], ++rank);
		windows(&pf, p);
		instants(&pf, p);
	}
	jsonw__end_array(pf.w);
	jsonw__name(pf.w, "otherData");
	jsonw__start_object(pf.w);
	jsonw__field_string(pf.w, "generator", "gpuleak " GPULEAK_VERSION);
	jsonw__field_string(pf.w, "clock", "microseconds since tracing began (CLOCK_MONOTONIC)");
	jsonw__field_u64(pf.w, "timeline_resolution_ns",
			 s->nprocs ? s->procs[0].timeline.resolution_ns : 0);
	jsonw__field_string(pf.w, "stack_tracks",
			    "the books' buckets: each value drawn at its bucket's end");
	jsonw__field_bool(pf.w, "complete", s->complete);
	jsonw__end_object(pf.w);
	jsonw__end_object(pf.w);
	return jsonw__free(pf.w);
}
