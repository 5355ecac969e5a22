// SPDX-License-Identifier: BSD-2-Clause
/*
 * snapshot.c - copies the books into a snapshot: per process totals,
 * the comparison with BPF's exact counters, stacks ranked most suspicious
 * first with their verdicts, and symbolized frames.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "books/analysis.h"
#include "books/books.h"
#include "books/explain.h"
#include "gpu/nvml.h"
#include "pattern.h"
#include "snapshot.h"
#include "stacks/native/symbolize.h"
#include "stacks/python/python.h"
#include "trace/probes.h"
#include "util/procfs.h"

static const uint8_t checked_classes[] = {
	GL_CLASS_DEVICE,  GL_CLASS_MANAGED,	GL_CLASS_HOST_PINNED,
	GL_CLASS_ADDRESS, GL_CLASS_TORCH_BLOCK,
};

/* Whether a device stack passes through the caching allocator: one of its segments. */
static bool torch_segment(struct books *b, uint32_t id)
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

void snapshot__free(struct snapshot *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->ncensus; i++) {
		for (uint32_t r = 0; r < s->census[i].nrows; r++) {
			free(s->census[i].rows[r].holder);
			free(s->census[i].rows[r].site);
		}
	}
	free(s->census);
	for (uint32_t i = 0; i < s->nprocs + s->nprocs_idle; i++) {
		struct snap_proc *p = &s->procs[i];

		for (uint32_t j = 0; j < p->nstacks; j++) {
			free(p->stacks[j].frames);
			free((char *)p->stacks[j].why);
			free((char *)p->stacks[j].evidence);
		}
		free(p->stacks);
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

static int fill_frames(struct books *b, struct symbolizer *sym, struct python *py, uint32_t id,
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

static int fill_stacks(struct books *b, struct symbolizer *sym, struct proc *proc,
		       const struct snapshot_opts *o, struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	const struct agg_key *k;
	const struct agg *a;
	size_t it = 0, n = 0, cap = proc__nr_aggs(proc);
	uint64_t now = t->exited ? t->exit_ns : o->now_ns, tensor_now = now;
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
		if (o->tensors && o->tensors->until_ns && o->tensors->until_ns < now)
			tensor_now = o->tensors->until_ns;
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
			.torch_segment = k->cls == GL_CLASS_DEVICE && torch_segment(b, k->stack),
		};
		memcpy(st->dev_bytes, a->dev_bytes, sizeof(st->dev_bytes));
		st->why = strdup(vi.why);
		if (st->torch_segment) /* of every stack, shown or not */
			sp->torch_reserved_bytes += a->bytes;
		if (k->cls == GL_CLASS_TORCH_BLOCK)
			blocks = true;
		n++;
	}
	if (blocks && proc__live(proc) && o->tensors && o->tensors->sample_bytes &&
	    estimate_sampled(b, proc, o->tensors->sample_bytes, sp, n))
		return -ENOMEM;
	qsort_r(sp->stacks, n, sizeof(*sp->stacks), cmp_stack, &blocks);
	if (o->max_stacks && n > o->max_stacks) {
		for (size_t i = o->max_stacks; i < n; i++)
			free((char *)sp->stacks[i].why);
		n = o->max_stacks;
	}
	sp->nstacks = n;
	for (size_t i = 0; i < n; i++) {
		struct snap_stack *st = &sp->stacks[i];
		char ev[256];

		if (fill_frames(b, sym, o->python, st->id, st))
			return -ENOMEM;
		st->pattern = pattern__of(st, ev, sizeof(ev));
		if (st->pattern && !(st->evidence = strdup(ev)))
			return -ENOMEM;
	}
	return 0;
}

static const char *retry_name(uint8_t r)
{
	switch (r) {
	case RETRY_PENDING: return "pending";
	case RETRY_SUCCEEDED: return "succeeded";
	case RETRY_FAILED: return "failed";
	default: return NULL;
	}
}

