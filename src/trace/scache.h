/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * scache.h - the stack_cache map's one writer: the native stacks the unwinder
 * (stacks/native/unwind.h) publishes for BPF to send by id.
 */
#ifndef GL_SCACHE_H
#define GL_SCACHE_H

#include "stacks/native/unwind.h"

struct tracer;

/* A publisher that writes to t's stack_cache map (t must outlive its use). */
struct scache_publisher scache__publisher(struct tracer *t);

#endif /* GL_SCACHE_H */
