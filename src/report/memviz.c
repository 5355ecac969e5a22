// SPDX-License-Identifier: BSD-2-Clause
/*
 * memviz.c - a process's PyTorch memory as the pickle torch.cuda.memory._snapshot()
 * writes, for PyTorch's memory_viz (pytorch.org/memory_viz, torch.cuda._memory_viz:
 * segments, memory, stats, trace_plot, segment_plot) to open.
 *
 * "segments" holds each segment PyTorch's allocator took from the driver,
 * its blocks tiling it: the blocks gpuleak booked ("active_allocated", with
 * their stacks, innermost frame first as PyTorch writes them) and the spans
 * between them, "inactive" (free in the cache) where every block since
 * attach was seen, else "unseen": gpuleak cannot tell what lies there, and
 * says so rather than call it free. "device_traces" has, per device, the
 * events gpuleak saw since attach (model/mvtrace.c): blocks handed out and
 * given back, segments taken and given back, each with its time and stack;
 * empty where only the books at one moment are known. What
 * else gpuleak did not see (blocks in segments from before attach, streams:
 * PyTorch's probes do not carry them) is in the "gpuleak" entry, which
 * PyTorch's readers ignore.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "model/mvtrace.h"
#include "util/pickle.h"

/* A segment this size or smaller is from PyTorch's small pool (blocks up to 1 MiB
 * come from 2 MiB segments). */
#define SMALL_SEGMENT (2ULL << 20)

