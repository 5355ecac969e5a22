/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * procs.h - the process table: one entry per traced process, keyed by
 * (pid, start time) so that a reused PID starts with empty books.
 *
 * Each process owns its allocation table (what is outstanding, under which
 * stack), its per-stack aggregates and its address map. struct proc is
 * opaque outside books/: its figures are read through proc__totals().
 */
#ifndef GL_PROCS_H
#define GL_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "figures.h"
#include "gpuleak_abi.h"
#include "stacks/modules.h"
#include "util/htab.h"

/* A process of the table: opaque outside books/ (books/proc_int.h). */
struct proc;
struct series;

/* The process's figures. Valid while the process is in the table. */
const struct proc_totals *proc__totals(const struct proc *proc);
/*
 * Iteration over the process's per-(stack, class) aggregates, in no order: it
 * from 0, *key set; NULL at the end.
 */
const struct agg *proc__next_agg(const struct proc *proc, size_t *it, const struct agg_key **key);
/*
 * Iteration over the allocations outstanding, in no order: it from 0, *key
 * set; NULL at the end, and at once for a retired process.
 */
const struct alloc_val *proc__next_alloc(const struct proc *proc, size_t *it,
					 const struct alloc_key **key);
/* As proc__next_alloc, and for a process that ended, what it held then where the books
 * keep it (books_opts.keep_at_exit). */
const struct alloc_val *proc__next_held(const struct proc *proc, size_t *it,
					const struct alloc_key **key);
/* The process ends: its allocations are kept as they are (proc__next_held), not freed. */
void proc__keep_at_exit(struct proc *proc);
/* Whether the process still has its running tables (proc__retire() not called). */
bool proc__live(const struct proc *proc);
/* How many aggregates the process has. */
size_t proc__nr_aggs(const struct proc *proc);
/* How many of the most recent failures are kept (at most PROC_MAX_FAILURES). */
uint32_t proc__nr_failures(const struct proc *proc);
/* The i-th of those, oldest first. */
const struct failure *proc__failure(const struct proc *proc, uint32_t i);
/* The process's device bytes over time (analysis.h). */
const struct series *proc__device_series(const struct proc *proc);

struct procs;

/* NULL with errno on failure. */
struct procs *procs__new(void);
/* Caps the table at max processes (0: no cap); procs__get then fails with ENOSPC, counted. */
void procs__set_max(struct procs *p, uint32_t max);
/* Processes refused because the table was full. */
uint64_t procs__refused(const struct procs *p);
/*
 * Removes every process that exited at or before exited_before (books__now()
 * clock), calling cb (may be NULL) on each just before it is freed. Returns
 * the number removed.
 */
uint32_t procs__forget_exited(struct procs *p, uint64_t exited_before,
			      void (*cb)(void *ctx, struct proc *proc), void *ctx);
void procs__free(struct procs *p);

/*
 * The process (pid, start_time), created (empty books, comm read) if new;
 * NULL with errno ENOMEM, or ENOSPC when the table is at its cap.
 */
struct proc *procs__get(struct procs *p, int pid, uint64_t start_time, bool *created);
/* The most recent process with this pid, or NULL. */
struct proc *procs__find_pid(struct procs *p, int pid);
/* Removes and frees a process. */
void procs__remove(struct procs *p, struct proc *proc);
/* Iteration in creation order: i from 0 while it returns non-NULL. */
struct proc *procs__at(struct procs *p, uint32_t i);
uint32_t procs__count(const struct procs *p);

/* Drops all books of a process (exec, or exit when asked to forget). */
void proc__clear_books(struct proc *proc);
/* Frees what only a running process needs (alloc table, pending stacks, address map). */
void proc__retire(struct proc *proc);
/* Context index (1-based) of ctx, added if new; 0 if ctx is 0 or on ENOMEM. */
uint16_t proc__ctx_index(struct proc *proc, uint64_t ctx);
/* Bytes the process's tables hold. */
size_t proc__mem(const struct proc *proc);
/*
 * A device allocation (address kind) whose device is not known: remembered as
 * a candidate for proc__learn_device(). Nothing is reported on failure (the
 * allocation then keeps device -1).
 */
void proc__note_unknown_dev(struct proc *proc, uint64_t addr, uint64_t size);
/*
 * A PyTorch block of device dev at address block: the candidate allocation
 * holding it, and every allocation of that allocation's context, are on dev;
 * the context's device is kept for later allocations.
 */
void proc__learn_device(struct proc *proc, uint64_t block, int dev);
/*
 * The job's ranks (rank, local rank, world size of proc__totals()) from the
 * launcher's variables in the process's environment, read once: at its first
 * mapping of a library gpuleak attaches to (proc__set_ranks()), else at its
 * first call; after any exec either way. An environment that cannot be read
 * leaves them as they were.
 */
void proc__read_ranks(struct proc *proc);
/* The ranks as read (v: RANK, LOCAL_RANK, WORLD_SIZE, -1 where absent): not read again. */
void proc__set_ranks(struct proc *proc, const int v[3]);
/*
 * RANK, LOCAL_RANK and WORLD_SIZE of process pid started at start_ns (boot
 * time) into v while it lives: 0, -ESRCH when it is gone, or -errno (logged at
 * debug level).
 */
int proc__env_ranks(int pid, uint64_t start_ns, int v[3]);

#endif /* GL_PROCS_H */
