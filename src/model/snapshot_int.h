/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * snapshot_int.h - the parts of one process's snapshot that snapshot.c has
 * filled by the files beside it: stacks and frames (snap_stacks.c), the memory
 * breakdown and NVML's GPUs (snap_memory.c), failed allocations
 * (snap_failures.c). Private to model/: everyone else goes through snapshot.h.
 * Each int function returns 0 or -ENOMEM; what it allocates hangs off sp (or
 * st) and is freed by snapshot__free(), also after a failure.
 */
#ifndef GL_SNAPSHOT_INT_H
#define GL_SNAPSHOT_INT_H

#include <stdint.h>
#include "snapshot.h"

struct books;
struct proc;
struct python;
struct symbolizer;
struct nvml_sample;

/* When the process's verdicts and figures are as of: its exit, o->judge_ns, or now. */
uint64_t snapshot__proc_now(const struct snapshot_opts *o, const struct proc *proc);

/* Whether stack id allocates for PyTorch's caching allocator (a frame in its library). */
bool snap_stacks__torch_allocator(struct books *b, uint32_t id);
/* The process's stacks into sp->stacks, ranked, cut to o->max_stacks, with frames. */
int snap_stacks__fill(struct books *b, struct symbolizer *sym, struct proc *proc,
		      const struct snapshot_opts *o, struct snap_proc *sp);

/* The memory breakdown of a live process into sp->memory, with o->nvml's figures. */
int snap_memory__fill(struct books *b, struct proc *proc, const struct snapshot_opts *o,
		      struct snap_proc *sp);
/* PyTorch's segments and blocks of a live process into sp->memmap (after its stacks). */
int snap_memmap__fill(struct books *b, struct proc *proc, struct snap_proc *sp);
/* NVML's figures for pid into sp->memory's rows, and sp->gpus matched where they can be. */
void snap_memory__add_nvml(const struct nvml_sample *n, int pid, struct snap_proc *sp);

/* The process's failed allocations into sp->failures_list, with stacks and OOM facts. */
int snap_failures__fill(struct books *b, struct symbolizer *sym, struct proc *proc,
			const struct snapshot_opts *o, struct snap_proc *sp);

#endif /* GL_SNAPSHOT_INT_H */
