/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session.h - one tracing session: attach to targets (or start one), collect
 * until they exit, the duration ends or a signal comes, then report. The
 * agent (serve.c) drives the same session step by step.
 */
#ifndef GL_SESSION_H
#define GL_SESSION_H

#include <stdbool.h>
#include "cli.h"

struct session;
struct snapshot;
struct tracer;
struct books;
struct nvml_sample;

/* Runs the session described by o; returns the process exit status. */
int session__run(const struct gl_opts *o);

/* Loads the BPF side. NULL with *status set (EXIT_PRIV, EXIT_RUNTIME) on failure. */
struct session *session__new(const struct gl_opts *o, int *status);
void session__free(struct session *s);
/* Attaches to what o names. Returns an exit status (EXIT_OK to go on). */
int session__start(struct session *s);
/*
 * Waits up to timeout_ms for records, applies them, does the periodic work.
 * Sets *done when the session should end (targets gone, duration, signal);
 * returns an exit status.
 */
int session__step(struct session *s, int timeout_ms, bool *done);
/* A snapshot of the books (drained, compared with BPF's counters); NULL on ENOMEM. */
struct snapshot *session__snapshot(struct session *s, uint32_t max_stacks);
/*
 * run, and record -- CMD: waits for CMD to end and returns its exit status as a
 * shell gives it (128 + N for signal N; 127 when it could not be started).
 * Returns status unchanged when gpuleak itself failed (status != EXIT_OK) or
 * there is no CMD.
 */
int session__exit_status(struct session *s, int status);
struct tracer *session__tracer(struct session *s);
/*
 * Writes the report files o names (--json, --folded, --svg, --pprof) from
 * snap. Returns 0, or the last -errno (each failure said on stderr).
 */
int session__write_files(const struct snapshot *snap, const struct gl_opts *o);
/* Whether one of those files is stdout (the text report is then left out). */
bool session__report_on_stdout(const struct gl_opts *o);
struct books *session__books(struct session *s);
/* NVML's figures of the latest snapshot (devices' total and free), or NULL without NVML. */
const struct nvml_sample *session__nvml(const struct session *s);

#endif /* GL_SESSION_H */
