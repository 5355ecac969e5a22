/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * procs.h - the process table: one entry per traced process, keyed by
 * (pid, start time) so that a reused PID starts with empty books.
 *
 * Each process owns its allocation table (what is outstanding, under which
 * stack), its per-stack aggregates and its address map.
 */
#ifndef GL_PROCS_H
#define GL_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "stacks/modules.h"
#include "util/htab.h"

#define PROC_MAX_FAILURES 16

struct alloc_key {
	uint64_t key;
	uint32_t kind; /* enum gl_kind, or ALLOC_KIND_FREEING */
	uint32_t pad;
};

/*
 * An allocation whose free is in flight while the driver already handed its
 * address to a new one (gl_call.id): kept under its number until that free's
 * record comes, still outstanding, as in the kernel's books.
 */
#define ALLOC_KIND_FREEING 0x100

struct alloc_val {
	uint64_t size;
	uint64_t id; /* gl_call.id, 0 = not known */
	uint32_t stack;
	uint16_t ctx; /* index + 1 into proc.ctxs, 0 = unknown */
	uint8_t cls;
	int8_t dev;
};

/*
 * A stack captured at a call's entry, waiting for the call's return. Keyed by
 * thread and seq modulo GL_MAX_NEST: calls nest at most that deep, so a slot
 * is only reused once its call can no longer return.
 */
struct pending_key {
	uint32_t tid;
	uint32_t slot;
};

struct pending {
	uint64_t seq;
	uint32_t stack;
	uint32_t pad;
};

struct agg_key {
	uint32_t stack;
	uint32_t cls;
};

/* What one (stack, class) holds and has done. */
struct agg {
	uint64_t bytes, allocs;		    /* outstanding */
	uint64_t total_allocs, total_frees; /* calls */
	uint64_t alloc_bytes, free_bytes;   /* cumulative */
	uint64_t peak_bytes;
	uint64_t first_ns, last_ns; /* first and last allocation */
	struct series *series;	    /* outstanding bytes over time (analysis.h) */
};

struct proc_ctx {
	uint64_t ctx;
	uint64_t dead_ctx; /* torn down: the value it had (a destroyed one's ctx is then 0) */
	uint64_t dead_ns;  /* and when (gl_call.bytes of the teardown's record) */
	int16_t dev; /* -1: not known (created before attach, and nothing told it since) */
	bool primary;
};

/* A device allocation whose device is not known (see proc__learn_device()). */
struct unknown_dev {
	uint64_t addr, size;
};

#define FAILURE_HOLDERS 5

/* A stack holding memory when an allocation failed. */
struct holder {
	uint32_t stack;
	uint8_t cls;
	uint64_t bytes, allocs;
};

struct failure {
	struct holder holders[FAILURE_HOLDERS]; /* largest first; out-of-memory failures only */
	uint32_t nr_holders;
	uint64_t ts;
	uint64_t bytes;
	uint32_t stack;
	uint16_t api;
	uint8_t cls;
	int32_t rc;
	uint64_t held_device; /* device bytes outstanding at that moment */
};

#define PROC_MAX_DEVICES 16

struct proc {
	int pid;
	int ns_pid;
	uint64_t start_time; /* boot-time ns */
	char comm[16];
	bool exited;
	uint64_t first_ns, last_ns, exit_ns;

	struct htab *allocs;  /* alloc_key -> alloc_val */
	struct htab *aggs;    /* agg_key -> agg */
	struct htab *pending; /* pending_key -> pending */
	struct addr_map *am;
	uint64_t am_refreshed_ns;
	uint64_t am_backoff_ns; /* wait before re-reading the maps after a miss */

	struct proc_ctx *ctxs;
	uint16_t nr_ctxs, cap_ctxs;

	uint64_t bytes[GL_CLASS_SLOTS];	 /* outstanding, per class */
	uint64_t nallocs[GL_CLASS_SLOTS]; /* outstanding allocations, per class */
	uint64_t alloc_bytes[GL_CLASS_SLOTS]; /* cumulative, per class */
	uint64_t free_bytes[GL_CLASS_SLOTS];  /* cumulative (frees and teardown), per class */
	uint64_t peak_device;
	uint64_t dev_bytes[PROC_MAX_DEVICES]; /* device class, per device ordinal */
	uint64_t unknown_dev_bytes;	      /* device class, device not known */
	struct unknown_dev *unknown;	      /* those allocations (some may be gone since) */
	uint32_t nr_unknown, cap_unknown;
	uint32_t unknown_skipped;	      /* candidates not kept since the list was full */
	struct series *device_series; /* device bytes over time (analysis.h) */
	uint64_t alloc_calls, free_calls, failures, oom_failures, unmatched_frees;
	uint64_t failed_frees, dropped_bytes, no_stack;
	uint64_t ctx_drops; /* teardowns as the kernel counts them (gl_proc_stats.ctx_drops) */

	struct gl_proc_stats final; /* BPF's books at exit */
	bool has_final;

	struct failure fails[PROC_MAX_FAILURES]; /* the most recent failures, a ring */
	uint32_t nr_fails;
};

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

#endif /* GL_PROCS_H */
