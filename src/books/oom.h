/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * oom.h - what the books know when a device allocation runs out of memory, and
 * the causes it is explained by (explain.h classifies).
 */
#ifndef GL_OOM_H
#define GL_OOM_H

#include <stdbool.h>
#include <stdint.h>

enum oom_cause {
	OOM_CAUSE_NONE = 0, /* not an out-of-memory failure of device memory */
	OOM_CAUSE_LEAK,
	OOM_CAUSE_FRAGMENTATION,
	OOM_CAUSE_TORCH_CACHE,
	OOM_CAUSE_OUTSIDE_TORCH,
	OOM_CAUSE_OTHER_PROCESSES,
	OOM_CAUSE_PEAK,
	OOM_CAUSE_UNKNOWN,
};

/* What was known when a device allocation ran out of memory. */
struct oom_facts {
	uint64_t request;
	int dev;	    /* the device, -1 if not known (then every device together) */
	bool torch_request; /* the failing call came from PyTorch's caching allocator */
	bool blocks_seen;
	uint64_t held; /* device memory the process held on the device (gpuleak's books) */
	uint64_t torch_reserved, torch_allocated;
	uint64_t free_extents, largest_free, nr_free; /* of the reserve */
	uint64_t blocks_outside;		      /* block bytes in segments not seen */
	uint64_t leak_bytes;
	uint64_t outside_torch;
	const char *top_lib; /* the library outside PyTorch holding the most, or NULL */
	uint64_t top_lib_bytes;
	/* NVML (or nvidia-smi), when nvml is set */
	bool nvml;
	bool proc_listed; /* NVML listed the process: proc_used is known */
	uint64_t dev_total, dev_free, proc_used, others_used;
};

struct oom_explain {
	enum oom_cause cause;
	char why[320];	    /* the evidence, one line */
	const char *action; /* what usually helps; static */
};

#endif /* GL_OOM_H */
