// SPDX-License-Identifier: BSD-2-Clause
/*
 * alloc_loop.c - the load for gpuleak's benchmarks: a tight loop of
 * cuMemAlloc_v2 + cuMemFree_v2 pairs against whatever libcuda it is given
 * (the stand-in on CPU machines, the real driver on GPU machines).
 *
 *   alloc_loop [--lib PATH] [--pairs N] [--size BYTES] [--threads T] [--rate R]
 *              [--warmup N] [--keep N] [--sites K] [--wait] [--linger]
 *
 * Timing mode (default): T threads each time N pairs after a warm-up and the
 * program prints one line to stdout:
 *   pairs=N threads=T seconds=S ns_per_pair=X cpu_ns_per_pair=C pairs_per_s=Y
 * ns_per_pair is the mean wall time of one pair on one thread, cpu_ns_per_pair
 * the mean CPU time (user and kernel, the probes included) the thread spent on
 * it, which does not count time the thread waited for a CPU; pairs_per_s is
 * the rate of all threads together. --rate paces the threads to R pairs per
 * second in total (for throughput sweeps).
 *
 * Keep mode (--keep N): allocates N buffers and keeps them, spread round-robin
 * over K distinct call stacks (--sites, default 1; the stacks differ by a path
 * of log2(K) calls through two functions), prints "kept=N" and waits for a
 * line on stdin before exiting.
 *
 * --wait prints "ready PID" once the driver is set up and waits for a line on
 * stdin before the main phase; --linger waits for one after the timing line
 * (while the tracer's BPF programs, and their run-time statistics, are still
 * loaded). The library is loaded with dlopen and nothing
 * but the five driver functions below is used, so the program builds anywhere
 * without CUDA headers. Errors go to stderr with exit status 1 (2: usage).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __clang__
#define FRAME __attribute__((noinline))
#else
#define FRAME __attribute__((noipa))
#endif

typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_device_get_fn)(int *dev, int ordinal);
typedef int (*cu_ctx_retain_fn)(void **ctx, int dev);
typedef int (*cu_ctx_set_fn)(void *ctx);
typedef int (*cu_alloc_fn)(uint64_t *dptr, size_t size);
typedef int (*cu_free_fn)(uint64_t dptr);

static struct {
	cu_ctx_set_fn ctx_set;
	cu_alloc_fn alloc;
	cu_free_fn free;
	void *ctx;
} cu;

struct opts {
	const char *lib;
	unsigned long long pairs, size, threads, rate, warmup, keep, sites;
	int wait, linger;
};

struct worker {
	pthread_t tid;
	const struct opts *o;
	double seconds, cpu_seconds;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("alloc_loop: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void check(int rc, const char *call)
{
	if (rc)
		die("%s failed: CUDA error %d", call, rc);
}

static double clock_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		die("the library has no %s", name);
	return p;
}

static void cuda_start(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	cu_device_get_fn device_get;
	int dev = 0;

	if (!h)
		die("cannot load %s: %s", lib, dlerror());
	cu.ctx_set = (cu_ctx_set_fn)sym(h, "cuCtxSetCurrent");
	cu.alloc = (cu_alloc_fn)sym(h, "cuMemAlloc_v2");
	cu.free = (cu_free_fn)sym(h, "cuMemFree_v2");
	check(((cu_init_fn)sym(h, "cuInit"))(0), "cuInit");
	device_get = (cu_device_get_fn)dlsym(h, "cuDeviceGet");
	if (device_get)
		check(device_get(&dev, 0), "cuDeviceGet");
	check(((cu_ctx_retain_fn)sym(h, "cuDevicePrimaryCtxRetain"))(&cu.ctx, dev),
	      "cuDevicePrimaryCtxRetain");
	check(cu.ctx_set(cu.ctx), "cuCtxSetCurrent");
}

/* One allocation and its free: the unit every benchmark counts. */
static inline void pair(size_t size)
{
	uint64_t p = 0;

	check(cu.alloc(&p, size), "cuMemAlloc_v2");
	check(cu.free(p), "cuMemFree_v2");
}

/* Sleeps until the absolute time t (CLOCK_MONOTONIC seconds). */
static void sleep_until(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	double per_thread_rate = o->rate ? (double)o->rate / o->threads : 0, t0, cpu0;
	unsigned long long i;

	check(cu.ctx_set(cu.ctx), "cuCtxSetCurrent");
	for (i = 0; i < o->warmup; i++)
		pair(o->size);
	cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	t0 = now_s();
	for (i = 0; i < o->pairs; i++) {
		pair(o->size);
		/* paced: every 64 pairs, wait for the schedule to catch up */
		if (per_thread_rate && (i & 63) == 63)
			sleep_until(t0 + (i + 1) / per_thread_rate);
	}
	w->seconds = now_s() - t0;
	w->cpu_seconds = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	return NULL;
}

