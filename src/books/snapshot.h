/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * books/snapshot.h - building a report snapshot (report/snapshot.h) from the books.
 */
#ifndef GL_BOOKS_SNAPSHOT_H
#define GL_BOOKS_SNAPSHOT_H

#include "books.h"
#include "report/snapshot.h"
#include "stacks/symbolize.h"

struct python;
struct nvml_sample;

struct snapshot_opts {
	uint64_t now_ns;    /* bpf_ktime_get_ns clock */
	uint64_t start_ns;  /* when tracing started, same clock */
	uint32_t max_stacks; /* per process, 0 = every stack with outstanding memory */
	bool all_stacks;     /* include stacks with nothing outstanding */
	const uint64_t *stats; /* GL_NR_STATS BPF counters, or NULL */
	const uint64_t *api_calls; /* GL_NR_APIS call counts, or NULL */
	/* BPF's books of a running process; returns 0 or -ENOENT. NULL: none. */
	int (*bpf_stats)(void *ctx, int pid, struct gl_proc_stats *out);
	void *bpf_ctx;
	struct python *python; /* resolves Python frames; may be NULL */
	const char *stack_mode;
	uint32_t nr_probes;
	const struct nvml_sample *nvml; /* NVML's devices and processes; NULL: none */
	const struct snap_tensors *tensors; /* the tensor level's windows; NULL: none known */
	uint32_t cap_allocs; /* the caps in force, reported with what they cost (0: unknown) */
	uint32_t cap_stacks;
};

/*
 * A snapshot of every process in the books. Strings are borrowed from the
 * symbolizer and the module table, which must outlive it. NULL on ENOMEM.
 */
struct snapshot *snapshot__build(struct books *b, struct symbolizer *sym,
				 const struct snapshot_opts *o);

#endif /* GL_BOOKS_SNAPSHOT_H */
