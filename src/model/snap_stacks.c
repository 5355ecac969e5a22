// SPDX-License-Identifier: BSD-2-Clause
/*
 * snap_stacks.c - a process's stacks in its snapshot: each aggregate with its
 * verdict, PyTorch's sampled blocks estimated, ranked most suspicious first,
 * cut to the limit, with symbolized frames and the leak pattern they point to.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "books/analysis.h"
#include "books/books.h"
#include "books/explain.h"
#include "pattern.h"
#include "snapshot_int.h"
#include "stacks/native/symbolize.h"
#include "stacks/python/python.h"
#include "trace/probes.h"

/* Whether a device stack passes through the caching allocator: one of its segments. */
bool snap_stacks__torch_allocator(struct books *b, uint32_t id)
{
	uint32_t n;
	const struct frame *frames = stacks__get(books__stacks(b), id, &n);

	for (uint32_t i = 0; frames && i < n; i++) {
		const struct module_info *mi;

		if (frames[i].kind != FRAME_NATIVE)
			continue;
		mi = modules__info(books__modules(b), frames[i].mod);
		if (mi && explain__is_torch_allocator(mi->path))
			return true;
	}
	return false;
}

static void fill_frame(struct books *b, struct symbolizer *sym, struct python *py,
		       const struct frame *f, struct snap_frame *out)
{
	const struct module_info *mi;
	struct sym_result r;

	memset(out, 0, sizeof(*out));
	out->kind = "native";
	switch (f->kind) {
	case FRAME_NATIVE:
		mi = modules__info(books__modules(b), f->mod);
		out->offset = f->addr;
		if (mi) {
			out->module = mi->path;
			out->build_id = mi->build_id[0] ? mi->build_id : NULL;
		}
		if (sym && symbolizer__lookup(sym, f->mod, f->addr, &r) == 0) {
			out->function = r.function;
			out->sym_off = r.sym_off;
			out->file = r.file;
			out->line = r.line;
		}
		break;
	case FRAME_API:
		out->function = probe__name(f->mod);
		out->module = "libcuda";
		break;
	case FRAME_OVERFLOW: out->function = "[stack table full]"; break;
	case FRAME_NOTE: out->function = frame_note__name(f->mod); break;
	case FRAME_PYTHON:
		out->kind = "python";
		out->line = (int)f->addr;
		if (py)
			python__code_info(py, f->mod, &out->function, &out->file);
		break;
	default: out->address = f->addr; break;
	}
}

int snap_stacks__frames(struct books *b, struct symbolizer *sym, struct python *py, uint32_t id,
			struct snap_stack *st)
{
	const struct frame *frames = stacks__get(books__stacks(b), id, &st->nframes);
	bool inferred = false;

	st->id = id;
	st->frames = calloc(st->nframes ? st->nframes : 1, sizeof(*st->frames));
	if (!st->frames)
		return -ENOMEM;
	for (uint32_t i = 0; i < st->nframes; i++) {
		fill_frame(b, sym, py, &frames[i], &st->frames[i]);
		if (frames[i].kind == FRAME_NOTE && frames[i].mod == NOTE_PY_INFERRED)
			inferred = true;
		st->frames[i].inferred = inferred && frames[i].kind == FRAME_PYTHON;
	}
	return 0;
}

static int verdict_rank(const char *v)
{
	return !strcmp(v, "leak") ? 0 : !strcmp(v, "unknown") ? 1 : 2;
}

/*
 * Most suspicious first: leaks, then unknown, then steady; within a verdict,
 * by growth, then bytes. Where PyTorch's blocks are traced, the caching
 * allocator's segments come after the other stacks of their verdict: they hold
 * the same memory as the blocks, and the blocks' stacks name the code.
 */