static int fill_oom(const struct failure *f, struct snap_failure *sf)
{
	const struct oom_facts *o = &f->facts;
	struct oom_explain ex;
	struct snap_oom *so = calloc(1, sizeof(*so));

	if (!so)
		return -ENOMEM;
	oom__classify(o, &ex);
	*so = (struct snap_oom){
		.cause = oom__cause_name(ex.cause),
		.why = strdup(ex.why),
		.action = ex.action,
		.dev = o->dev,
		.torch_request = o->torch_request,
		.blocks_seen = o->blocks_seen,
		.held = o->held,
		.torch_reserved = o->torch_reserved,
		.torch_allocated = o->torch_allocated,
		.free_extents = o->free_extents,
		.largest_free = o->largest_free,
		.nr_free = o->nr_free,
		.leak_bytes = o->leak_bytes,
		.outside_torch = o->outside_torch,
		.top_lib = o->top_lib,
		.top_lib_bytes = o->top_lib_bytes,
		.nvml = o->nvml,
		.dev_total = o->dev_total,
		.dev_free = o->dev_free,
		.others_used = o->others_used,
		.retry = retry_name(f->retry),
		.is_retry = f->is_retry,
		.retry_freed = f->retry_freed,
	};
	sf->oom = so;
	return so->why ? 0 : -ENOMEM;
}

static void mem_dev_of(const struct explain_dev *d, struct snap_mem_dev *m)
{
	/* expandable segments' blocks lie in no known segment: their free part is what the
	 * handles hold beyond them, counted as one extent (their mappings can grow) */
	uint64_t vmm_free =
		d->torch_vmm > d->ext.outside_bytes ? d->torch_vmm - d->ext.outside_bytes : 0;
	uint64_t cached = d->ext.free_bytes + vmm_free;
	uint64_t largest = d->ext.largest_free > vmm_free ? d->ext.largest_free : vmm_free;
	/* blocks that fit in no segment or handle seen lie in segments from before attach */
	uint64_t outside =
		d->ext.outside_bytes > d->torch_vmm ? d->ext.outside_bytes - d->torch_vmm : 0;

	*m = (struct snap_mem_dev){
		.dev = d->dev,
		.nvml_index = -1,
		.device_bytes = d->device_bytes,
		.torch_reserved = d->torch_reserved,
		.torch_allocated = d->torch_allocated,
		.torch_cached = cached,
		.torch_blocks = d->torch_blocks,
		.largest_free = largest,
		.nr_free = d->ext.nr_free + (vmm_free > 0),
		.blocks_outside = outside,
		.blocks_in_seen = d->torch_allocated - outside,
		.fragmentation = cached ? 1.0 - (double)largest / (double)cached : 0,
		.outside_torch = d->outside_torch,
		.leak_bytes = d->leak_bytes,
	};
	for (uint32_t i = 0; i < d->nlibs && i < SNAP_MAX_LIBS; i++)
		m->libs[m->nlibs++] = (struct snap_lib){ d->libs[i].name, d->libs[i].bytes };
}

/* Whether NVML lists pid on device i, and what it uses there (NVML_UNKNOWN: not told). */
static bool nvml_lists(const struct nvml_sample *n, int pid, uint32_t i, uint64_t *used)
{
	const struct nvml_device *d = &n->devs[i];

	for (uint32_t j = 0; j < d->nprocs && j < NVML_MAX_PROCS; j++) {
		if (d->procs[j].pid == (uint32_t)pid) {
			*used = d->procs[j].used;
			return true;
		}
	}
	return false;
}

/* Whether ordinal ord may be NVML's device whose figure for the process is used. */
static bool fits(const struct snap_proc *sp, int ord, uint64_t used)
{
	return used == NVML_UNKNOWN || sp->dev_bytes[ord] <= used;
}

