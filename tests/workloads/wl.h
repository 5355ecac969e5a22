/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * wl.h - the protocol shared by gpuleak's test workloads.
 *
 * A workload: sets up CUDA (cuInit, a current context), optionally allocates
 * before the tracer attaches, prints "ready <pid>" and waits for one line on
 * stdin (unless --no-wait), calls fakecuda_mark(), runs its main phase, writes
 * the ground truth (--truth FILE) and exits, or first waits for one more line
 * (--hold) so that the tracer can report on a live process.
 *
 * The truth is the stand-in's JSON object (see fakecuda.h) with two more keys:
 *   "sites":  {"<site function>": outstanding bytes, ...} for allocations made
 *             after the mark, by the function that called the driver;
 *   "expect": what the workload itself meant to leave: the truth's keys
 *             device_bytes, managed_bytes, host_pinned_bytes, outstanding_allocs,
 *             alloc_calls, free_calls, unmatched_frees, oom_failures,
 *             other_failures, free_failures, ctx_dropped_bytes,
 *             ctx_dropped_allocs, pre_attach_device_bytes, reserved_bytes,
 *             imported_bytes; each must equal the truth's value.
 * stdout carries only "ready <pid>"; errors go to stderr and exit with 1
 * (2 for a bad command line).
 *
 * wl.c calls no driver function, so a workload may load the stand-in with dlopen.
 */
#ifndef WL_H
#define WL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fakecuda.h"

/* An allocation site or a frame on the way to one: always a real, named frame. */
#ifdef __clang__
#define WL_SITE __attribute__((noinline, used))
#else
#define WL_SITE __attribute__((noipa, used))
#endif
#define WL_FRAME WL_SITE

#define WL_MIB (1ULL << 20)

/* Options a workload accepts besides --truth, --no-wait, --hold and --help. */
enum wl_opt {
	WL_OPT_THREADS = 0x1,	/* --threads N */
	WL_OPT_ITERS = 0x2,	/* --iters N */
	WL_OPT_SIZE = 0x4,	/* --size N (bytes) */
	WL_OPT_INTERVAL = 0x8,	/* --interval-ms N */
	WL_OPT_LIB = 0x10,	/* --lib PATH */
	WL_OPT_EXEC = 0x20,	/* --exec, and the internal --child */
	WL_OPT_VERBOSE = 0x40,	/* -v, --verbose: progress on stderr */
};

struct wl_opts {
	const char *truth; /* NULL: write no truth */
	const char *lib;
	int no_wait;
	int hold;
	int exec;
	int child;
	int verbose;
	unsigned long long threads;
	unsigned long long iters;
	unsigned long long size;
	unsigned long long interval_ms;
};

/* An allocation site: the name of the function that calls the driver, its class. */
struct wl_site {
	const char *name;
	int cls; /* enum fakecuda_class */
	long long bytes;
	long long allocs;
};

/* What the workload states about the counters it does not derive from its sites. */
struct wl_expect {
	long long unmatched_frees;
	long long oom_failures;
	long long other_failures;
	long long free_failures;
	long long pre_attach_device_bytes;
	long long reserved_bytes;
	long long imported_bytes;
};

/* All zero at start; a workload raises what it means to cause. */
extern struct wl_expect wl_expect;

/* The program name used in messages (set by wl_parse). */
extern const char *wl_prog;

/* Writes the truth JSON with extra fields to f: 0, or -1 with errno set. */
typedef int (*wl_truth_fn)(FILE *f, const char *extra_json_fields);

/*
 * Parses argv into *o, whose fields hold the defaults. allowed is a mask of
 * enum wl_opt. Exits with 2 and a usage message on a bad command line.
 */
void wl_parse(struct wl_opts *o, int argc, char **argv, unsigned int allowed);

/*
 * Takes "NAME N" out of argv (an option wl_parse does not know): N, or dflt when
 * NAME is absent. Exits with 2 when N is missing, not a number or above max.
 */
unsigned long wl_take_num(int *argc, char **argv, const char *name, unsigned long max,
			  unsigned long dflt);

/*
 * Takes "NAME VALUE" out of argv (an option wl_parse does not know): VALUE, or NULL when
 * NAME is absent. Exits with 2 when VALUE is missing.
 */
const char *wl_take_str(int *argc, char **argv, const char *name);

/* The stand-in's device capacity (FAKECUDA_CAPACITY), before cuInit; exits with 1 on failure. */
void wl_set_capacity(unsigned long long bytes);

/* Set once SIGINT or SIGTERM came, after wl_stop_on_signals(): the main loop then ends. */
extern volatile sig_atomic_t wl_stop;

