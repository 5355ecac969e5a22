/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session_int.h - the session's state, shared by session.c (lifecycle, loop,
 * snapshot) and the agent (agent/serve.c).
 * Not for other modules.
 */
#ifndef GL_SESSION_INT_H
#define GL_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "books/books.h"
#include "model/opts.h"
#include "stacks/modstore.h"
#include "stacks/python/python.h"
#include "stacks/native/symbolize.h"
#include "stacks/native/unwind.h"
#include "trace/libcuda.h"
#include "trace/loader.h"
#include "trace/targets.h"

struct session {
	const struct gl_opts *o;
	struct tracer *tracer;
	struct modules *mods;
	struct stacks *stacks;
	struct unwinder *unwinder;
	struct symbolizer *sym;
	struct python *python;
	struct books *books;
	struct modstore *keep; /* --keep-modules */
	struct targets *targets;
	uint64_t start_ns, deadline_ns, next_reconcile_ns;
	struct gpu_sampler *gpus; /* NVML, cached */
	struct tiers *tiers;	  /* when the tensor level is traced */
};

#endif /* GL_SESSION_INT_H */