/*
 * Which NVML device each CUDA ordinal of the process is. CUDA numbers the
 * devices CUDA_VISIBLE_DEVICES lets it see (an environment gpuleak does not
 * read), in its own order: an ordinal names a GPU only when the counts match,
 * one for one (basis "one"), or in ascending order on both sides when every
 * ordinal's bytes fit under NVML's figure for its GPU ("order"), or, for two,
 * in the only order the bytes allow ("bytes").
 */
static void map_gpus(const struct nvml_sample *n, int pid, struct snap_proc *sp)
{
	int ords[SNAP_MAX_DEVS], nords = 0;
	uint32_t gpus[SNAP_MAX_DEVS], ngpus = 0;
	uint64_t used[SNAP_MAX_DEVS];
	bool ascending = true, swapped;

	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		if (sp->dev_bytes[d])
			ords[nords++] = d;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++) {
		uint64_t u;

		if (!nvml_lists(n, pid, i, &u))
			continue;
		if (ngpus == SNAP_MAX_DEVS)
			return;
		used[ngpus] = u;
		gpus[ngpus++] = i;
	}
	if (!nords || (uint32_t)nords != ngpus)
		return;
	for (int k = 0; k < nords; k++)
		ascending = ascending && fits(sp, ords[k], used[k]);
	swapped = nords == 2 && !ascending && fits(sp, ords[0], used[1]) &&
		  fits(sp, ords[1], used[0]);
	if (!ascending && !swapped)
		return;
	for (int k = 0; k < nords; k++) {
		uint32_t g = gpus[swapped ? 1 - k : k];

		sp->gpus[ords[k]].nvml_index = (int)g;
		snprintf(sp->gpus[ords[k]].uuid, sizeof(sp->gpus[ords[k]].uuid), "%s",
			 n->devs[g].uuid);
	}
	sp->gpu_basis = nords == 1 ? "one" : swapped ? "bytes" : "order";
}

/* The ordinal NVML's device i was matched to, or -1. */
static int ordinal_of(const struct snap_proc *sp, uint32_t i)
{
	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		if (sp->gpus[d].nvml_index == (int)i)
			return d;
	return -1;
}

/*
 * NVML's figure on each row of the breakdown: the row of the ordinal the
 * device was matched to, or a row of its own (device not known) beside it.
 */
static void add_nvml_devs(const struct nvml_sample *n, int pid, struct snap_proc *sp)
{
	struct snap_memory *m = &sp->memory;

	map_gpus(n, pid, sp);
	for (uint32_t j = 0; j < m->ndevs; j++)
		if (m->devs[j].dev >= 0 && m->devs[j].dev < SNAP_MAX_DEVS)
			m->devs[j].nvml_index = sp->gpus[m->devs[j].dev].nvml_index;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++) {
		uint64_t used, others;
		struct snap_mem_dev *row = NULL;
		int ord;

		if (!nvml_lists(n, pid, i, &used) || used == NVML_UNKNOWN ||
		    !nvml_sample__proc_on(n, pid, i, &used, &others))
			continue;
		ord = ordinal_of(sp, i);
		for (uint32_t j = 0; ord >= 0 && j < m->ndevs; j++)
			if (m->devs[j].dev == ord)
				row = &m->devs[j];
		if (!row && m->ndevs < sizeof(m->devs) / sizeof(m->devs[0])) {
			row = &m->devs[m->ndevs++];
			*row = (struct snap_mem_dev){ .dev = ord, .nvml_index = (int)i };
		}
		if (!row)
			continue;
		row->nvml_valid = true;
		row->nvml_bytes = used;
		row->nvml_total = n->devs[i].total;
		row->nvml_free = n->devs[i].free;
		row->nvml_others = others;
		m->nvml_valid = true;
		m->nvml_bytes += used;
	}
}

/* A device's memory as NVML says (its index taken as the CUDA ordinal); -1: the largest. */
static uint64_t nvml_dev_total(const struct nvml_sample *n, int dev)
{
	uint64_t total = 0;

	if (!n)
		return 0;
	if (dev >= 0)
		return (uint32_t)dev < n->ndevices && dev < NVML_MAX_DEVICES ? n->devs[dev].total :
									       0;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++)
		if (n->devs[i].total > total)
			total = n->devs[i].total;
	return total;
}