static void run_timed(const struct opts *o)
{
	struct worker *w = calloc(o->threads, sizeof(*w));
	double seconds = 0, cpu_seconds = 0, wall;
	unsigned long long i;
	int err;

	if (!w)
		die("out of memory");
	wall = now_s();
	for (i = 0; i < o->threads; i++) {
		w[i].o = o;
		err = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
		if (err)
			die("pthread_create: %s", strerror(err));
	}
	for (i = 0; i < o->threads; i++) {
		pthread_join(w[i].tid, NULL);
		seconds += w[i].seconds;
		cpu_seconds += w[i].cpu_seconds;
	}
	wall = now_s() - wall;
	printf("pairs=%llu threads=%llu seconds=%.6f ns_per_pair=%.1f cpu_ns_per_pair=%.1f "
	       "pairs_per_s=%.0f\n", o->pairs * o->threads, o->threads, wall,
	       seconds * 1e9 / (o->pairs * o->threads),
	       cpu_seconds * 1e9 / (o->pairs * o->threads), o->pairs * o->threads / wall);
	free(w);
}

static FRAME uint64_t keep_site(size_t size)
{
	uint64_t p = 0;

	check(cu.alloc(&p, size), "cuMemAlloc_v2");
	return p;
}

static FRAME uint64_t path0(unsigned int depth, unsigned int bits, size_t size);
static FRAME uint64_t path1(unsigned int depth, unsigned int bits, size_t size);

/* Reaches keep_site through depth calls, each through path0 or path1 as bits say. */
static uint64_t descend(unsigned int depth, unsigned int bits, size_t size)
{
	if (!depth)
		return keep_site(size);
	return bits & 1 ? path1(depth - 1, bits >> 1, size) : path0(depth - 1, bits >> 1, size);
}

static FRAME uint64_t path0(unsigned int depth, unsigned int bits, size_t size)
{
	uint64_t p = descend(depth, bits, size);

	__asm__ volatile("" ::: "memory");
	return p;
}

static FRAME uint64_t path1(unsigned int depth, unsigned int bits, size_t size)
{
	uint64_t p = descend(depth, bits, size);

	__asm__ volatile("" ::: "memory");
	return p + 0;
}

static void wait_line(void)
{
	int c;

	do {
		c = getchar();
	} while (c != EOF && c != '\n');
}

static void run_keep(const struct opts *o)
{
	unsigned int depth = 0;
	unsigned long long i;

	while ((1ULL << depth) < o->sites)
		depth++;
	for (i = 0; i < o->keep; i++)
		descend(depth, (unsigned int)(i % o->sites), o->size);
	printf("kept=%llu sites=%llu\n", o->keep, o->sites);
	fflush(stdout);
	wait_line();
}

static void usage(int status)
{
	fputs("usage: alloc_loop [--lib PATH] [--pairs N] [--size BYTES] [--threads T] "
	      "[--rate PAIRS_PER_S] [--warmup N] [--keep N] [--sites K] [--wait] [--linger]\n",
	      status ? stderr : stdout);
	exit(status);
}

static unsigned long long number(const char *opt, const char *s, unsigned long long min,
				 unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || strchr(s, '-') || v < min || v > max) {
		fprintf(stderr, "alloc_loop: bad %s '%s': expected %llu to %llu\n", opt, s, min,
			max);
		exit(2);
	}
	return v;
}

static void parse(struct opts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--wait")) {
			o->wait = 1;
			continue;
		}
		if (!strcmp(a, "--linger")) {
			o->linger = 1;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			usage(0);
		if (!v || strncmp(a, "--", 2))
			usage(2);
		i++;
		if (!strcmp(a, "--lib"))
			o->lib = v;
		else if (!strcmp(a, "--pairs"))
			o->pairs = number(a, v, 1, 1ULL << 40);
		else if (!strcmp(a, "--size"))
			o->size = number(a, v, 1, 1ULL << 40);
		else if (!strcmp(a, "--threads"))
			o->threads = number(a, v, 1, 256);
		else if (!strcmp(a, "--rate"))
			o->rate = number(a, v, 0, 1ULL << 32);
		else if (!strcmp(a, "--warmup"))
			o->warmup = number(a, v, 0, 1ULL << 32);
		else if (!strcmp(a, "--keep"))
			o->keep = number(a, v, 0, 1ULL << 32);
		else if (!strcmp(a, "--sites"))
			o->sites = number(a, v, 1, 1 << 20);
		else
			usage(2);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .lib = "libcuda.so.1", .pairs = 100000, .size = 2 << 20, .threads = 1,
			  .warmup = 1000, .sites = 1 };

	parse(&o, argc, argv);
	cuda_start(o.lib);
	if (o.wait) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		wait_line();
	}
	if (o.keep)
		run_keep(&o);
	else
		run_timed(&o);
	if (o.linger) {
		fflush(stdout);
		wait_line();
	}
	return 0;
}
