/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * books.h - user space's books: every record from BPF applied to the process
 * table, the allocation tables and the per-stack aggregates.
 */
#ifndef GL_BOOKS_H
#define GL_BOOKS_H

#include <stdint.h>
#include "explain.h"
#include "procs.h"
#include "stacks/modules.h"
#include "stacks/stacks.h"

struct event; /* trace/event.h */

struct books;
struct unwinder;
struct python;

struct books_opts {
	uint64_t series_width_ns; /* initial resolution of per-stack history */
	bool no_proc_files;	  /* do not read /proc (offline report) */
	uint64_t sample_bytes;	  /* tensor-block stacks sampled (tiers.bpf.h); 0: all */
	bool rank_env;		  /* read RANK, LOCAL_RANK and WORLD_SIZE (no other variable) from a
			  process's /proc/PID/environ at its first call: --ranks-from-env */
	bool keep_at_exit;	  /* keep what a process held when it ended, by when it was made
			    * (the HTML report's temporal view): memory per allocation */
	bool attach_python;	  /* attach each process's interpreter as it comes (python.h), after
			     * the hooks hear of it; detach it as it goes or execs */
};

struct books_counters {
	uint64_t records[GL_NR_REC_TYPES];
	uint64_t malformed;	 /* records that failed validation */
	uint64_t stack_missing;	 /* allocations whose stack record never came */
	uint64_t user_unmatched; /* frees BPF matched but user space had no record of */
};

struct books_hooks {
	/* a process appeared in the books (its first record) */
	void (*proc_new)(void *ctx, struct proc *proc);
	/* a process exited or exec'd (final books in proc) */
	void (*proc_end)(void *ctx, struct proc *proc, uint32_t event);
	/* a traced process mapped a CUDA, PyTorch or Python library (GL_PROC_LIBLOAD:
	 * at start-up or dlopen); the process is not added to the books for that */
	void (*libs_changed)(void *ctx, int pid);
	/*
	 * a device allocation of pid on dev (-1: not known) ran out of memory: fills
	 * the NVML part of facts (nvml, proc_listed, dev_total, dev_free, proc_used,
	 * others_used) if it can; called before failure. NULL: no NVML.
	 */
	void (*oom_nvml)(void *ctx, int pid, int dev, struct oom_facts *facts);
	/* an allocation failed */
	void (*failure)(void *ctx, struct proc *proc, const struct failure *f);
	/*
	 * a record was applied (after the hooks above): for a call, stack is the
	 * stack parked by its entry that it took (0: it took none); for a stack
	 * record, the id it was interned as; 0 for others
	 */
	void (*applied)(void *ctx, const void *data, size_t size, uint32_t stack);
	void *ctx;
};

/* NULL with errno on failure. The books own none of m, s, u, py (py may be NULL). */
struct books *books__new(struct modules *m, struct stacks *s, struct unwinder *u, struct python *py,
			 const struct books_opts *o);
void books__free(struct books *b);
void books__set_hooks(struct books *b, const struct books_hooks *h);
/* The hooks in force (to chain new ones in front of them). */
const struct books_hooks *books__hooks(const struct books *b);

/* A record applied: as books_hooks.applied, for an observer beside the hooks. */
typedef void (*books_applied_fn)(void *ctx, const void *data, size_t size, uint32_t stack);
struct books_observer {
	books_applied_fn fn;
	void *ctx;
};
#define BOOKS_MAX_OBSERVERS 4
/* fn is called after each record the books apply (after the hooks). 0, or -ENOSPC. */
int books__observe(struct books *b, books_applied_fn fn, void *ctx);
void books__unobserve(struct books *b, books_applied_fn fn, void *ctx);

/*
 * Applies one record, decoded by event__decode() (trace/event.h), as the tracer hands
 * it up; an event whose type is negative failed validation and is only counted.
 * Returns 0, or -EINVAL for a malformed record.
 */
int books__apply(struct books *b, const struct event *ev);
/* Decodes data[0..size) and applies it (recordings, tests): as books__apply(). */
int books__apply_bytes(struct books *b, const void *data, size_t size);
/*
 * Applies a recorded call record as if the stack its entry parked were stack
 * (an id of the books' stack table; 0: none was parked), without stack
 * records or /proc. Returns 0, or -EINVAL for a malformed record (counted).
 */
int books__replay_call(struct books *b, const struct gl_call *c, uint32_t stack);

/*
 * The process exited with these final kernel-side books (from its exit record,
 * or read from BPF's table when that record was lost). Idempotent.
 */
void books__exited(struct books *b, struct proc *proc, const struct gl_proc_stats *final,
		   uint64_t ts);

/*
 * The process is gone from /proc (seen so at now_ns, CLOCK_MONOTONIC) while
 * neither an exit record nor BPF's books said so. Records it committed before
 * then may still wait in the ring, and would make it again if it were forgotten
 * first: it is marked exited (at books__now(), without final books, what only
 * a running process needs freed) once the reader is past the time it was
 * first seen gone (read_ns: every record committed before it has been read).
 * Returns true once it is marked. Idempotent; no hook is called.
 */
bool books__gone(struct books *b, struct proc *proc, uint64_t now_ns, uint64_t read_ns);
/* A recording says who the process was: comm (up to 15 characters, need not end in NUL),
 * PID in its namespace, first record. */
void books__set_identity(struct proc *proc, const char *comm, int ns_pid, uint64_t first_ns);

/*
 * Reads pid's address map now, while it lives: a short-lived process's records
 * may be read after it exited, when /proc no longer has its maps.
 */
void books__prefetch_maps(struct books *b, int pid);

/*
 * The process of r (a GL_PROC_LIBLOAD record) mapped a library that could not
 * be held until its probes were in: its first calls may be missing, and its
 * figures say so (proc_totals.unheld).
 */
void books__note_unheld(struct books *b, const struct gl_proc *r);

struct procs *books__procs(struct books *b);
struct stacks *books__stacks(struct books *b);
struct modules *books__modules(struct books *b);
struct python *books__python(struct books *b);
const struct books_opts *books__opts(const struct books *b);
const struct books_counters *books__counters(const struct books *b);
/*
 * Drops the interned stacks no process refers to any more (their processes
 * were forgotten) and renumbers the rest in every process's books. Returns
 * the number of stacks dropped, or -ENOMEM (nothing changed).
 */
int books__compact_stacks(struct books *b);
/*
 * Forgets every allocation of this kind (GL_KIND_TORCH: the tensor blocks, at
 * a window's start) in every live process, as of ts, with the history of their
 * stacks' outstanding bytes. *forgotten (may be NULL): how many. Returns 0 or
 * -ENOMEM.
 */
int books__forget_kind(struct books *b, uint8_t kind, uint64_t ts, uint64_t *forgotten);
/* As books__forget_kind, for the running process pid alone (0: every process). */
int books__forget_kind_pid(struct books *b, uint8_t kind, int pid, uint64_t ts,
			   uint64_t *forgotten);
/*
 * PyTorch's blocks stop being traced (a tensor window closes): from now on the
 * books' blocks are not the allocator's whole map, and the reserve's free extents
 * cannot be told from them. books__torch_map_complete() says whether that happened.
 */
void books__torch_map_partial(struct books *b);
bool books__torch_map_complete(const struct books *b);

/* What explain__proc() and explain__library() read of the books. */
struct explain_src books__explain_src(struct books *b);
/* Timestamp (bpf_ktime_get_ns clock) of the newest record applied. */
uint64_t books__now(const struct books *b);

#endif /* GL_BOOKS_H */