/* Whether a device's largest allocation outside PyTorch is a framework's pool: kept if so. */
static void add_pool(const struct explain_dev *d, const struct nvml_sample *n,
		     struct snap_memory *m)
{
	uint64_t total = nvml_dev_total(n, d->dev);
	struct snap_pool *p;
	const char *fw, *with;
	uint32_t i;

	if (!d->largest_alloc || m->npools == SNAP_MAX_POOLS ||
	    !explain__is_pool(d->largest_lib, d->largest_alloc, total, &fw, &with))
		return;
	for (i = m->npools; i > 0 && m->pools[i - 1].bytes < d->largest_alloc; i--)
		m->pools[i] = m->pools[i - 1];
	p = &m->pools[i];
	*p = (struct snap_pool){ .dev = d->dev,
				 .bytes = d->largest_alloc,
				 .dev_total = total,
				 .stack = d->largest_stack,
				 .library = d->largest_lib,
				 .framework = fw,
				 .visible_with = with };
	m->npools++;
}

/* Where the process's device memory is: the books' breakdown beside NVML's figure. */
static int fill_memory(struct books *b, struct proc *proc, const struct snapshot_opts *o,
		       struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	struct explain_src src = books__explain_src(b);
	struct snap_memory *m = &sp->memory;
	struct explain *e;
	uint64_t free_sum = 0;

	if (!proc__live(proc))
		return 0; /* retired: the allocation table is gone */
	e = malloc(sizeof(*e));
	if (!e || explain__proc(&src, proc, t->exited ? t->exit_ns : o->now_ns, e)) {
		free(e);
		return -ENOMEM;
	}
	m->valid = true;
	m->blocks_seen = e->blocks_seen;
	m->pinned_host = e->pinned_host;
	m->managed = e->managed;
	for (uint32_t i = 0; i < e->ndevs && m->ndevs < sizeof(m->devs) / sizeof(m->devs[0]); i++) {
		struct snap_mem_dev *d = &m->devs[m->ndevs++];

		mem_dev_of(&e->devs[i], d);
		add_pool(&e->devs[i], o->nvml, m);
		m->device_bytes += d->device_bytes;
		m->torch_reserved += d->torch_reserved;
		m->torch_allocated += d->torch_allocated;
		m->torch_cached += d->torch_cached;
		m->outside_torch += d->outside_torch;
		m->blocks_outside += d->blocks_outside;
		m->blocks_in_seen += d->blocks_in_seen;
		free_sum += d->torch_cached;
		if (d->largest_free > m->largest_free)
			m->largest_free = d->largest_free;
	}
	free(e);
	m->fragmentation = free_sum ? 1.0 - (double)m->largest_free / (double)free_sum : 0;
	if (o->nvml && !t->exited) {
		add_nvml_devs(o->nvml, t->pid, sp);
		if (!m->nvml_valid && t->ns_pid > 0 && t->ns_pid != t->pid)
			add_nvml_devs(o->nvml, t->ns_pid, sp);
	}
	if (m->nvml_valid) {
		if (m->nvml_bytes >= m->device_bytes)
			m->unseen = m->nvml_bytes - m->device_bytes;
		else
			m->unexplained = m->device_bytes - m->nvml_bytes;
	}
	return 0;
}

