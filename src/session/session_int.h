/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session_int.h - the session's state, shared by session.c (lifecycle, loop,
 * snapshot) and tiers.c (when the tensor level is traced). Private to model/:
 * everyone else goes through session.h.
 */
#ifndef GL_SESSION_INT_H
#define GL_SESSION_INT_H

#include <stdint.h>
#include "model/opts.h"
#include "session.h"

struct tracer;
struct modules;
struct stacks;
struct unwinder;
struct symbolizer;
struct python;
struct books;
struct modstore;
struct targets;
struct tiers;
struct gpu_sampler;
struct nvml_sample;

struct session {
	const struct gl_opts *o;
	struct tracer *tracer;
	struct modules *mods;
	struct stacks *stacks;
	struct unwinder *unwinder;
	struct symbolizer *sym;
	struct python *python;
	struct books *books;
	struct timeline *timeline;	 /* --perfetto */
	struct mvtrace *mvtrace;	 /* --memory-viz */
	session_incident_fn incident_fn; /* the flight recorder, or NULL */
	void *incident_ctx;
	session_census_fn census_fn; /* --census-on-oom */
	struct modstore *keep;	     /* --keep-modules */
	struct targets *targets;
	struct tiers *tiers; /* when the tensor level is traced */
	uint64_t start_ns, deadline_ns, next_reconcile_ns;
	struct gpu_sampler *gpus; /* NVML, cached */
	struct session_sink sink; /* record's, or none */
};

#endif /* GL_SESSION_INT_H */
