/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session.h - one tracing session: attach to targets (or start one), collect
 * until they exit, the duration ends or a signal comes, then report. The
 * agent (serve.c) drives the same session step by step.
 */
#ifndef GL_SESSION_H
#define GL_SESSION_H

#include <stdbool.h>
#include <stdio.h>
#include "cli.h"

struct session;
struct snapshot;
struct tracer;
struct books;

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
struct tracer *session__tracer(struct session *s);
#define SESSION_NR_FILES 4
/*
 * Opens and checks the report files o names (--json, --folded, --svg,
 * --pprof) without emptying them; the same file named twice is refused.
 * Returns 0 with files[] set (NULL where o names none), or -errno with
 * every failure said on stderr and nothing left open.
 */
int session__open_files(const struct gl_opts *o, FILE *files[SESSION_NR_FILES]);
void session__close_files(FILE *files[SESSION_NR_FILES]);
/*
 * Writes snap into the files from session__open_files() and closes them.
 * Returns 0, or the last -errno (each failure said on stderr).
 */
int session__write_files(const struct snapshot *snap, const struct gl_opts *o,
			 FILE *files[SESSION_NR_FILES]);
/* Whether one of those files is stdout (the text report is then left out). */
bool session__report_on_stdout(const struct gl_opts *o);
struct books *session__books(struct session *s);

#endif /* GL_SESSION_H */
