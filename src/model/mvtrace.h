/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mvtrace.h - each process's PyTorch memory events as the books apply them
 * (blocks and the caching allocator's segments), for the memory_viz
 * snapshot's device_traces (--memory-viz).
 */
#ifndef GL_MVTRACE_H
#define GL_MVTRACE_H

#include <stdint.h>
#include "model/snapshot.h"

struct books;
struct mvtrace;

#define MVTRACE_MAX_EVENTS 65536 /* kept per process; the oldest go first, counted */

/* Follows b's records from now on. NULL with errno on failure. */
struct mvtrace *mvtrace__new(struct books *b, uint32_t max_events);
void mvtrace__free(struct mvtrace *t);
/* A copy of process (pid, start_time)'s events, oldest first, into *out (free() it; NULL
 * when none were kept), how many into *n, how many went before them into *dropped.
 * 0, or -ENOMEM. */
int mvtrace__proc(const struct mvtrace *t, int pid, uint64_t start_time, struct mv_event **out,
		  uint32_t *n, uint64_t *dropped);

#endif /* GL_MVTRACE_H */