static int cmp_stack(const void *a, const void *b, void *demote_segments)
{
	const struct snap_stack *x = a, *y = b;
	int rx = verdict_rank(x->verdict), ry = verdict_rank(y->verdict);

	if (rx != ry)
		return rx - ry;
	if (*(bool *)demote_segments && x->torch_segment != y->torch_segment)
		return x->torch_segment ? 1 : -1;
	if (x->growth_bytes_per_s != y->growth_bytes_per_s)
		return x->growth_bytes_per_s > y->growth_bytes_per_s ? -1 : 1;
	if (x->outstanding_bytes != y->outstanding_bytes)
		return x->outstanding_bytes > y->outstanding_bytes ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

struct est_slot {
	uint32_t stack, idx;
};

static int cmp_est(const void *x, const void *y)
{
	const struct est_slot *a = x, *b = y;

	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/*
 * Sampled tensor-block stacks: each outstanding block of size s that drew a
 * stack stands for 1 / (1 - exp(-s / R)) blocks of its size (Horvitz-Thompson:
 * an unbiased estimate of the stack's blocks, sampled or not). The blocks that
 * drew none keep their exact figures under the probe's own one-frame stack.
 */
static int estimate_sampled(struct books *b, struct proc *proc, uint64_t sample_bytes,
			    struct snap_proc *sp, size_t n)
{
	struct frame api = { .mod = GL_API_pytorch_malloc, .kind = FRAME_API };
	uint32_t unsampled = stacks__intern(books__stacks(b), &api, 1);
	struct est_slot *slots = calloc(n ? n : 1, sizeof(*slots)), key, *hit;
	const struct alloc_key *k;
	const struct alloc_val *v;
	size_t it = 0, m = 0;

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct snap_stack *st = &sp->stacks[i];

		if (st->cls != GL_CLASS_TORCH_BLOCK)
			continue;
		st->unsampled = st->id == unsampled;
		st->estimated = !st->unsampled;
		slots[m++] = (struct est_slot){ st->id, (uint32_t)i };
	}
	qsort(slots, m, sizeof(*slots), cmp_est);
	while ((v = proc__next_alloc(proc, &it, &k))) {
		double p;

		if (k->kind != GL_KIND_TORCH || v->stack == unsampled)
			continue;
		key.stack = v->stack;
		hit = bsearch(&key, slots, m, sizeof(*slots), cmp_est);
		if (!hit)
			continue;
		p = -expm1(-(double)v->size / (double)sample_bytes);
		if (p <= 0)
			continue;
		sp->stacks[hit->idx].estimated_bytes += v->size / p;
		sp->stacks[hit->idx].estimated_allocs += 1 / p;
	}
	free(slots);
	return 0;
}

struct held_slot {
	uint32_t stack, cls, idx;
};

static int cmp_held_slot(const void *a, const void *b)
{
	const struct held_slot *x = a, *y = b;

	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->cls < y->cls ? -1 : x->cls > y->cls;
}

/*
 * Each shown stack's outstanding allocations by when they were made, in SNAP_HELD_BUCKETS
 * buckets over the process's life: what a time range allocated and still holds (the
 * HTML report's temporal flame graph).
 */
static int held_by_time(struct proc *proc, uint64_t now, struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	uint64_t life = now > t->first_ns ? now - t->first_ns : 1, width;
	struct held_slot *slots = calloc(sp->nstacks ? sp->nstacks : 1, sizeof(*slots)), key;
	uint64_t(*b)[2] = NULL;
	const struct alloc_key *k;
	const struct alloc_val *v;
	size_t it = 0;
	int err = -ENOMEM;

	width = (life + SNAP_HELD_BUCKETS - 1) / SNAP_HELD_BUCKETS;
	if (width < 1000000)
		width = 1000000; /* the books keep milliseconds */
	b = calloc((size_t)(sp->nstacks ? sp->nstacks : 1) * SNAP_HELD_BUCKETS, sizeof(*b));
	if (!slots || !b)
		goto cleanup;
	for (uint32_t i = 0; i < sp->nstacks; i++)
		slots[i] = (struct held_slot){ sp->stacks[i].id, sp->stacks[i].cls, i };
	qsort(slots, sp->nstacks, sizeof(*slots), cmp_held_slot);
	while ((v = proc__next_held(proc, &it, &k))) {
		const struct held_slot *hit;
		uint64_t at;

		key = (struct held_slot){ v->stack, v->cls, 0 };
		hit = bsearch(&key, slots, sp->nstacks, sizeof(*slots), cmp_held_slot);
		if (!hit)
			continue;
		if (!v->t_ms) {
			sp->stacks[hit->idx].held_before += v->size;
			continue;
		}
		at = (v->t_ms - 1) * 1000000ULL / width;
		if (at >= SNAP_HELD_BUCKETS)
			at = SNAP_HELD_BUCKETS - 1;
		b[hit->idx * SNAP_HELD_BUCKETS + at][0] += v->size;
		b[hit->idx * SNAP_HELD_BUCKETS + at][1]++;
	}
	for (uint32_t i = 0; i < sp->nstacks; i++) {
		struct snap_stack *st = &sp->stacks[i];
		uint32_t m = 0;

		for (uint32_t j = 0; j < SNAP_HELD_BUCKETS; j++)
			m += b[i * SNAP_HELD_BUCKETS + j][1] != 0;
		st->held_width_ns = width;
		if (!m)
			continue;
		st->held = calloc(m, sizeof(*st->held));
		if (!st->held)
			goto cleanup;
		for (uint32_t j = 0; j < SNAP_HELD_BUCKETS; j++) {
			const uint64_t *c = b[i * SNAP_HELD_BUCKETS + j];

			if (c[1])
				st->held[st->nheld++] =
					(struct snap_held){ .t_ns = t->first_ns + j * width,
							    .bytes = c[0],
							    .allocs = c[1] };
		}
	}
	err = 0;
cleanup:
	free(slots);
	free(b);
	return err;
}

int snap_stacks__fill(struct books *b, struct symbolizer *sym, struct proc *proc,
		      const struct snapshot_opts *o, struct snap_proc *sp)
{
	const struct agg_key *k;
	const struct agg *a;
	size_t it = 0, n = 0, cap = proc__nr_aggs(proc);
	uint64_t now = snapshot__proc_now(o, proc), tensor_now = now;
	struct verdict_info vi;
	bool blocks = false;

	sp->stacks = calloc(cap ? cap : 1, sizeof(*sp->stacks));
	if (!sp->stacks)
		return -ENOMEM;
	while ((a = proc__next_agg(proc, &it, &k))) {
		struct snap_stack *st = &sp->stacks[n];

		if (!o->all_stacks && a->allocs == 0)
			continue;
		/* blocks are seen in windows only: judge them as of the last one's end */
		if (sp->tensors_known && sp->tensors.until_ns && sp->tensors.until_ns < now)
			tensor_now = sp->tensors.until_ns;
		series__classify(a->series, k->cls == GL_CLASS_TORCH_BLOCK ? tensor_now : now, &vi);
		*st = (struct snap_stack){
			.id = k->stack,
			.cls = k->cls,
			.outstanding_bytes = a->bytes,
			.outstanding_allocs = a->allocs,
			.allocs = a->total_allocs,
			.frees = a->total_frees,
			.alloc_bytes = a->alloc_bytes,
			.peak_bytes = a->peak_bytes,
			.first_ns = a->first_ns,
			.last_ns = a->last_ns,
			.verdict = verdict__name(vi.verdict),
			.growth_bytes_per_s = vi.growth_bytes_per_s,
			.torch_segment = k->cls == GL_CLASS_DEVICE &&
					 snap_stacks__torch_allocator(b, k->stack),
		};
		memcpy(st->dev_bytes, a->dev_bytes, sizeof(st->dev_bytes));
		st->why = strdup(vi.why);
		if ((o->proc_timeline || o->histories) && a->series && a->series->n &&
		    (st->hist = calloc(a->series->n, sizeof(*st->hist)))) {
			st->nhist = a->series->n;
			st->hist_width_ns = a->series->width_ns;
			for (uint32_t i = 0; i < st->nhist; i++)
				st->hist[i] = (struct snap_hpoint){ a->series->pts[i].t_ns,
								    a->series->pts[i].last,
								    a->series->pts[i].max };
		}
		if (st->torch_segment) /* of every stack, shown or not */
			sp->torch_reserved_bytes += a->bytes;
		if (k->cls == GL_CLASS_TORCH_BLOCK)
			blocks = true;
		n++;
	}
	if (blocks && proc__live(proc) && sp->tensors_known && sp->tensors.sample_bytes &&
	    estimate_sampled(b, proc, sp->tensors.sample_bytes, sp, n))
		return -ENOMEM;
	qsort_r(sp->stacks, n, sizeof(*sp->stacks), cmp_stack, &blocks);
	if (o->max_stacks && n > o->max_stacks) {
		for (size_t i = o->max_stacks; i < n; i++) {
			free((char *)sp->stacks[i].why);
			free(sp->stacks[i].hist);
		}
		n = o->max_stacks;
	}
	sp->nstacks = n;
	if ((o->proc_timeline || o->histories) && held_by_time(proc, now, sp))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct snap_stack *st = &sp->stacks[i];
		char ev[256];

		if (snap_stacks__frames(b, sym, o->python, st->id, st))
			return -ENOMEM;
		st->pattern = pattern__of(st, ev, sizeof(ev));
		if (st->pattern && !(st->evidence = strdup(ev)))
			return -ENOMEM;
		st->fix = st->pattern ? pattern__fix(st, st->pattern) : NULL;
	}
	return 0;
}