static int cmp_stack_id(const void *a, const void *b)
{
	const struct snap_stack *x = *(struct snap_stack *const *)a;
	const struct snap_stack *y = *(struct snap_stack *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

/* The snapshot being written: a stack's frames are written once, then taken from the
 * pickle's memo (a block's frames and its history's are the same list). */
struct mv {
	const struct snap_proc *sp;
	struct snap_stack **by_id; /* its stacks and its events' stacks, by id */
	uint32_t n;
	uint32_t *memo; /* per by_id[i]: memo index + 1, 0: not written yet */
};

static void frames_list(struct pickle *p, const struct snap_stack *st);

/* PyTorch's frames: {'filename', 'line', 'name'}, innermost first; [] for stack 0. */
static void frames(struct pickle *p, struct mv *mv, uint32_t id)
{
	struct snap_stack key = { .id = id }, *kp = &key, **hit;
	size_t i;

	hit = id ? bsearch(&kp, mv->by_id, mv->n, sizeof(*mv->by_id), cmp_stack_id) : NULL;
	if (!hit) {
		frames_list(p, NULL);
		return;
	}
	i = (size_t)(hit - mv->by_id);
	if (mv->memo[i]) {
		pickle__get(p, mv->memo[i] - 1);
		return;
	}
	frames_list(p, *hit);
	mv->memo[i] = pickle__keep(p) + 1;
}

static void frames_list(struct pickle *p, const struct snap_stack *st)
{
	pickle__list(p);
	for (uint32_t i = 0; st && i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];
		const char *file = f->file ? f->file : f->module ? f->module : "??";
		char name[64] = "??";

		if (!f->function && !f->file && !f->module) {
			snprintf(name, sizeof(name), "0x%llx", (unsigned long long)f->address);
		} else if (!f->function && f->module) {
			snprintf(name, sizeof(name), "%s+0x%llx", base(f->module),
				 (unsigned long long)f->offset);
		}
		pickle__dict(p);
		pickle__str(p, "filename");
		pickle__str(p, file);
		pickle__str(p, "line");
		pickle__int(p, f->line > 0 ? f->line : 0);
		pickle__str(p, "name");
		pickle__str(p, f->function ? f->function : name);
		pickle__end_dict(p);
	}
	pickle__end_list(p);
}

static void block(struct pickle *p, struct mv *mv, uint64_t addr, uint64_t size, const char *state,
		  uint32_t stack)
{
	bool st = stack != 0;

	pickle__dict(p);
	pickle__str(p, "address");
	pickle__uint(p, addr);
	pickle__str(p, "size");
	pickle__uint(p, size);
	pickle__str(p, "requested_size");
	pickle__uint(p, st ? size : 0);
	pickle__str(p, "state");
	pickle__str(p, state);
	pickle__str(p, "frames");
	frames(p, mv, stack);
	if (st) {
		/* PyTorch 1.13's form of the same: its memory_viz reads the frames there */
		pickle__str(p, "history");
		pickle__list(p);
		pickle__dict(p);
		pickle__str(p, "addr");
		pickle__uint(p, addr);
		pickle__str(p, "real_size");
		pickle__uint(p, size);
		pickle__str(p, "frames");
		frames(p, mv, stack);
		pickle__end_dict(p);
		pickle__end_list(p);
	}
	pickle__end_dict(p);
}

static void segment(struct pickle *p, struct mv *mv, const struct snap_memmap *m,
		    const struct snap_seg *sg)
{
	const char *gap = m->blocks_complete ? "inactive" : "unseen";
	uint64_t at = sg->addr, allocated = 0;

	for (uint32_t i = 0; i < sg->nblocks; i++)
		allocated += m->blocks[sg->block0 + i].size;
	pickle__dict(p);
	pickle__str(p, "device");
	pickle__int(p, sg->dev >= 0 ? sg->dev : 0);
	pickle__str(p, "address");
	pickle__uint(p, sg->addr);
	pickle__str(p, "total_size");
	pickle__uint(p, sg->size);
	pickle__str(p, "allocated_size");
	pickle__uint(p, allocated);
	pickle__str(p, "active_size");
	pickle__uint(p, allocated);
	pickle__str(p, "requested_size");
	pickle__uint(p, allocated);
	pickle__str(p, "stream");
	pickle__int(p, 0);
	pickle__str(p, "segment_type");
	pickle__str(p, sg->size <= SMALL_SEGMENT ? "small" : "large");
	pickle__str(p, "segment_pool_id");
	pickle__pair(p, 0, 0);
	pickle__str(p, "is_expandable");
	pickle__bool(p, false);
	pickle__str(p, "frames");
	frames(p, mv, sg->stack);
	pickle__str(p, "blocks");
	pickle__list(p);
	for (uint32_t i = 0; i < sg->nblocks; i++) {
		const struct snap_block *b = &m->blocks[sg->block0 + i];

		if (b->addr < at) /* overlaps the one before: not PyTorch's map */
			continue;
		if (b->addr > at)
			block(p, mv, at, b->addr - at, gap, 0);
		block(p, mv, b->addr, b->size, "active_allocated", b->stack);
		at = b->addr + b->size;
	}
	if (at < sg->addr + sg->size)
		block(p, mv, at, sg->addr + sg->size - at, gap, 0);
	pickle__end_list(p);
	pickle__end_dict(p);
}

/* What gpuleak did not see, and what the file is, for a reader that looks. */
static void about(struct pickle *p, const struct snapshot *s, const struct snap_proc *sp)
{
	const struct snap_memmap *m = &sp->memmap;

	pickle__str(p, "gpuleak");
	pickle__dict(p);
	pickle__str(p, "pid");
	pickle__int(p, sp->pid);
	pickle__str(p, "comm");
	pickle__str(p, sp->comm);
	pickle__str(p, "complete");
	pickle__bool(p, s->complete && m->blocks_complete && !m->outside_blocks);
	pickle__str(p, "blocks_complete");
	pickle__bool(p, m->blocks_complete);
	pickle__str(p, "gaps");
	pickle__str(
		p, m->blocks_complete ?
			   "inactive: free in PyTorch's cache (every block since attach was seen)" :
			   "unseen: blocks were not traced all along (tensor windows, or "
			   "--tensors off), so gpuleak cannot tell what lies there");
	pickle__str(p, "blocks_outside_segments");
	pickle__uint(p, m->outside_blocks);
	pickle__str(p, "bytes_outside_segments");
	pickle__uint(p, m->outside_bytes);
	pickle__str(p, "streams");
	pickle__str(p,
		    "not known (PyTorch's allocator probes do not carry them): 0 stands for all");
	pickle__str(p, "device_traces");
	if (sp->mv_traced) {
		char what[384];

		snprintf(what, sizeof(what),
			 "%u events since attach%s%llu before them dropped (the oldest go past "
			 "%u); none for a block made before attach, or while no tensor window "
			 "was open; a free has no frames",
			 sp->nmv_events, sp->mv_dropped ? ", " : "; ",
			 (unsigned long long)sp->mv_dropped, MVTRACE_MAX_EVENTS);
		pickle__str(p, what);
	} else {
		pickle__str(p, "empty: the books at one moment, not a history of events");
	}
	pickle__str(p, "device_traces_dropped");
	pickle__uint(p, sp->mv_dropped);
	pickle__end_dict(p);
}

/* The process with the most PyTorch memory seen, or NULL. */
const struct snap_proc *report__memory_viz_proc(const struct snapshot *s, int *others)
{
	const struct snap_proc *best = NULL;

	*others = 0;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *sp = &s->procs[i];

		if (!sp->memmap.valid || (!sp->memmap.nsegs && !sp->memmap.outside_blocks))
			continue;
		if (best)
			(*others)++;
		if (!best || sp->torch_reserved_bytes > best->torch_reserved_bytes)
			best = sp;
	}
	return best;
}

