/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session.h - one live tracing session: attach to targets (or start one),
 * collect until they exit, the duration ends or a signal comes, and take
 * snapshots to report from. attach/run (cmd/attach.c), top, record and the
 * agent (agent/serve.c) drive the same session step by step.
 */
#ifndef GL_SESSION_H
#define GL_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "model/opts.h"

struct session;
struct snapshot;
struct tracer;
struct books;
struct gpu_sampler;
struct python;
struct census_caps;
struct census_books;

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
/*
 * A snapshot of the books: the ring buffer drained, lost exit records taken
 * from BPF's books, compared with BPF's exact counters and built again (a few
 * times, a moment apart) while they disagree for calls in flight. max_stacks
 * as snapshot_opts; symbols false leaves frames unsymbolized (cheaper). NULL
 * on ENOMEM.
 */
struct snapshot *session__snapshot(struct session *s, uint32_t max_stacks, bool symbols);
/*
 * The books as they are, without reading the ring first: for a hook of the books (an
 * incident), which a drain would enter again. Every stack, with its history.
 */
struct snapshot *session__snapshot_now(struct session *s);
/* As session__snapshot_now, for process pid alone (serve's /report). */
struct snapshot *session__snapshot_pid(struct session *s, int pid);

/* Why the flight recorder is told of a process (agent/incidents.h writes the bundle). */
enum incident_cause {
	INCIDENT_OOM = 0, /* out of memory, reaching the program (PyTorch's retry failed too) */
	INCIDENT_KILLED,  /* killed by a signal (the kernel's OOM killer's SIGKILL too) */
	INCIDENT_LEAK_AT_EXIT, /* exited holding memory at stacks judged to leak */
	INCIDENT_NR_CAUSES,
};

/* What the flight recorder has of a process's Python heap at its incident. */
struct incident_census {
	bool taken;	   /* json and text hold the census, joined with the books */
	char *json, *text; /* NULL when not taken */
	size_t json_len, text_len;
	bool held;	    /* the process was held at its failure */
	uint64_t held_ns;   /* how long, when gpuleak let it go (0: not held, or past_deadline) */
	bool past_deadline; /* the hold's deadline let it go before the census was done */
	char note[384];	    /* how it was taken, or why not and how to get one next time */
	struct snap_census *sum; /* taken: its summary for the reports (the snapshot's then) */
};

/*
 * Called at once, from inside the books (so snap is the books as they are, the ring not
 * read further), with the process's snapshot: out of memory (what says where and why),
 * killed by a signal, or exited holding memory at leaking stacks; census says what was
 * read of its heap at that moment.
 */
typedef void (*session_incident_fn)(void *ctx, enum incident_cause cause, int pid, const char *what,
				    const struct snapshot *snap,
				    const struct incident_census *census);
void session__set_incident_hook(struct session *s, session_incident_fn fn, void *ctx);

/*
 * The census of pid joined with books, text and JSON into the files given (NULL: not
 * written), its summary for the reports into sum: cmd/census_cmd.c's census_cmd__one,
 * handed down. Returns an exit status (opts.h).
 */
typedef int (*session_census_fn)(int pid, FILE *text, FILE *json, bool pause,
				 const struct census_caps *caps, const struct census_books *books,
				 struct snap_census *sum);
/* --census-on-oom: how a process held at its out-of-memory failure is read. */
void session__set_census_hook(struct session *s, session_census_fn fn);
/* NVML's view of the devices, cached for the session. */
struct gpu_sampler *session__gpus(struct session *s);
struct tracer *session__tracer(struct session *s);
struct python *session__python(struct session *s);
/* Asks for a tensor window now (tiers.h). Async-signal-safe. */
void session__request_tensors(struct session *s);
struct proc;
/*
 * Where a recording is written: told of each process as the books take it in and as
 * it exits, and of each record the books applied (books.h: books_hooks.applied), in
 * the books' order. Every function may be NULL.
 */
struct session_sink {
	void (*proc_new)(void *ctx, struct proc *proc);
	void (*proc_exit)(void *ctx, struct proc *proc);
	void (*applied)(void *ctx, const void *data, size_t size, uint32_t stack);
	void *ctx;
};
/* Before session__start: the sink the session tells (one; 0 or -ENOSPC). */
int session__set_sink(struct session *s, const struct session_sink *sink);
/* Forgets the sink (before it goes). */
void session__unset_sink(struct session *s);
struct tier_hook;
struct snap_tensors;
/*
 * After session__start: tells hook of the tensor windows (tiers__set_hook),
 * the one open now included. A no-op when the session has no tensor level.
 */
void session__set_tier_hook(struct session *s, const struct tier_hook *hook);
/* What the tensor level covers now (valid until the next step); NULL before session__start. */
const struct snap_tensors *session__tensors(struct session *s);
/* When tracing started (session__start; bpf_ktime_get_ns clock): times in reports count from it. */
uint64_t session__start_ns(const struct session *s);
/* Whether library scans are pending: the caller then polls more often (5 ms). */
bool session__scanning(const struct session *s);
struct books *session__books(struct session *s);
/*
 * Where a stack of the books allocated, in a few words into buf: its site (site.h) as
 * "function (file:line)" for a Python frame, else the native frame's function, else
 * "an unknown site". Never fails.
 */
void session__describe_site(struct session *s, uint32_t id, char *buf, size_t len);
struct census_books;
/*
 * The books of process pid as the census joins them (census/join.h): each
 * outstanding PyTorch block and driver allocation of device memory with the
 * line that allocated it and whether its stack is judged to leak, and whether
 * the tensor level is in windows. out->traced is false when the books do not
 * know pid. Returns 0 or -ENOMEM; session__census_books_free() frees it.
 */
int session__census_books(struct session *s, int pid, struct census_books *out);
void session__census_books_free(struct census_books *b);
/*
 * run, and record -- CMD: waits for CMD to end and returns its exit status as a
 * shell gives it (128 + N for signal N; 127 when it could not be started).
 * Returns status unchanged when gpuleak itself failed (status != EXIT_OK) or
 * there is no CMD.
 */
int session__exit_status(struct session *s, int status);

#endif /* GL_SESSION_H */