/* Makes SIGINT and SIGTERM set wl_stop instead of ending the workload; exits with 1 on failure. */
void wl_stop_on_signals(void);

/* Sleeps ms milliseconds, less when wl_stop is set meanwhile. */
void wl_sleep_ms(unsigned long long ms);

/* Exits with 1 after printing "<prog>: <call> failed: <name> (<rc>)" unless rc is 0. */
void wl_check(int rc, const char *call);

/* The same, unless rc is want. */
void wl_check_rc(int rc, int want, const char *call);

/* Prints "<prog>: <message>" to stderr and exits with 1. */
void wl_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Prints "ready <pid>" and, unless --no-wait, blocks until a line (or EOF) on stdin. */
void wl_ready(const struct wl_opts *o);

/* Books an allocation call at s (thread-safe). */
void wl_site_alloc(struct wl_site *s, uint64_t bytes);

/* Books a free call of an allocation made at s (thread-safe). */
void wl_site_free(struct wl_site *s, uint64_t bytes);

/* Books an allocation of s dropped by context teardown (thread-safe). */
void wl_site_drop(struct wl_site *s, uint64_t bytes);

/* Forgets all bookings and expectations (a forked child starts afresh). */
void wl_reset(struct wl_site *sites, size_t nsites);

/*
 * Writes the truth to path (through path.tmp and a rename) with the "sites" and
 * "expect" keys of sites[0..nsites) and extra (more fields, or NULL). Exits with 1
 * on failure.
 */
void wl_write_truth(const char *path, wl_truth_fn fn, const struct wl_site *sites, size_t nsites,
		    const char *extra);

/* The end of the main phase: writes the truth to o->truth if set, then honours --hold. */
void wl_finish(const struct wl_opts *o, wl_truth_fn fn, const struct wl_site *sites,
	       size_t nsites, const char *extra);

#define WL_NSITES(a) (sizeof(a) / sizeof((a)[0]))

/* The next number of the xorshift sequence in *s (never 0): repeatable sizes and choices. */
uint64_t wl_rand(uint64_t *s);

/* The time seconds from now (CLOCK_MONOTONIC), for wl_past. */
struct timespec wl_deadline(unsigned long long seconds);

/* Whether deadline has come. */
bool wl_past(const struct timespec *deadline);

/*
 * Threaded workloads: each worker's struct begins with a struct wl_worker. wl_workers_new()
 * makes n workers of size bytes, zeroed but for their heads (index, seed, ctx), and exits
 * with 1 when out of memory; wl_workers_start() runs fn on a thread per worker, given the
 * worker, and exits with 1 when a thread cannot be started; wl_workers_join() waits for
 * them all and returns the driver calls they counted.
 */
struct wl_worker {
	pthread_t tid;
	unsigned int index;
	uint64_t seed;		  /* wl_rand's state: a sequence of the worker's own */
	CUcontext ctx;		  /* the context the thread makes current */
	unsigned long long calls; /* driver calls made */
};

void *wl_workers_new(unsigned int n, size_t size, CUcontext ctx);
void wl_workers_start(void *workers, unsigned int n, size_t size, void *(*fn)(void *));
unsigned long long wl_workers_join(void *workers, unsigned int n, size_t size);

/* wl_finish without sites, the truth's "load_calls" field saying calls. */
void wl_finish_load(const struct wl_opts *o, wl_truth_fn fn, unsigned long long calls);

/*
 * For workloads linked to the stand-in: cuInit and device dev's primary context
 * made current. Returns the context.
 */
static inline CUcontext wl_cuda_start(int dev)
{
	CUcontext ctx = NULL;

	wl_check(cuInit(0), "cuInit");
	wl_check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	wl_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	return ctx;
}

/*
 * For workloads linked to the stand-in, the main phase of a timed load: o->threads workers of
 * size bytes (wl_workers_new, device 0's primary context) run fn from the mark until
 * *deadline, o->iters seconds later; then the truth with the calls they made
 * (wl_finish_load).
 */
static inline void wl_timed_load(const struct wl_opts *o, size_t size, void *(*fn)(void *),
				 struct timespec *deadline)
{
	void *workers = wl_workers_new(o->threads, size, wl_cuda_start(0));

	wl_ready(o);
	fakecuda_mark();
	*deadline = wl_deadline(o->iters);
	wl_workers_start(workers, o->threads, size, fn);
	wl_finish_load(o, fakecuda_truth_json, wl_workers_join(workers, o->threads, size));
	free(workers);
}

#endif /* WL_H */
