/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * targets.h - what is traced and attaching to it: the processes named on the
 * command line (waiting for them to load libcuda), the child of `run`, or
 * every process with -a; their libcuda, PyTorch's allocator probes and their
 * Python, including libraries they map later; the targets' liveness.
 *
 * Functions returning int return 0, -EPERM when privileges are missing
 * (explained), or -EIO for another failure (said on stderr).
 */
#ifndef GL_TARGETS_H
#define GL_TARGETS_H

#include <stdbool.h>
#include <stdint.h>

#define TARGETS_MAX 256

struct targets;
struct tracer;
struct python;
struct gl_proc;

struct targets_opts {
	const int *pids; /* attach: these processes */
	int nr_pids;
	bool all;	     /* every process that maps a libcuda, now and later */
	char **argv;	     /* run: start this command (NULL otherwise) */
	const char *libcuda; /* the library to attach instead of the one found */
	uint64_t wait_ms;    /* for a named process to load libcuda */
	bool no_python;	     /* do not walk CPython frames */
	bool no_torch;	     /* do not attach to PyTorch's allocator probes */
	bool torch;	     /* say so loudly when the probes are missing */
	bool keep_going;     /* the agent: go on without PyTorch's probes where privileges lack */
	uint64_t rescan_ms;  /* all: every process's maps read this often (0: a minute) */
};

/*
 * NULL with errno on failure. o is copied; t and py (not owned) attach and
 * tell BPF about Python. seen (may be NULL) is called with ctx for each
 * process found to map a libcuda, while it lives (the books read its maps).
 */
struct targets *targets__new(const struct targets_opts *o, struct tracer *t, struct python *py,
			     void (*seen)(void *ctx, int pid), void *ctx);
/* Waits for the run-mode child if it is still running. NULL is a no-op. */
void targets__free(struct targets *tg);
/*
 * Attaches to what the options name (PIDs, -a, or a new child). For run, also
 * -ENOENT when the command is not found, -ENOEXEC when it cannot be run (said).
 */
int targets__start(struct targets *tg);
/*
 * Periodic work: pending scans, -a rescans, liveness. Returns true when every
 * target is done, or on a failure (then *err is set).
 */
bool targets__step(struct targets *tg, uint64_t now, int *err);
/* A traced process mapped a library: scan it at the next step. */
void targets__libs_changed(struct targets *tg, int pid);
/*
 * A GL_PROC_LIBLOAD record, before the books see it: a process BPF holds at
 * that mapping is attached and released. Returns true when BPF could not hold
 * the process at a library not attached yet (its first calls may be missed).
 */
bool targets__lib_mapped(struct targets *tg, const struct gl_proc *r);
/* pid exited: a named target is done. */
void targets__exited(struct targets *tg, int pid, const char *comm);
/* Whether scans are pending (the caller then polls more often). */
bool targets__scanning(const struct targets *tg);
/*
 * What the tracer's own limits cost so far: mappings of a libcuda file past the
 * attached files' cap (those processes are not traced), and holds the guard ended
 * at --hold-timeout before the probes were in.
 */
void targets__limits(const struct targets *tg, uint64_t *libs_refused, uint64_t *holds_expired);
/* The run-mode child: forward a signal; collect its status if it exited. */
void targets__signal_child(struct targets *tg, int sig);
void targets__reap_child(struct targets *tg);
/*
 * Waits for the run-mode child to end and sets *wstatus to its wait status.
 * -ENOENT when there is no child, -errno when it cannot be waited for.
 */
int targets__wait_child(struct targets *tg, int *wstatus);

#endif /* GL_TARGETS_H */
