/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * figures.h - what the books show of a process: its totals, its per-(stack,
 * class) aggregates and its recent failures, as plain values. The process
 * itself (procs.h) is opaque outside books/.
 */
#ifndef GL_FIGURES_H
#define GL_FIGURES_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "oom.h"

struct series;

/* An allocation of the process: its key, and what it is. */
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
	uint32_t t_ms; /* when it was made, ms after the process's first record; 0: before */
};

#define PROC_MAX_FAILURES 16

struct agg_key {
	uint32_t stack;
	uint32_t cls;
};

#define PROC_MAX_DEVICES 16

/* What one (stack, class) holds and has done. */
struct agg {
	uint64_t bytes, allocs;		    /* outstanding */
	uint64_t total_allocs, total_frees; /* calls */
	uint64_t alloc_bytes, free_bytes;   /* cumulative */
	uint64_t peak_bytes;
	uint64_t first_ns, last_ns;	      /* first and last allocation */
	struct series *series;		      /* outstanding bytes over time (analysis.h) */
	uint64_t dev_bytes[PROC_MAX_DEVICES]; /* outstanding per CUDA ordinal (device memory
						 and tensor blocks whose device is known) */
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
	/* out of memory on a device: what the books (and NVML, through the books' hook) knew */
	bool has_facts;
	struct oom_facts facts;
	/* PyTorch's allocator frees its cache and asks again after a failure: */
	uint8_t retry;	      /* enum failure_retry */
	bool is_retry;	      /* this failure is that second request */
	uint64_t retry_freed; /* cached segments freed between the two requests */
	bool stopped;	      /* BPF holds the process at it (--census-on-oom) */
};

enum failure_retry {
	RETRY_NONE = 0,	 /* not PyTorch's request */
	RETRY_PENDING,	 /* PyTorch's request; its retry not seen yet */
	RETRY_SUCCEEDED, /* the next request of PyTorch's allocator succeeded */
	RETRY_FAILED,	 /* it failed too: PyTorch raised its out-of-memory error */
};

/* What a process is, holds and did: read-only outside books/ (proc__totals()). */
struct proc_totals {
	int pid;
	int ns_pid;
	int ppid;			  /* parent at the first record; 0: not known */
	int rank, local_rank, world_size; /* RANK, LOCAL_RANK, WORLD_SIZE (books_opts.rank_env),
					     -1: not known */
	uint64_t start_time;		  /* boot-time ns */
	char comm[16];
	bool exited;
	uint32_t exit_code; /* exited: its wait status (WIFSIGNALED...); 0 also when not known */
	uint64_t first_ns, last_ns, exit_ns;
	uint64_t bytes[GL_CLASS_SLOTS];	      /* outstanding, per class */
	uint64_t nallocs[GL_CLASS_SLOTS];     /* outstanding allocations, per class */
	uint64_t alloc_bytes[GL_CLASS_SLOTS]; /* cumulative, per class */
	uint64_t free_bytes[GL_CLASS_SLOTS];  /* cumulative (frees and teardown), per class */
	uint64_t peak_device;
	uint64_t dev_bytes[PROC_MAX_DEVICES]; /* device class, per device ordinal */
	uint64_t unknown_dev_bytes;	      /* device class, device not known */
	uint64_t alloc_calls, free_calls, failures, oom_failures, unmatched_frees;
	uint64_t failed_frees, dropped_bytes, no_stack;
	uint64_t ctx_drops; /* teardowns as the kernel counts them (gl_proc_stats.ctx_drops) */
	uint32_t unheld;    /* libraries mapped that could not be held until attached */
	char unheld_lib[sizeof(((struct gl_libmap *)0)->name) + 1]; /* the last of them */
	struct gl_proc_stats final;				    /* BPF's books at exit */
	bool has_final;
};

#endif /* GL_FIGURES_H */
