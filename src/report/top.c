// SPDX-License-Identifier: BSD-2-Clause
/*
 * top.c - the live view's screen: processes, then the stacks that grow the
 * most (or hold the most), each named by its most telling frame. A pure
 * function of a snapshot, like every reporter.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "trace/probes.h"
#include "util/fmt.h"

struct ranked {
	const struct snap_proc *p;
	const struct snap_stack *st;
};

static int by_growth(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->st->growth_bytes_per_s != y->st->growth_bytes_per_s)
		return x->st->growth_bytes_per_s > y->st->growth_bytes_per_s ? -1 : 1;
	return x->st->outstanding_bytes > y->st->outstanding_bytes ?
		       -1 :
		       x->st->outstanding_bytes < y->st->outstanding_bytes;
}

static int by_site(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	char sx[256], sy[256];
	int c;

	report__site(x->st, sx, sizeof(sx));
	report__site(y->st, sy, sizeof(sy));
	c = strcmp(sx, sy);
	return c ?: by_growth(a, b);
}

static int by_bytes(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->st->outstanding_bytes != y->st->outstanding_bytes)
		return x->st->outstanding_bytes > y->st->outstanding_bytes ? -1 : 1;
	return by_growth(a, b);
}

static const struct top_opts *sorting; /* the comparators' key */

static uint64_t proc_bytes(const struct snap_proc *p)
{
	return p->bytes[GL_CLASS_DEVICE] + p->bytes[GL_CLASS_MANAGED] +
	       p->bytes[GL_CLASS_HOST_PINNED];
}

/* Processes in the order of the stacks' sort key: name, bytes or growth. */
static int by_proc(const void *a, const void *b)
{
	const struct snap_proc *x = *(const struct snap_proc *const *)a;
	const struct snap_proc *y = *(const struct snap_proc *const *)b;
	double gx = report__proc_growth(x), gy = report__proc_growth(y);
	int c = sorting->sort_name ? strcmp(x->comm, y->comm) : 0;

	if (!c && sorting->sort_bytes && proc_bytes(x) != proc_bytes(y))
		c = proc_bytes(x) > proc_bytes(y) ? -1 : 1;
	if (!c && gx != gy)
		c = gx > gy ? -1 : 1;
	return c ?: x->pid - y->pid;
}

const char *report__top_unseen(const struct snapshot *s, char *buf, size_t len)
{
	uint64_t unseen = 0;
	uint32_t nunseen = 0, blind = 0;
	char b[32];

	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		if (p->exited)
			continue;
		if (!p->pre_attach_valid)
			blind++;
		else if (p->pre_attach_bytes) {
			unseen += p->pre_attach_bytes;
			nunseen++;
		}
	}
	if (blind)
		snprintf(buf, len,
			 "no NVML figure: DEVICE is what gpuleak saw since attach, not memory "
			 "from before");
	else if (nunseen)
		snprintf(buf, len,
			 "NVML counts %s more in %u process%s: from before attach, CUDA contexts",
			 fmt_bytes(unseen, b, sizeof(b)), nunseen, nunseen == 1 ? "" : "es");
	else
		return NULL;
	return buf;
}

static int print_procs(FILE *f, const struct snapshot *s, const struct top_opts *o)
{
	const struct snap_proc **order = calloc(s->nprocs ? s->nprocs : 1, sizeof(*order));
	char note[160];

	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nprocs; i++)
		order[i] = &s->procs[i];
	sorting = o;
	qsort(order, s->nprocs, sizeof(*order), by_proc);
	fprintf(f, "%8s %-16s %11s %11s %11s %11s %12s %7s %s\n", "PID", "COMM", "DEVICE",
		"MANAGED", "PINNED", "TORCH", "GROWTH", "ALLOCS", "STATE");
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = order[i];
		char d[32], m[32], h[32], t[32], g[32], gs[160];

		fmt_rate(report__proc_growth(p), g, sizeof(g));
		fprintf(f, "%8d %-16.16s %11s %11s %11s %11s %12s %7llu %s%s%s\n", p->pid, p->comm,
			fmt_bytes(p->bytes[GL_CLASS_DEVICE], d, sizeof(d)),
			fmt_bytes(p->bytes[GL_CLASS_MANAGED], m, sizeof(m)),
			fmt_bytes(p->bytes[GL_CLASS_HOST_PINNED], h, sizeof(h)),
			fmt_bytes(p->bytes[GL_CLASS_TORCH_BLOCK], t, sizeof(t)), g,
			(unsigned long long)p->outstanding_allocs, p->exited ? "exited" : "running",
			p->consistent ? "" : " (incomplete)",
			report__gpus_short(p, gs, sizeof(gs)));
	}
	free(order);
	if (report__top_unseen(s, note, sizeof(note)))
		fprintf(f, "%s\n", note);
	return 0;
}

int report__top(FILE *f, const struct snapshot *s, const struct top_opts *o)
{
	struct ranked *r;
	size_t n = 0, cap = 0;

	fprintf(f,
		"gpuleak top - %.0f s, %u process%s, %u probes, %llu events lost%s   sort: %s\n\n",
		s->duration_s, s->nprocs, s->nprocs == 1 ? "" : "es", s->nr_probes,
		(unsigned long long)s->lost_events, s->complete ? "" : " (figures incomplete)",
		o->sort_name  ? "name" :
		o->sort_bytes ? "bytes" :
				"growth");
	if (print_procs(f, s, o))
		return -ENOMEM;
	for (uint32_t i = 0; i < s->njobs; i++) {
		char job[400];

		fprintf(f, "%s%s\n", i ? "" : "\n",
			report__job_line(s, &s->jobs[i], job, sizeof(job)));
	}
	for (uint32_t i = 0; i < s->nprocs; i++)
		cap += s->procs[i].nstacks;
	r = calloc(cap ? cap : 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nprocs; i++)
		for (uint32_t j = 0; j < s->procs[i].nstacks; j++)
			if (report__is_memory_class(s->procs[i].stacks[j].cls))
				r[n++] = (struct ranked){ &s->procs[i], &s->procs[i].stacks[j] };
	qsort(r, n, sizeof(*r), o->sort_name ? by_site : o->sort_bytes ? by_bytes : by_growth);
	fprintf(f, "\n%8s %-12s %11s %7s %12s %-8s %s\n", "PID", "MEMORY", "OUTSTANDING", "ALLOCS",
		"GROWTH", "VERDICT", "SITE");
	for (size_t i = 0; i < n && (!o->max_stacks || i < o->max_stacks); i++) {
		char b[32], g[32], site[256];

		report__site(r[i].st, site, sizeof(site));
		fmt_rate(r[i].st->growth_bytes_per_s, g, sizeof(g));
		fprintf(f, "%8d %-12s %11s %7llu %12s %-8s %s\n", r[i].p->pid,
			class__name(r[i].st->cls),
			fmt_bytes(r[i].st->outstanding_bytes, b, sizeof(b)),
			(unsigned long long)r[i].st->outstanding_allocs, g, r[i].st->verdict, site);
	}
	free(r);
	return ferror(f) ? -EIO : 0;
}
