// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl.c - command line, ready/wait handshake, site books and truth file of the
 * test workloads (the protocol is described in wl.h), and what their threaded
 * loops share: a random sequence, a deadline, starting and joining the threads;
 * options taken out of argv, stopping on a signal, pauses.
 *
 * It owns the workload-side books: bytes and allocations outstanding per site,
 * calls made, and the expectations the workload states. It calls no driver
 * function.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

struct wl_expect wl_expect;
const char *wl_prog = "workload";

static long long alloc_calls, free_calls, dropped_bytes, dropped_allocs;

static const char *rc_name(int rc)
{
	switch (rc) {
	case CUDA_SUCCESS:
		return "CUDA_SUCCESS";
	case CUDA_ERROR_INVALID_VALUE:
		return "CUDA_ERROR_INVALID_VALUE";
	case CUDA_ERROR_OUT_OF_MEMORY:
		return "CUDA_ERROR_OUT_OF_MEMORY";
	case CUDA_ERROR_NOT_INITIALIZED:
		return "CUDA_ERROR_NOT_INITIALIZED";
	case CUDA_ERROR_INVALID_DEVICE:
		return "CUDA_ERROR_INVALID_DEVICE";
	case CUDA_ERROR_INVALID_CONTEXT:
		return "CUDA_ERROR_INVALID_CONTEXT";
	case CUDA_ERROR_INVALID_HANDLE:
		return "CUDA_ERROR_INVALID_HANDLE";
	default:
		return "CUDA_ERROR_UNKNOWN";
	}
}

void wl_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", wl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void wl_check_rc(int rc, int want, const char *call)
{
	if (rc != want)
		wl_die("%s failed: %s (%d), expected %s (%d)", call, rc_name(rc), rc, rc_name(want),
		       want);
}

/* "NAME VALUE" taken out of argv: VALUE, or NULL; exits with 2 saying it needs what. */
static const char *take(int *argc, char **argv, const char *name, const char *what)
{
	const char *v;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], name))
			continue;
		if (i + 1 >= *argc) {
			fprintf(stderr, "%s: %s needs %s\n", argv[0], name, what);
			exit(2);
		}
		v = argv[i + 1];
		memmove(&argv[i], &argv[i + 2], (*argc - i - 1) * sizeof(*argv));
		*argc -= 2;
		return v;
	}
	return NULL;
}

const char *wl_take_str(int *argc, char **argv, const char *name)
{
	return take(argc, argv, name, "a value");
}

unsigned long wl_take_num(int *argc, char **argv, const char *name, unsigned long max,
			  unsigned long dflt)
{
	const char *s = take(argc, argv, name, "a number");
	unsigned long v;
	char *end;

	if (!s)
		return dflt;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max) {
		fprintf(stderr, "%s: invalid %s '%s'\n", argv[0], name, s);
		exit(2);
	}
	return v;
}

void wl_set_capacity(unsigned long long bytes)
{
	char cap[32];
	int n = snprintf(cap, sizeof(cap), "%llu", bytes);

	if (n < 0 || (size_t)n >= sizeof(cap) || setenv("FAKECUDA_CAPACITY", cap, 1))
		wl_die("cannot set FAKECUDA_CAPACITY");
}

volatile sig_atomic_t wl_stop;

static void on_stop_signal(int sig)
{
	(void)sig;
	wl_stop = 1;
}

void wl_stop_on_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		wl_die("sigaction: %s", strerror(errno));
}

void wl_sleep_ms(unsigned long long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	/* a signal cuts the pause short; the caller's loop then sees wl_stop */
	while (!wl_stop && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void wl_check(int rc, const char *call)
{
	if (rc)
		wl_die("%s failed: %s (%d)", call, rc_name(rc), rc);
}

static void usage(unsigned int allowed, int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f, "usage: %s [--truth FILE] [--no-wait] [--hold]%s%s%s%s%s%s%s\n", wl_prog,
		allowed & WL_OPT_THREADS ? " [--threads N]" : "",
		allowed & WL_OPT_ITERS ? " [--iters N]" : "",
		allowed & WL_OPT_SIZE ? " [--size BYTES]" : "",
		allowed & WL_OPT_INTERVAL ? " [--interval-ms N]" : "",
		allowed & WL_OPT_LIB ? " [--lib PATH]" : "",
		allowed & WL_OPT_EXEC ? " [--exec]" : "",
		allowed & WL_OPT_VERBOSE ? " [-v|--verbose]" : "");
	exit(status);
}

/* An option getopt did not know (it said so), or one this workload does not take. */
static void reject(int c, const char *name, unsigned int allowed)
{
	if (c != '?')
		fprintf(stderr, "%s: --%s does not apply to this workload\n", wl_prog, name);
	usage(allowed, 2);
}

static unsigned long long parse_num(const char *opt, const char *s, unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || strchr(s, '-') || v > max) {
		fprintf(stderr, "%s: bad %s '%s': expected a number up to %llu\n", wl_prog, opt, s,
			max);
		exit(2);
	}
	return v;
}

