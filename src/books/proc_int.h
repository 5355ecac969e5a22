/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * proc_int.h - struct proc as the books keep it. For books/ (and its white-box
 * tests) only: everyone else reads a process through procs.h.
 */
#ifndef GL_PROC_INT_H
#define GL_PROC_INT_H

#include "figures.h"

struct htab;
struct addr_map;

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

struct proc_ctx {
	uint64_t ctx;
	uint64_t dead_ctx; /* torn down: the value it had (a destroyed one's ctx is then 0) */
	uint64_t dead_nr;  /* and by which teardown (gl_call.teardowns of its record) */
	int16_t dev;	   /* -1: not known (created before attach, and nothing told it since) */
	bool primary;
};

/* A device allocation whose device is not known (see proc__learn_device()). */
struct unknown_dev {
	uint64_t addr, size;
};

struct proc {
	struct proc_totals t; /* what proc__totals() shows */

	struct htab *allocs;  /* alloc_key -> alloc_val */
	struct htab *at_exit; /* its allocations when it ended (books_opts.keep_at_exit) */
	struct htab *aggs;    /* agg_key -> agg */
	struct htab *pending; /* pending_key -> pending */
	struct addr_map *am;  /* re-read after misses, with a backoff (modules.h) */

	struct proc_ctx *ctxs;
	uint16_t nr_ctxs, cap_ctxs;

	struct unknown_dev *unknown; /* allocations of t.unknown_dev_bytes (some may be gone since) */
	uint32_t nr_unknown, cap_unknown;
	uint32_t unknown_skipped;     /* candidates not kept since the list was full */
	struct series *device_series; /* device bytes over time (analysis.h) */

	struct failure fails[PROC_MAX_FAILURES]; /* the most recent failures, a ring */
	uint32_t nr_fails;
	bool ranks_read;     /* books_opts.rank_env: the environment was read (first call) */
	uint32_t retry_open; /* nr_fails when a failure awaiting PyTorch's retry was booked, or 0 */
	uint64_t gone_seen_ns; /* books__gone(): first seen gone from /proc then; 0: not */
};

#endif /* GL_PROC_INT_H */
