// SPDX-License-Identifier: BSD-2-Clause
/*
 * snapshot.c - copies the books into a snapshot: the run's counters, per
 * process totals and growth, the comparison with BPF's exact counters (and
 * BPF's totals where records were lost), idle processes set apart, targets
 * the books never heard of. A process's stacks, memory and failures are
 * filled by snap_stacks.c, snap_memory.c and snap_failures.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "books/analysis.h"
#include "books/books.h"
#include "gpu/nvml.h"
#include "snapshot_int.h"
#include "mvtrace.h"
#include "util/procfs.h"

static const uint8_t checked_classes[] = {
	GL_CLASS_DEVICE,  GL_CLASS_MANAGED,	GL_CLASS_HOST_PINNED,
	GL_CLASS_ADDRESS, GL_CLASS_TORCH_BLOCK,
};

static void census_strings_free(struct snap_census *c)
{
	for (uint32_t r = 0; r < c->nrows; r++) {
		free(c->rows[r].holder);
		free(c->rows[r].site);
	}
}

void snap_census__free(struct snap_census *c)
{
	if (!c)
		return;
	census_strings_free(c);
	free(c);
}

int snapshot__add_census(struct snapshot *s, struct snap_census *c)
{
	struct snap_census *v = realloc(s->census, (s->ncensus + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	s->census = v;
	s->census[s->ncensus++] = *c;
	free(c);
	return 0;
}

void snapshot__free(struct snapshot *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->ncensus; i++)
		census_strings_free(&s->census[i]);
	free(s->census);
	for (uint32_t i = 0; i < s->nprocs + s->nprocs_idle; i++) {
		struct snap_proc *p = &s->procs[i];

		for (uint32_t j = 0; j < p->nstacks; j++) {
			free(p->stacks[j].frames);
			free(p->stacks[j].hist);
			free(p->stacks[j].held);
			free((char *)p->stacks[j].why);
			free((char *)p->stacks[j].evidence);
		}
		free(p->stacks);
		for (uint32_t j = 0; j < p->nmv_stacks; j++)
			free(p->mv_stacks[j].frames);
		free(p->mv_stacks);
		free(p->mv_events);
		free(p->memmap.segs);
		free(p->memmap.blocks);
		for (uint32_t j = 0; j < p->nfailures; j++) {
			struct snap_failure *f = &p->failures_list[j];

			if (f->stack)
				free(f->stack->frames);
			free(f->stack);
			for (uint32_t h = 0; h < f->nholders; h++)
				free(f->holders[h].frames);
			free(f->holders);
			if (f->oom)
				free((char *)f->oom->why);
			free(f->oom);
		}
		free(p->failures_list);
	}
	free(s->procs);
	free(s->jobs);
	free(s);
}
/* Growth of the process's device memory; with NVML, what it held unseen and when it fills up. */
static void fill_growth(const struct proc *proc, const struct snapshot_opts *o, uint64_t end,
			struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	uint64_t device = t->bytes[GL_CLASS_DEVICE], used = NVML_UNKNOWN;
	uint64_t headroom = NVML_UNKNOWN;
	struct verdict_info vi;

	series__classify(proc__device_series(proc), end, &vi);
	sp->device_growth_bytes_per_s = vi.growth_bytes_per_s;
	sp->projected_oom_s = -1;
	if (!o->nvml || t->exited)
		return;
	nvml_sample__proc(o->nvml, t->pid, &used, &headroom);
	if (used == NVML_UNKNOWN && t->ns_pid > 0 && t->ns_pid != t->pid)
		nvml_sample__proc(o->nvml, t->ns_pid, &used, &headroom);
	if (used != NVML_UNKNOWN) {
		sp->pre_attach_valid = true;
		sp->pre_attach_bytes = used > device ? used - device : 0;
	}
	if (vi.verdict == VERDICT_LEAK && vi.growth_bytes_per_s > 0 && headroom != NVML_UNKNOWN)
		sp->projected_oom_s = headroom / vi.growth_bytes_per_s;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Changes to a process's books: every one is counted before it is made (books.bpf.h). */
static uint64_t kernel_changes(const struct gl_proc_stats *s)
{
	return s->alloc_calls + s->free_calls + s->failures + s->ctx_drops;
}

static uint64_t user_changes(const struct snap_proc *sp)
{
	return sp->alloc_calls + sp->free_calls + sp->failures + sp->ctx_drops;
}

/*
 * Whether the two books agree. BPF's counters of a process whose exit
 * record is not read yet are read while it calls (or since it exited): the
 * changes the kernel counted whose records user space has not applied yet
 * (in the programs, in the ring buffer, or made while the snapshot was
 * built) are exactly the difference of the two change counts, each change
 * moving one allocation. For such a live reading, the books agree within
 * that many changes, and with none in flight they must be equal to the byte.
 * A process's final books (taken at its exit record) must agree exactly.
 */
static bool books_agree(const struct snap_proc *sp, bool live)
{
	const struct gl_proc_stats *s = &sp->bpf;
	uint64_t slack = 0;

	if (live) {
		if (kernel_changes(s) < user_changes(sp))
			return false; /* user space applied a change the kernel never made */
		slack = kernel_changes(s) - user_changes(sp);
	}
	for (size_t i = 0; i < sizeof(checked_classes); i++) {
		uint8_t c = checked_classes[i];
		uint64_t d = absdiff(s->allocs[c], sp->nallocs[c]);

		if (d > slack || (slack == 0 && s->bytes[c] != sp->bytes[c]))
			return false;
	}
	return absdiff(s->unmatched_frees, sp->unmatched_frees) <= slack &&
	       absdiff(s->failures, sp->failures) <= slack;
}

/*
 * Records were lost, so the user-space books (the per-stack attribution) are
 * incomplete; BPF's counters are exact. The process totals come from BPF, and
 * what the stacks add up to is kept beside them.
 */
static void use_kernel_totals(struct snap_proc *sp)
{
	memcpy(sp->attributed_bytes, sp->bytes, sizeof(sp->attributed_bytes));
	sp->attributed_allocs = sp->outstanding_allocs;
	memcpy(sp->bytes, sp->bpf.bytes, sizeof(sp->bytes));
	memcpy(sp->nallocs, sp->bpf.allocs, sizeof(sp->nallocs));
	sp->outstanding_allocs = sp->bpf.allocs[GL_CLASS_DEVICE] +
				 sp->bpf.allocs[GL_CLASS_MANAGED] +
				 sp->bpf.allocs[GL_CLASS_HOST_PINNED];
	sp->alloc_calls = sp->bpf.alloc_calls;
	sp->free_calls = sp->bpf.free_calls;
	sp->failures = sp->bpf.failures;
	sp->unmatched_frees = sp->bpf.unmatched_frees;
	sp->totals_from_kernel = true;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The process's PyTorch memory events, and the frames of their stacks not in sp->stacks. */
static int mv_events_fill(struct books *b, struct symbolizer *sym, struct proc *proc,
			  const struct snapshot_opts *o, struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	uint32_t *ids, n = 0;

	if (mvtrace__proc(o->mvtrace, t->pid, t->start_time, &sp->mv_events, &sp->nmv_events,
			  &sp->mv_dropped))
		return -ENOMEM;
	sp->mv_traced = true;
	ids = calloc(sp->nmv_events + 1, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < sp->nmv_events; i++) {
		uint32_t id = sp->mv_events[i].stack;
		bool shown = false;

		for (uint32_t j = 0; id && j < sp->nstacks && !shown; j++)
			shown = sp->stacks[j].id == id;
		if (id && !shown)
			ids[n++] = id;
	}
	qsort(ids, n, sizeof(*ids), cmp_u32);
	sp->mv_stacks = calloc(n + 1, sizeof(*sp->mv_stacks));
	if (!sp->mv_stacks) {
		free(ids);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (i && ids[i] == ids[i - 1])
			continue;
		if (snap_stacks__frames(b, sym, o->python, ids[i],
					&sp->mv_stacks[sp->nmv_stacks])) {
			free(ids);
			return -ENOMEM;
		}
		sp->nmv_stacks++;
	}
	free(ids);
	return 0;
}

uint64_t snapshot__proc_now(const struct snapshot_opts *o, const struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);

	if (t->exited)
		return t->exit_ns;
	if (o->judge_pid > 0 && t->pid == o->judge_pid && o->judge_ns && o->judge_ns < o->now_ns)
		return o->judge_ns;
	return o->now_ns;
}

static int fill_proc(struct books *b, struct symbolizer *sym, struct proc *proc,
		     const struct snapshot_opts *o, struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	uint64_t begin, end;
	bool live = false;

	sp->pid = t->pid;
	sp->ns_pid = t->ns_pid;
	sp->ppid = t->ppid;
	sp->ranked = t->rank >= 0;
	sp->rank = t->rank;
	sp->local_rank = t->local_rank;
	sp->world_size = t->world_size;
	sp->job = -1;
	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		sp->gpus[d].nvml_index = -1;
	memcpy(sp->comm, t->comm, sizeof(sp->comm));
	sp->exited = t->exited;
	sp->start_time = t->start_time;
	begin = o->start_ns ? o->start_ns : t->first_ns;
	end = snapshot__proc_now(o, proc);
	sp->duration_ns = end > begin ? end - begin : 0;
	memcpy(sp->bytes, t->bytes, sizeof(sp->bytes));
	memcpy(sp->nallocs, t->nallocs, sizeof(sp->nallocs));
	memcpy(sp->alloc_bytes, t->alloc_bytes, sizeof(sp->alloc_bytes));
	memcpy(sp->free_bytes, t->free_bytes, sizeof(sp->free_bytes));
	sp->outstanding_allocs = t->nallocs[GL_CLASS_DEVICE] + t->nallocs[GL_CLASS_MANAGED] +
				 t->nallocs[GL_CLASS_HOST_PINNED];
	sp->peak_device = t->peak_device;
	memcpy(sp->dev_bytes, t->dev_bytes, sizeof(sp->dev_bytes));
	sp->unknown_dev_bytes = t->unknown_dev_bytes;
	sp->alloc_calls = t->alloc_calls;
	sp->free_calls = t->free_calls;
	sp->failures = t->failures;
	sp->oom_failures = t->oom_failures;
	sp->unmatched_frees = t->unmatched_frees;
	sp->dropped_bytes = t->dropped_bytes;
	sp->failed_frees = t->failed_frees;
	sp->ctx_drops = t->ctx_drops;
	sp->unheld = t->unheld;
	memcpy(sp->unheld_lib, t->unheld_lib, sizeof(sp->unheld_lib));
	if (t->has_final) {
		sp->bpf = t->final;
		sp->bpf_valid = true;
	} else if (o->bpf_stats && o->bpf_stats(o->bpf_ctx, t->pid, &sp->bpf) == 0 &&
		   sp->bpf.start_time == t->start_time) {
		sp->bpf_valid = true;
		/*
		 * Read while it calls, or after its exit with its last records
		 * (the exit's among them) still unread, as when a bundle is
		 * written at a failure. Lost call records make a real
		 * difference, which no slack may hide.
		 */
		live = !(o->stats && (o->stats[GL_STAT_LOST_CALL] || o->stats[GL_STAT_LOST_PROC]));
	} else if (t->alloc_calls == 0 && t->free_calls == 0 && t->failures == 0) {
		sp->bpf_valid = true; /* BPF holds nothing for a process that made no call */
		memset(&sp->bpf, 0, sizeof(sp->bpf));
	}
	sp->consistent = sp->bpf_valid && books_agree(sp, live);
	if (sp->bpf_valid && !sp->consistent)
		use_kernel_totals(sp);
	fill_growth(proc, o, end, sp);
	if (o->proc_tensors) {
		o->proc_tensors(o->tensors_ctx, t->pid, o->now_ns, &sp->tensors);
		sp->tensors_known = true;
	} else if (o->tensors) {
		sp->tensors = *o->tensors;
		sp->tensors_known = true;
	}
	if (o->proc_timeline) {
		o->proc_timeline(o->timeline_ctx, t->pid, t->start_time, &sp->timeline);
		sp->timeline.since_ns = o->start_ns;
	}
	if (snap_memory__fill(b, proc, o, sp) || snap_stacks__fill(b, sym, proc, o, sp) ||
	    (o->memory_map && snap_memmap__fill(b, proc, sp)) ||
	    (o->memory_map && o->mvtrace && mv_events_fill(b, sym, proc, o, sp)))
		return -ENOMEM;
	return snap_failures__fill(b, sym, proc, o, sp);
}

struct snapshot *snapshot__build(struct books *b, struct symbolizer *sym,
				 const struct snapshot_opts *o)
{
	struct procs *procs = books__procs(b);
	const struct books_counters *bc = books__counters(b);
	struct snapshot *s = calloc(1, sizeof(*s));
	uint32_t n = procs__count(procs);
	struct proc *proc;

	if (!s)
		return NULL;
	s->now_ns = o->now_ns;
	s->start_ns = o->start_ns;
	s->duration_s = o->start_ns && o->now_ns > o->start_ns ? (o->now_ns - o->start_ns) / 1e9 :
								 0;
	if (o->stats)
		memcpy(s->stats, o->stats, sizeof(s->stats));
	if (o->api_calls)
		memcpy(s->api_calls, o->api_calls, sizeof(s->api_calls));
	s->lost_events = s->stats[GL_STAT_LOST_STACK] + s->stats[GL_STAT_LOST_CALL] +
			 s->stats[GL_STAT_LOST_PROC];
	s->malformed = bc->malformed;
	s->stack_missing = bc->stack_missing;
	s->stack_mode = o->stack_mode;
	s->nr_probes = o->nr_probes;
	s->ring_stack_records = o->ring_stack_records;
	s->ring_stack_bytes = o->ring_stack_bytes;
	s->ring = o->ring;
	s->self_cpu_ns = o->self_cpu_ns;
	for (uint32_t i = 0; i < o->nprogs && i < SNAP_MAX_PROGS; i++)
		s->progs[s->nprogs++] = o->progs[i];
	s->unread_bytes = o->unread_bytes;
	s->cap_allocs = o->cap_allocs;
	s->cap_stacks = o->cap_stacks;
	s->cap_procs = o->cap_procs;
	s->procs_refused = procs__refused(procs);
	if (o->limits)
		s->limits = *o->limits;
	s->stack_overflows = stacks__overflows(books__stacks(b));
	if (o->tensors) {
		s->tensors_buf = *o->tensors;
		s->tensors = &s->tensors_buf;
	}
	s->procs = calloc(n ? n : 1, sizeof(*s->procs));
	if (!s->procs)
		goto fail;
	s->complete =
		s->lost_events == 0 && s->unread_bytes == 0 &&
		s->stats[GL_STAT_ALLOC_TABLE_FULL] == 0 && s->stats[GL_STAT_INFLIGHT_FULL] == 0 &&
		s->stats[GL_STAT_NESTED_OVERFLOW] == 0 && s->malformed == 0 &&
		s->procs_refused == 0 && s->limits.libs_refused == 0 && s->limits.py_refused == 0;
	for (uint32_t i = 0; (proc = procs__at(procs, i)); i++) {
		struct snap_proc *sp;

		if (o->only_pid > 0 && proc__totals(proc)->pid != o->only_pid)
			continue;
		sp = &s->procs[s->nprocs++];
		if (fill_proc(b, sym, proc, o, sp))
			goto fail;
		s->unmatched_frees += sp->unmatched_frees;
		if (sp->bpf_valid) {
			s->untracked_allocs += sp->bpf.untracked_allocs;
			s->untracked_bytes += sp->bpf.untracked_bytes;
		}
		if (!sp->consistent || sp->unheld)
			s->complete = false;
	}
	return s;
fail:
	snapshot__free(s);
	errno = ENOMEM;
	return NULL;
}

static bool proc_used_cuda(const struct snap_proc *p)
{
	return p->alloc_calls || p->free_calls || p->failures || p->nstacks || p->peak_device ||
	       p->torch_reserved_bytes;
}

/* Whether p's parent is another process of the snapshot (a child it followed). */
static bool child_of_traced(const struct snapshot *s, const struct snap_proc *p)
{
	for (uint32_t i = 0; p->ppid > 0 && i < s->nprocs; i++)
		if (s->procs[i].pid == p->ppid && &s->procs[i] != p)
			return true;
	return false;
}

static void hide(struct snapshot *s, bool children_only)
{
	uint32_t kept = 0, n = s->nprocs;
	bool *idle = calloc(n ? n : 1, sizeof(*idle));

	if (!idle)
		return; /* nothing hidden: every process stays listed */
	for (uint32_t i = 0; i < n; i++)
		idle[i] = !proc_used_cuda(&s->procs[i]) &&
			  (!children_only || child_of_traced(s, &s->procs[i]));
	for (uint32_t i = 0; i < n; i++) {
		if (idle[i])
			continue;
		if (i != kept) {
			struct snap_proc tmp = s->procs[kept];

			s->procs[kept] = s->procs[i];
			s->procs[i] = tmp;
		}
		kept++;
	}
	s->nprocs = kept;
	s->nprocs_idle += n - kept;
	free(idle);
}

void snapshot__hide_idle(struct snapshot *s)
{
	hide(s, false);
}

void snapshot__hide_idle_children(struct snapshot *s)
{
	hide(s, true);
}

/* A target the books never heard of: NVML's figure is all it has, all from before attach. */
static void fill_target(struct snap_proc *p, int pid, const struct nvml_sample *nvml)
{
	struct snap_memory *m = &p->memory;

	*p = (struct snap_proc){ .pid = pid,
				 .ns_pid = pid,
				 .rank = -1,
				 .local_rank = -1,
				 .world_size = -1,
				 .job = -1 };
	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		p->gpus[d].nvml_index = -1;
	if (procfs__comm(pid, p->comm, sizeof(p->comm)))
		snprintf(p->comm, sizeof(p->comm), "?");
	m->valid = true;
	if (nvml)
		snap_memory__add_nvml(nvml, pid, p);
	m->unseen = m->nvml_bytes;
}

int snapshot__add_targets(struct snapshot *s, const int *pids, int n,
			  const struct nvml_sample *nvml)
{
	for (int i = 0; i < n; i++) {
		uint32_t total = s->nprocs + s->nprocs_idle, j;
		struct snap_proc *procs;

		for (j = 0; j < total && s->procs[j].pid != pids[i]; j++)
			;
		if (j < total)
			continue;
		procs = realloc(s->procs, (total + 1) * sizeof(*procs));
		if (!procs)
			return -ENOMEM;
		s->procs = procs;
		memmove(&procs[s->nprocs + 1], &procs[s->nprocs], s->nprocs_idle * sizeof(*procs));
		fill_target(&procs[s->nprocs++], pids[i], nvml);
	}
	return 0;
}