void wl_parse(struct wl_opts *o, int argc, char **argv, unsigned int allowed)
{
	static const struct option longopts[] = {
		{ "truth", required_argument, NULL, 't' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "hold", no_argument, NULL, 'H' },
		{ "threads", required_argument, NULL, 'T' },
		{ "iters", required_argument, NULL, 'i' },
		{ "size", required_argument, NULL, 's' },
		{ "interval-ms", required_argument, NULL, 'I' },
		{ "lib", required_argument, NULL, 'l' },
		{ "exec", no_argument, NULL, 'e' },
		{ "child", no_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *slash = strrchr(argv[0], '/');
	int c, idx;

	wl_prog = slash ? slash + 1 : argv[0];
	for (;;) {
		idx = -1; /* stays -1 for a short option */
		c = getopt_long(argc, argv, "vh", longopts, &idx);
		if (c == -1)
			break;
		switch (c) {
		case 't':
			o->truth = optarg;
			continue;
		case 'n':
			o->no_wait = 1;
			continue;
		case 'H':
			o->hold = 1;
			continue;
		case 'h':
			usage(allowed, 0);
			continue;
		}
		if (c == 'T' && (allowed & WL_OPT_THREADS))
			o->threads = parse_num("--threads", optarg, 1024);
		else if (c == 'i' && (allowed & WL_OPT_ITERS))
			o->iters = parse_num("--iters", optarg, 1ULL << 40);
		else if (c == 's' && (allowed & WL_OPT_SIZE))
			o->size = parse_num("--size", optarg, 1ULL << 50);
		else if (c == 'I' && (allowed & WL_OPT_INTERVAL))
			o->interval_ms = parse_num("--interval-ms", optarg, 86400000);
		else if (c == 'l' && (allowed & WL_OPT_LIB))
			o->lib = optarg;
		else if (c == 'e' && (allowed & WL_OPT_EXEC))
			o->exec = 1;
		else if (c == 'c' && (allowed & WL_OPT_EXEC))
			o->child = 1;
		else if (c == 'v' && (allowed & WL_OPT_VERBOSE))
			o->verbose = 1;
		else
			reject(c, idx >= 0 ? longopts[idx].name : "verbose", allowed);
	}
	if (optind != argc)
		usage(allowed, 2);
}

/* Blocks until a newline or EOF on stdin. */
static void wait_line(void)
{
	int c;

	do {
		c = getchar();
	} while (c != EOF && c != '\n');
}

void wl_ready(const struct wl_opts *o)
{
	printf("ready %d\n", (int)getpid());
	if (fflush(stdout))
		wl_die("cannot write to stdout: %s", strerror(errno));
	if (!o->no_wait)
		wait_line();
}

void wl_site_alloc(struct wl_site *s, uint64_t bytes)
{
	__atomic_add_fetch(&s->bytes, (long long)bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->allocs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&alloc_calls, 1, __ATOMIC_RELAXED);
}

void wl_site_free(struct wl_site *s, uint64_t bytes)
{
	__atomic_sub_fetch(&s->bytes, (long long)bytes, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&s->allocs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&free_calls, 1, __ATOMIC_RELAXED);
}

void wl_site_drop(struct wl_site *s, uint64_t bytes)
{
	__atomic_sub_fetch(&s->bytes, (long long)bytes, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&s->allocs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&dropped_bytes, (long long)bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&dropped_allocs, 1, __ATOMIC_RELAXED);
}

void wl_reset(struct wl_site *sites, size_t nsites)
{
	size_t i;

	for (i = 0; i < nsites; i++)
		sites[i].bytes = sites[i].allocs = 0;
	memset(&wl_expect, 0, sizeof(wl_expect));
	alloc_calls = free_calls = dropped_bytes = dropped_allocs = 0;
}

/* The "sites" and "expect" fields, then extra, into f. */
static void write_fields(FILE *f, const struct wl_site *sites, size_t nsites, const char *extra)
{
	long long bytes[FAKECUDA_NR_CLASSES] = { 0 }, allocs = 0;
	const struct wl_expect *e = &wl_expect;
	size_t i;

	fputs("\"sites\":{", f);
	for (i = 0; i < nsites; i++) {
		fprintf(f, "%s\"%s\":%lld", i ? "," : "", sites[i].name, sites[i].bytes);
		bytes[sites[i].cls] += sites[i].bytes;
		allocs += sites[i].allocs;
	}
	fprintf(f,
		"},\"expect\":{\"device_bytes\":%lld,\"managed_bytes\":%lld,"
		"\"host_pinned_bytes\":%lld,\"outstanding_allocs\":%lld,\"alloc_calls\":%lld,"
		"\"free_calls\":%lld,\"ctx_dropped_bytes\":%lld,\"ctx_dropped_allocs\":%lld,",
		bytes[FAKECUDA_DEVICE], bytes[FAKECUDA_MANAGED], bytes[FAKECUDA_HOST_PINNED],
		allocs, alloc_calls, free_calls, dropped_bytes, dropped_allocs);
	fprintf(f,
		"\"unmatched_frees\":%lld,\"oom_failures\":%lld,\"other_failures\":%lld,"
		"\"free_failures\":%lld,\"pre_attach_device_bytes\":%lld,\"reserved_bytes\":%lld,"
		"\"imported_bytes\":%lld}%s%s",
		e->unmatched_frees, e->oom_failures, e->other_failures, e->free_failures,
		e->pre_attach_device_bytes, e->reserved_bytes, e->imported_bytes,
		extra && *extra ? "," : "", extra ? extra : "");
}

void wl_write_truth(const char *path, wl_truth_fn fn, const struct wl_site *sites, size_t nsites,
		    const char *extra)
{
	char tmp[4096];
	char *fields = NULL;
	size_t len = 0;
	FILE *mem, *f;
	int n;

	mem = open_memstream(&fields, &len);
	if (!mem)
		wl_die("open_memstream: %s", strerror(errno));
	write_fields(mem, sites, nsites, extra);
	if (fclose(mem))
		wl_die("cannot build the truth fields: %s", strerror(errno));
	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		wl_die("truth path too long: %s", path);
	f = fopen(tmp, "w");
	if (!f)
		wl_die("cannot create %s: %s", tmp, strerror(errno));
	if (fn(f, fields) || fclose(f))
		wl_die("cannot write %s: %s", tmp, strerror(errno));
	if (rename(tmp, path))
		wl_die("cannot rename %s to %s: %s", tmp, path, strerror(errno));
	free(fields);
}

void wl_finish(const struct wl_opts *o, wl_truth_fn fn, const struct wl_site *sites,
	       size_t nsites, const char *extra)
{
	if (o->truth)
		wl_write_truth(o->truth, fn, sites, nsites, extra);
	if (o->hold)
		wait_line();
}

uint64_t wl_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct timespec wl_deadline(unsigned long long seconds)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)seconds;
	return t;
}

