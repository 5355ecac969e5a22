/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session_int.h - the session's state, shared by session.c (lifecycle, loop),
 * snapshots.c and tiers.c (when the tensor level is traced). Private to session/:
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

/*
 * The snapshot; drain: the ring read to its end first, and a retry while the two books
 * differ (not from inside a hook of the books, which the drain would enter again).
 * only_pid: that process's alone; judge_pid, judge_ns: its stacks judged as of then.
 */
struct snapshot *session__snapshot_of(struct session *s, uint32_t max_stacks, bool symbols,
				      bool drain, int only_pid, int judge_pid, uint64_t judge_ns);
/* NVML's view of the devices; NULL when there is none, or nothing is traced yet. */
const struct nvml_sample *session__sample_nvml(struct session *s);
/* The books of processes whose exit record was lost, taken from BPF's. */
void session__reconcile_exits(struct session *s);

#endif /* GL_SESSION_INT_H */
