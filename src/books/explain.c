// SPDX-License-Identifier: BSD-2-Clause
/*
 * explain.c - the breakdown of a process's device memory from its allocation
 * table (segments and blocks by address, each under its stack), and the
 * classification of out-of-memory failures.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"
#include "explain.h"
#include "proc_int.h"
#include "stacks/modules.h"
#include "stacks/stacks.h"
#include "trace/libcuda.h"
#include "util/fmt.h"

bool explain__is_torch_allocator(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	return base && !strncmp(base, "libc10_cuda.so", 14);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* The CUDA runtime passes calls through: the memory is its caller's. */
static bool is_cuda_layer(const char *base)
{
	return !strncmp(base, "libcuda.so", 10) || !strncmp(base, "libcudart.so", 12) ||
	       !strncmp(base, "libcudart_static", 16) || libcuda__is_driver_name(base);
}

const char *explain__library_group(const char *path, bool program)
{
	static const struct {
		const char *prefix, *group;
	} known[] = {
		{ "libnccl", "nccl" },	       { "libcublasLt", "cublas" },
		{ "libcublas", "cublas" },     { "libcudnn", "cudnn" },
		{ "libcufft", "cufft" },       { "libcusparse", "cusparse" },
		{ "libcusolver", "cusolver" },
	};
	const char *base = base_name(path);

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strncmp(base, known[i].prefix, strlen(known[i].prefix)))
			return known[i].group;
	if (strstr(path, "/cupy/") || strstr(path, "/cupy_backends/") || strstr(base, "cupy"))
		return "cupy";
	if (libcuda__is_xla_path(path))
		return "xla";
	return program ? "program" : base;
}

const char *explain__library(const struct explain_src *src, uint32_t stack, bool *torch)
{
	uint32_t n;
	const struct frame *frames = stacks__get(src->stacks, stack, &n);
	const char *lib = NULL;
	bool python = false;

	*torch = false;
	for (uint32_t i = 0; frames && i < n; i++) {
		const struct module_info *mi;

		if (frames[i].kind == FRAME_PYTHON)
			python = true;
		if (frames[i].kind != FRAME_NATIVE)
			continue;
		mi = modules__info(src->mods, frames[i].mod);
		if (!mi || !mi->path)
			continue;
		if (explain__is_torch_allocator(mi->path)) {
			*torch = true;
			return "torch";
		}
		if (!lib && !is_cuda_layer(base_name(mi->path)))
			lib = explain__library_group(mi->path, !strstr(base_name(mi->path), ".so"));
	}
	if (!lib)
		return python ? "program" : "other";
	return lib;
}

struct stack_info {
	const char *lib;
	bool torch, leak;
};

struct dev_acc {
	struct explain_dev d;
	struct extent *segs, *blocks;
	size_t nsegs, nblocks, cap_segs, cap_blocks;
	struct explain_lib libs[64];
	uint32_t nlibs;
};

static int push(struct extent **arr, size_t *n, size_t *cap, uint64_t start, uint64_t len)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct extent *p = realloc(*arr, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*arr = p;
		*cap = c;
	}
	(*arr)[(*n)++] = (struct extent){ start, len };
	return 0;
}

static void add_lib(struct dev_acc *a, const char *name, uint64_t bytes)
{
	uint32_t i;

	for (i = 0; i < a->nlibs; i++)
		if (a->libs[i].name == name || !strcmp(a->libs[i].name, name))
			break;
	if (i == a->nlibs) {
		if (a->nlibs == sizeof(a->libs) / sizeof(a->libs[0]))
			name = "other", i = a->nlibs - 1;
		else
			a->libs[a->nlibs++] = (struct explain_lib){ name, 0 };
	}
	a->libs[i].bytes += bytes;
}

