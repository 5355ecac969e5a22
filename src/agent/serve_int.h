/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * serve_int.h - the agent's state, shared by serve.c (loop, HTTP, metrics)
 * and serve_files.c (state directory, heap profiles, GPU identities).
 * Not for other modules.
 */
#ifndef GL_SERVE_INT_H
#define GL_SERVE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "http.h"
#include "model/opts.h"
#include "serve.h"
#include "report/metrics.h"
#include "util/htab.h"

struct session;
struct snapshot;
struct nvml_sample;

struct agent {
	const struct gl_opts *o;
	struct session *s;
	struct http_server *http;
	struct htab *idents; /* (pid, start time) -> struct proc_ident */
	struct agent_health h;
	int state_fd, profile_fd; /* directories, -1 if none */
	uint64_t next_housekeeping_ns, next_liveness_ns, next_profile_ns;
	uint64_t profile_seq;
	uint64_t compacted_at_forgotten; /* procs_forgotten at the last stack compaction */
	uint64_t next_compact_ns;
	serve_census_fn census;	     /* GET /census */
	struct incidents *incidents; /* --state-dir/incidents, or NULL */
};

/* Drops exited processes (and those /proc says are gone) from the books. */
void agent__housekeeping(struct agent *a, uint64_t now);

/* serve_files.c */
/* Opens (creating, 0700) --state-dir and the profile directory. Returns EXIT_*. */
int agent__open_state(struct agent *a);
void agent__close_state(struct agent *a);
/* Writes one heap profile into the profile directory and removes the oldest past the cap. */
void agent__write_profile(struct agent *a);
/* /debug/pprof/gpu_heap. Returns 0 (rep->status says how it went). */
int agent__reply_profile(struct agent *a, struct http_reply *rep);
/* Samples NVML once at start (where present). */
void agent__gpus_init(struct agent *a);
/*
 * Per process of snap, its GPU (NVML index and UUID) when certain, else index -1;
 * malloc'd, freed by the caller. NULL without NVML (or on ENOMEM).
 */
struct metrics_gpu *agent__gpus(struct agent *a, const struct snapshot *snap);

#endif /* GL_SERVE_INT_H */