static int fill_failures(struct books *b, struct symbolizer *sym, struct proc *proc,
			 const struct snapshot_opts *o, struct snap_proc *sp)
{
	uint32_t n = proc__nr_failures(proc);

	sp->failures_list = calloc(n ? n : 1, sizeof(*sp->failures_list));
	if (!sp->failures_list)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct failure *f = proc__failure(proc, i);
		struct snap_failure *sf = &sp->failures_list[i];

		sf->ts = f->ts;
		sf->bytes = f->bytes;
		sf->held_device = f->held_device;
		sf->api = probe__name(f->api);
		sf->error = cuda__error_name(f->rc);
		sf->rc = f->rc;
		sf->cls = f->cls;
		sf->stack = calloc(1, sizeof(*sf->stack));
		if (!sf->stack || fill_frames(b, sym, o->python, f->stack, sf->stack))
			return -ENOMEM;
		sp->nfailures++;
		if (f->has_facts && fill_oom(f, sf))
			return -ENOMEM;
		if (!f->nr_holders)
			continue;
		sf->holders = calloc(f->nr_holders, sizeof(*sf->holders));
		if (!sf->holders)
			return -ENOMEM;
		for (uint32_t h = 0; h < f->nr_holders; h++) {
			struct snap_stack *hs = &sf->holders[h];

			hs->cls = f->holders[h].cls;
			hs->outstanding_bytes = f->holders[h].bytes;
			hs->outstanding_allocs = f->holders[h].allocs;
			sf->nholders++;
			if (fill_frames(b, sym, o->python, f->holders[h].stack, hs))
				return -ENOMEM;
		}
	}
	return 0;
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
 * Whether the two books agree. BPF's counters of a process that is still
 * running are read while it calls: the changes the kernel counted whose
 * records user space has not applied yet (in the programs, in the ring
 * buffer, or made while the snapshot was built) are exactly the difference
 * of the two change counts, each change moving one allocation. For such a
 * live reading, the books agree within that many changes, and with none in
 * flight they must be equal to the byte. A process's final books (taken at
 * its exit) must agree exactly.
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
	end = t->exited ? t->exit_ns : o->now_ns;
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
		/* lost call records make a real difference, which no slack may hide */
		live = !sp->bpf.exit_time &&
		       !(o->stats && (o->stats[GL_STAT_LOST_CALL] || o->stats[GL_STAT_LOST_PROC]));
	} else if (t->alloc_calls == 0 && t->free_calls == 0 && t->failures == 0) {
		sp->bpf_valid = true; /* BPF holds nothing for a process that made no call */
		memset(&sp->bpf, 0, sizeof(sp->bpf));
	}
	sp->consistent = sp->bpf_valid && books_agree(sp, live);
	if (sp->bpf_valid && !sp->consistent)
		use_kernel_totals(sp);
	fill_growth(proc, o, end, sp);
	if (fill_memory(b, proc, o, sp) || fill_stacks(b, sym, proc, o, sp))
		return -ENOMEM;
	return fill_failures(b, sym, proc, o, sp);
}

static void proc_imbalances(struct snapshot *s, double ratio)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		snapshot__proc_imbalance(&s->procs[i], i, ratio);
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
	s->cap_allocs = o->cap_allocs;
	s->cap_stacks = o->cap_stacks;
	s->cap_procs = o->cap_procs;
	s->procs_refused = procs__refused(procs);
	s->stack_overflows = stacks__overflows(books__stacks(b));
	if (o->tensors) {
		s->tensors_buf = *o->tensors;
		s->tensors = &s->tensors_buf;
	}
	s->procs = calloc(n ? n : 1, sizeof(*s->procs));
	if (!s->procs)
		goto fail;
	s->complete = s->lost_events == 0 && s->stats[GL_STAT_ALLOC_TABLE_FULL] == 0 &&
		      s->stats[GL_STAT_INFLIGHT_FULL] == 0 &&
		      s->stats[GL_STAT_NESTED_OVERFLOW] == 0 && s->malformed == 0 &&
		      s->procs_refused == 0;
	for (uint32_t i = 0; (proc = procs__at(procs, i)); i++) {
		struct snap_proc *sp = &s->procs[s->nprocs++];

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
	proc_imbalances(s, o->imbalance_ratio);
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

void snapshot__hide_idle(struct snapshot *s)
{
	uint32_t kept = 0, n = s->nprocs;

	for (uint32_t i = 0; i < n; i++) {
		if (!proc_used_cuda(&s->procs[i]))
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
		add_nvml_devs(nvml, pid, p);
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