static const char *const mv_actions[] = { [MV_ALLOC] = "alloc",
					  [MV_FREE_COMPLETED] = "free_completed",
					  [MV_SEGMENT_ALLOC] = "segment_alloc",
					  [MV_SEGMENT_FREE] = "segment_free" };

/* The events of device d, as PyTorch's recorder writes them (times since tracing began). */
static void device_trace(struct pickle *p, struct mv *mv, const struct snapshot *s, int d)
{
	const struct snap_proc *sp = mv->sp;

	pickle__list(p);
	for (uint32_t i = 0; i < sp->nmv_events; i++) {
		const struct mv_event *e = &sp->mv_events[i];

		if ((e->dev >= 0 ? e->dev : 0) != d || e->action < MV_ALLOC ||
		    e->action > MV_SEGMENT_FREE)
			continue;
		pickle__dict(p);
		pickle__str(p, "action");
		pickle__str(p, mv_actions[e->action]);
		pickle__str(p, "addr");
		pickle__uint(p, e->addr);
		pickle__str(p, "size");
		pickle__uint(p, e->size);
		pickle__str(p, "stream");
		pickle__int(p, 0);
		pickle__str(p, "time_us");
		pickle__uint(p, e->ts > s->start_ns ? (e->ts - s->start_ns) / 1000 : 0);
		pickle__str(p, "frames");
		frames(p, mv,
		       e->action == MV_ALLOC || e->action == MV_SEGMENT_ALLOC ? e->stack : 0);
		pickle__end_dict(p);
	}
	pickle__end_list(p);
}

int report__memory_viz(FILE *f, const struct snapshot *s, const struct snap_proc *sp)
{
	uint32_t n = sp->nstacks + sp->nmv_stacks;
	struct mv mv = { .sp = sp,
			 .by_id = calloc(n ? n : 1, sizeof(*mv.by_id)),
			 .memo = calloc(n ? n : 1, sizeof(uint32_t)) };
	const struct snap_memmap *m = &sp->memmap;
	struct pickle p;
	int ndev = 1;

	if (!mv.by_id || !mv.memo) {
		free(mv.by_id);
		free(mv.memo);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < sp->nstacks; i++)
		mv.by_id[mv.n++] = &sp->stacks[i];
	for (uint32_t i = 0; i < sp->nmv_stacks; i++)
		mv.by_id[mv.n++] = &sp->mv_stacks[i];
	qsort(mv.by_id, mv.n, sizeof(*mv.by_id), cmp_stack_id);
	for (uint32_t i = 0; i < m->nsegs; i++)
		if (m->segs[i].dev + 1 > ndev)
			ndev = m->segs[i].dev + 1;
	for (uint32_t i = 0; i < sp->nmv_events; i++)
		if (sp->mv_events[i].dev + 1 > ndev)
			ndev = sp->mv_events[i].dev + 1;
	pickle__start(&p, f);
	pickle__dict(&p);
	pickle__str(&p, "segments");
	pickle__list(&p);
	for (uint32_t i = 0; i < m->nsegs; i++)
		segment(&p, &mv, m, &m->segs[i]);
	pickle__end_list(&p);
	pickle__str(&p, "device_traces");
	pickle__list(&p);
	for (int d = 0; d < ndev; d++)
		device_trace(&p, &mv, s, d);
	pickle__end_list(&p);
	about(&p, s, sp);
	pickle__end_dict(&p);
	free(mv.by_id);
	free(mv.memo);
	return pickle__finish(&p) == -EIO ? -EIO : 0;
}