bool wl_past(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static struct wl_worker *worker_at(void *workers, unsigned int i, size_t size)
{
	return (struct wl_worker *)((char *)workers + (size_t)i * size);
}

void *wl_workers_new(unsigned int n, size_t size, CUcontext ctx)
{
	void *workers = calloc(n ? n : 1, size);

	if (!workers)
		wl_die("out of memory");
	for (unsigned int i = 0; i < n; i++) {
		struct wl_worker *w = worker_at(workers, i, size);

		w->index = i;
		w->seed = 0x9e3779b97f4a7c15ULL * (i + 1);
		w->ctx = ctx;
	}
	return workers;
}

void wl_workers_start(void *workers, unsigned int n, size_t size, void *(*fn)(void *))
{
	for (unsigned int i = 0; i < n; i++) {
		struct wl_worker *w = worker_at(workers, i, size);
		int err = pthread_create(&w->tid, NULL, fn, w);

		if (err)
			wl_die("pthread_create failed: %s", strerror(err));
	}
}

unsigned long long wl_workers_join(void *workers, unsigned int n, size_t size)
{
	unsigned long long calls = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct wl_worker *w = worker_at(workers, i, size);

		pthread_join(w->tid, NULL);
		calls += w->calls;
	}
	return calls;
}

void wl_finish_load(const struct wl_opts *o, wl_truth_fn fn, unsigned long long calls)
{
	char extra[64];

	snprintf(extra, sizeof(extra), "\"load_calls\":%llu", calls);
	wl_finish(o, fn, NULL, 0, extra);
}
