/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * explain.h - where a process's device memory is, from the books: PyTorch's
 * blocks and the reserve around them (segments minus blocks, with the largest
 * free extent), memory outside PyTorch's allocator by the library whose code
 * asked for it, pinned host memory apart; and why an allocation ran out of
 * memory, as one cause with the action that usually helps.
 */
#ifndef GL_EXPLAIN_H
#define GL_EXPLAIN_H

#include <stdbool.h>
#include <stdint.h>
#include "oom.h"
#include "procs.h"
#include "util/extent.h"

struct stacks;
struct modules;

/* What the breakdown reads beside a process: the books' stack and module tables. */
struct explain_src {
	const struct stacks *stacks;
	struct modules *mods;
	bool torch_map_complete; /* the tensor blocks are the allocator's whole map */
};

#define EXPLAIN_MAX_LIBS 6 /* libraries named per device; the rest add up in "other" */
#define EXPLAIN_MAX_DEVS (PROC_MAX_DEVICES + 1) /* and one for "device not known" */

struct explain_lib {
	const char *name; /* "nccl", "cublas", "cudnn", "cupy", "xla", "program", a module's
			     file name (borrowed from the module table), or "other" */
	uint64_t bytes;
};

/* One device of a process (dev -1: allocations whose device is not known). */
struct explain_dev {
	int dev;
	uint64_t device_bytes;	  /* device memory gpuleak saw allocated and not freed */
	uint64_t torch_reserved;  /* segments PyTorch's caching allocator asked the driver for */
	uint64_t torch_allocated; /* PyTorch's blocks (tensor probes) */
	uint64_t torch_blocks;
	uint64_t torch_vmm;	 /* of torch_reserved: cuMemCreate handles (expandable segments),
				     which have no addresses here: not in ext */
	struct extent_stats ext; /* the segments minus the blocks */
	uint64_t outside_torch;	 /* device memory not under PyTorch's allocator */
	uint32_t nlibs;
	struct explain_lib libs[EXPLAIN_MAX_LIBS + 1]; /* of outside_torch, largest first */
	uint64_t leak_bytes;			       /* held by stacks judged to leak */
	/* the largest single allocation outside PyTorch's allocator: a pool's candidate */
	uint64_t largest_alloc;
	uint32_t largest_stack;
	const char *largest_lib; /* its library group, as in libs */
};

struct explain {
	bool blocks_seen; /* PyTorch's blocks were seen: the reserve can be split */
	uint32_t ndevs;	  /* devices with memory, by ordinal; "not known" last */
	struct explain_dev devs[EXPLAIN_MAX_DEVS];
	uint64_t pinned_host, managed;
};

/*
 * The breakdown of a running or exited process's books at time now (verdicts
 * are drawn then). Returns 0, or -ENOMEM (*out is then incomplete).
 */
int explain__proc(const struct explain_src *src, struct proc *proc, uint64_t now,
		  struct explain *out);

/*
 * Who asked for the memory a stack allocated: sets *torch when the stack
 * passes through PyTorch's caching allocator (libc10_cuda.so); returns the
 * library group of its innermost frame outside the CUDA libraries (see
 * struct explain_lib), never NULL.
 */
const char *explain__library(const struct explain_src *src, uint32_t stack, bool *torch);

/*
 * The group of a module's path: a known library by its file name ("nccl", "cublas" for
 * libcublas and libcublasLt, "cudnn", "xla", ...) or a folder of its path ("cupy",
 * "xla"), "program" for the executable (program set), else the file name (borrowed).
 */
const char *explain__library_group(const char *path, bool program);

/*
 * Whether one allocation of bytes made by library group lib is a framework's
 * preallocated pool, whose sub-allocations make no driver call: at least
 * EXPLAIN_POOL_SHARE_PCT of its device's dev_total (0: not known; then at least
 * EXPLAIN_POOL_XLA_MIN for XLA, EXPLAIN_POOL_MIN otherwise). When it is, sets
 * *framework ("XLA", or NULL when the library is not one known to preallocate)
 * and *visible_with (how to make the buffers inside visible; static).
 */
#define EXPLAIN_POOL_SHARE_PCT 25
#define EXPLAIN_POOL_XLA_MIN (1ULL << 30)
#define EXPLAIN_POOL_MIN (4ULL << 30)
bool explain__is_pool(const char *lib, uint64_t bytes, uint64_t dev_total, const char **framework,
		      const char **visible_with);

/* Whether a module's path is PyTorch's CUDA caching allocator (libc10_cuda.so). */
bool explain__is_torch_allocator(const char *path);

/* Classifies one out-of-memory failure from its facts. Pure; never fails. */
void oom__classify(const struct oom_facts *f, struct oom_explain *out);

/* "leak", "fragmentation", "torch_cache", "outside_torch", "other_processes", "peak",
 * "unknown", or NULL for OOM_CAUSE_NONE. */
const char *oom__cause_name(enum oom_cause c);

#endif /* GL_EXPLAIN_H */