static int cmp_lib(const void *x, const void *y)
{
	const struct explain_lib *a = x, *b = y;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The largest libraries by name, the rest in "other". */
static void finish_libs(struct dev_acc *a)
{
	uint64_t other = 0;

	qsort(a->libs, a->nlibs, sizeof(a->libs[0]), cmp_lib);
	for (uint32_t i = 0; i < a->nlibs; i++) {
		if (i < EXPLAIN_MAX_LIBS)
			a->d.libs[a->d.nlibs++] = a->libs[i];
		else
			other += a->libs[i].bytes;
	}
	if (other)
		a->d.libs[a->d.nlibs++] = (struct explain_lib){ "other", other };
}

/* Per stack of the process: its library, whether it is PyTorch's, whether it leaks now. */
static struct htab *stack_infos(const struct explain_src *src, struct proc *proc, uint64_t now)
{
	struct htab *h = htab__new(sizeof(uint32_t), sizeof(struct stack_info));
	const struct agg_key *k;
	struct agg *a;
	size_t it = 0;

	if (!h)
		return NULL;
	while ((a = htab__next(proc->aggs, &it, (const void **)&k))) {
		struct stack_info *si;
		struct verdict_info vi;
		bool created;

		if (!a->bytes || (k->cls != GL_CLASS_DEVICE && k->cls != GL_CLASS_TORCH_BLOCK))
			continue;
		si = htab__upsert(h, &k->stack, &created);
		if (!si) {
			htab__free(h);
			return NULL;
		}
		if (created)
			si->lib = explain__library(src, k->stack, &si->torch);
		series__classify(a->series, now, &vi);
		if (vi.verdict == VERDICT_LEAK && (k->cls == GL_CLASS_TORCH_BLOCK || !si->torch))
			si->leak = true; /* a leaking segment holds the blocks' leak: not twice */
	}
	return h;
}

static int dev_slot(int dev)
{
	return dev >= 0 && dev < PROC_MAX_DEVICES ? dev : PROC_MAX_DEVICES;
}

static int account_alloc(struct dev_acc *acc, const struct htab *infos, const struct alloc_key *k,
			 const struct alloc_val *v)
{
	struct dev_acc *a = &acc[dev_slot(v->dev)];
	const struct stack_info *si = htab__lookup(infos, &v->stack);
	static const struct stack_info none = { "other", false, false };

	/*
	 * Its free is in flight and the driver gave its address to a newer
	 * allocation: still outstanding, so counted, but kept under its number,
	 * not its address, so it is in no extent (the newer one covers the range).
	 */
	bool freeing = k->kind == ALLOC_KIND_FREEING;

	if (!si)
		si = &none;
	if (v->cls == GL_CLASS_TORCH_BLOCK) {
		a->d.torch_allocated += v->size;
		a->d.torch_blocks++;
		if (si->leak)
			a->d.leak_bytes += v->size;
		if (freeing)
			return 0;
		return push(&a->blocks, &a->nblocks, &a->cap_blocks, k->key, v->size);
	}
	if (v->cls != GL_CLASS_DEVICE || k->kind == GL_KIND_MAPPING)
		return 0;
	a->d.device_bytes += v->size;
	if (si->leak)
		a->d.leak_bytes += v->size;
	if (si->torch) {
		a->d.torch_reserved += v->size;
		if (freeing)
			return 0;
		if (k->kind == GL_KIND_DPTR)
			return push(&a->segs, &a->nsegs, &a->cap_segs, k->key, v->size);
		if (k->kind == GL_KIND_HANDLE)
			a->d.torch_vmm += v->size;
		return 0;
	}
	a->d.outside_torch += v->size;
	add_lib(a, si->lib, v->size);
	if (v->size > a->d.largest_alloc) {
		a->d.largest_alloc = v->size;
		a->d.largest_stack = v->stack;
		a->d.largest_lib = si->lib;
	}
	return 0;
}

bool explain__is_pool(const char *lib, uint64_t bytes, uint64_t dev_total, const char **framework,
		      const char **visible_with)
{
	bool xla = lib && !strcmp(lib, "xla");

	*framework = NULL;
	*visible_with = NULL;
	if (dev_total ? bytes * 100 < dev_total * EXPLAIN_POOL_SHARE_PCT :
			bytes < (xla ? EXPLAIN_POOL_XLA_MIN : EXPLAIN_POOL_MIN))
		return false;
	if (xla) {
		*framework = "XLA";
		*visible_with = "XLA_PYTHON_CLIENT_PREALLOCATE=false "
				"XLA_PYTHON_CLIENT_ALLOCATOR=platform (each buffer its own "
				"driver allocation, at the Python line that made it)";
	} else {
		*visible_with = "make the framework allocate on demand, not preallocate (its "
				"own setting), so that each buffer is a driver allocation";
	}
	return true;
}

int explain__proc(const struct explain_src *src, struct proc *proc, uint64_t now,
		  struct explain *out)
{
	struct dev_acc *acc = calloc(EXPLAIN_MAX_DEVS, sizeof(*acc));
	struct htab *infos = NULL;
	const struct alloc_key *k;
	struct alloc_val *v;
	size_t it = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->pinned_host = proc->t.bytes[GL_CLASS_HOST_PINNED];
	out->managed = proc->t.bytes[GL_CLASS_MANAGED];
	/* in tensor windows the blocks are a window's, not the allocator's whole map */
	out->blocks_seen = proc->t.alloc_bytes[GL_CLASS_TORCH_BLOCK] > 0 && src->torch_map_complete;
	if (!acc)
		return -ENOMEM;
	if (!proc->allocs) { /* retired (exited): its table is gone */
		err = 0;
		goto cleanup;
	}
	infos = stack_infos(src, proc, now);
	if (!infos)
		goto cleanup;
	while ((v = htab__next(proc->allocs, &it, (const void **)&k)))
		if (account_alloc(acc, infos, k, v))
			goto cleanup;
	for (int i = 0; i < EXPLAIN_MAX_DEVS; i++) {
		struct dev_acc *a = &acc[i];

		if (!a->d.device_bytes && !a->d.torch_allocated)
			continue;
		a->d.dev = i < PROC_MAX_DEVICES ? i : -1;
		extents__subtract(a->segs, a->nsegs, a->blocks, a->nblocks, &a->d.ext);
		finish_libs(a);
		out->devs[out->ndevs++] = a->d;
	}
	err = 0;
cleanup:
	for (int i = 0; i < EXPLAIN_MAX_DEVS; i++) {
		free(acc[i].segs);
		free(acc[i].blocks);
	}
	free(acc);
	htab__free(infos);
	return err;
}

const char *oom__cause_name(enum oom_cause c)
{
	static const char *const names[] = {
		[OOM_CAUSE_LEAK] = "leak",
		[OOM_CAUSE_FRAGMENTATION] = "fragmentation",
		[OOM_CAUSE_TORCH_CACHE] = "torch_cache",
		[OOM_CAUSE_OUTSIDE_TORCH] = "outside_torch",
		[OOM_CAUSE_OTHER_PROCESSES] = "other_processes",
		[OOM_CAUSE_PEAK] = "peak",
		[OOM_CAUSE_UNKNOWN] = "unknown",
	};

	return c > OOM_CAUSE_NONE && c <= OOM_CAUSE_UNKNOWN ? names[c] : NULL;
}

/* A part that matters: it would have made room for the request, or is a quarter of the rest. */
static bool matters(uint64_t part, uint64_t request, uint64_t whole)
{
	return part && (part >= request || part >= whole / 4);
}

static void set(struct oom_explain *out, enum oom_cause c, const char *action, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set(struct oom_explain *out, enum oom_cause c, const char *action, const char *fmt, ...)
{
	va_list ap;

	out->cause = c;
	out->action = action;
	va_start(ap, fmt);
	if (vsnprintf(out->why, sizeof(out->why), fmt, ap) >= (int)sizeof(out->why))
		memcpy(out->why + sizeof(out->why) - 4, "...", 4); /* cut, and says so */
	va_end(ap);
}

#define B(x, i) fmt_bytes((x), buf[i], sizeof(buf[i]))

void oom__classify(const struct oom_facts *f, struct oom_explain *out)
{
	char buf[4][32];
	uint64_t cached =
		f->torch_reserved > f->torch_allocated ? f->torch_reserved - f->torch_allocated : 0;
	uint64_t unseen = f->proc_listed && f->proc_used > f->held ? f->proc_used - f->held : 0;

	memset(out, 0, sizeof(*out));
	if (f->torch_request && f->blocks_seen && f->free_extents >= f->request &&
	    f->largest_free < f->request) {
		set(out, OOM_CAUSE_FRAGMENTATION,
		    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:N, so "
		    "that large cached blocks are not split)",
		    "PyTorch's reserve had %s free in %llu extents, none as large as the %s "
		    "requested (the largest %s)",
		    B(f->free_extents, 0), (unsigned long long)f->nr_free, B(f->request, 1),
		    B(f->largest_free, 2));
		return;
	}
	if (matters(f->leak_bytes, f->request, f->held)) {
		set(out, OOM_CAUSE_LEAK,
		    "keep no reference to a step's tensors: .item() or .detach() for values kept "
		    "(losses, metrics), .cpu() for what is stored, torch.no_grad() for evaluation",
		    "stacks judged to leak held %s of the %s the process held on the device",
		    B(f->leak_bytes, 0), B(f->held, 1));
		return;
	}
	if (!f->torch_request && f->blocks_seen && matters(cached, f->request, f->held)) {
		set(out, OOM_CAUSE_TORCH_CACHE,
		    "torch.cuda.empty_cache() at the phase change, so that PyTorch's cache of the "
		    "previous phase's peak is handed back",
		    "a request outside PyTorch failed while PyTorch's cache held %s it had not "
		    "handed out",
		    B(cached, 0));
		return;
	}
	if (f->top_lib && !strcmp(f->top_lib, "xla") &&
	    matters(f->top_lib_bytes, f->request, f->held)) {
		set(out, OOM_CAUSE_OUTSIDE_TORCH,
		    "leave room beside XLA: XLA_PYTHON_CLIENT_PREALLOCATE=false (JAX preallocates 75% "
		    "of the device) or a smaller XLA_PYTHON_CLIENT_MEM_FRACTION",
		    "%s held %s outside PyTorch's allocator (of %s outside it, %s in all)",
		    f->top_lib, B(f->top_lib_bytes, 0), B(f->outside_torch, 1), B(f->held, 2));
		return;
	}
	if (f->top_lib && matters(f->top_lib_bytes, f->request, f->held)) {
		set(out, OOM_CAUSE_OUTSIDE_TORCH,
		    "bound the library's own memory (its workspace or pool settings, e.g. "
		    "CUBLAS_WORKSPACE_CONFIG, NCCL_BUFFSIZE, CuPy's memory pool limit) or free it "
		    "when done",
		    "%s held %s outside PyTorch's allocator (of %s outside it, %s in all)",
		    f->top_lib, B(f->top_lib_bytes, 0), B(f->outside_torch, 1), B(f->held, 2));
		return;
	}
	if (f->nvml && matters(f->others_used, f->request, f->dev_total)) {
		set(out, OOM_CAUSE_OTHER_PROCESSES,
		    "give the job a device of its own, or lower the other processes' use",
		    "the device's other processes held %s of its %s (NVML)", B(f->others_used, 0),
		    B(f->dev_total, 1));
		return;
	}
	if (matters(unseen, f->request, f->proc_used)) {
		set(out, OOM_CAUSE_UNKNOWN,
		    "attach before the job allocates (gpuleak run, or attach at its start)",
		    "%s of the process's %s (NVML) was allocated before gpuleak attached, or "
		    "is the CUDA context: gpuleak cannot tell whose",
		    B(unseen, 0), B(f->proc_used, 1));
		return;
	}
	if (f->torch_request && !f->blocks_seen && f->torch_reserved >= f->request) {
		set(out, OOM_CAUSE_UNKNOWN,
		    "let gpuleak trace PyTorch's blocks throughout (--tensors full) before the "
		    "failure",
		    "PyTorch's blocks were not all seen (driver level only: the tensor probes were "
		    "not armed, or armed in windows), so whether its reserve of %s was fragmented "
		    "or leaking cannot be told",
		    B(f->torch_reserved, 0));
		return;
	}
	if (!f->nvml) {
		set(out, OOM_CAUSE_UNKNOWN, "run where NVML (or nvidia-smi) answers",
		    "no leak, fragmentation or library outside PyTorch explains it, and without "
		    "NVML neither the device's other processes nor memory from before attach can "
		    "be ruled out (the process held %s)",
		    B(f->held, 0));
		return;
	}
	set(out, OOM_CAUSE_PEAK,
	    "a smaller batch or sequence, activation checkpointing, or a larger device",
	    "nothing above explains it: the working set (%s held, %s requested) does not fit the "
	    "device, which had %s free of %s (the rest: contexts and memory from before attach)",
	    B(f->held, 0), B(f->request, 1), B(f->dev_free, 2), B(f->dev_total, 3));
}
