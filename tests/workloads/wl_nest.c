// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_nest.c - code that runs inside a driver call and misbehaves, as user
 * callbacks can: through the stand-in's allocation hook, a call into
 * cuMemAlloc_v2 recurses (--mode nest, --depth N nested calls, more than the
 * kernel's 64 return probes per thread if asked), longjmps out of the driver
 * (--mode longjmp: entry seen, return never), exits its thread inside the
 * call (--mode thread-exit) or blocks inside it forever (--mode block, for a
 * kill test; it prints "blocked" on stdout once the thread is inside).
 * After the misbehaviour, plain allocations at nest_site_after continue so
 * that the tracer can be checked to be still exact.
 *
 * Options: --mode MODE (nest), --depth N (70), --iters N (8), --size N (64 KiB).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

enum { S_NESTED, S_AFTER };

static struct wl_site sites[] = {
	[S_NESTED] = { "nest_site_nested", FAKECUDA_DEVICE, 0, 0 },
	[S_AFTER] = { "nest_site_after", FAKECUDA_DEVICE, 0, 0 },
};

static struct wl_opts o = { .iters = 8, .size = 64 * 1024, .threads = 70 };
static const char *mode = "nest";
static __thread int depth;
static __thread int misbehave;
static __thread jmp_buf escape;

/* Recursion: each level allocates once more before the outer call completes. */
WL_SITE CUdeviceptr nest_site_nested(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(nested)");
	wl_site_alloc(&sites[S_NESTED], size);
	return p;
}

WL_SITE CUdeviceptr nest_site_after(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(after)");
	wl_site_alloc(&sites[S_AFTER], size);
	return p;
}

static void hook(size_t size)
{
	if (!misbehave)
		return;
	if (!strcmp(mode, "nest")) {
		if (++depth < (int)o.threads)
			nest_site_nested(size);
		return;
	}
	if (!strcmp(mode, "longjmp"))
		longjmp(escape, 1);
	if (!strcmp(mode, "thread-exit"))
		pthread_exit(NULL);
	if (!strcmp(mode, "block")) {
		printf("blocked\n");
		fflush(stdout);
		for (;;)
			pause();
	}
}

/* One call into the driver that never returns: the hook longjmps back here. */
static WL_FRAME void escape_once(void)
{
	CUdeviceptr p;

	misbehave = 1;
	if (!setjmp(escape))
		cuMemAlloc_v2(&p, o.size);
	misbehave = 0;
}

static void *misbehaving_thread(void *arg)
{
	CUcontext ctx = arg;
	CUdeviceptr p;

	wl_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	misbehave = 1;
	cuMemAlloc_v2(&p, o.size); /* never returns normally */
	return NULL;
}

int main(int argc, char **argv)
{
	const char *m = wl_take_str(&argc, argv, "--mode");
	CUcontext ctx;

	if (m)
		mode = m;
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--depth"))
			argv[i] = "--threads"; /* the common parser knows --threads N */
	}
	wl_parse(&o, argc, argv, WL_OPT_THREADS | WL_OPT_ITERS | WL_OPT_SIZE);
	ctx = wl_cuda_start(0);
	fakecuda_set_alloc_hook(hook);
	wl_ready(&o);
	fakecuda_mark();
	if (!strcmp(mode, "nest")) {
		misbehave = 1;
		nest_site_nested(o.size);
		misbehave = 0;
	} else if (!strcmp(mode, "longjmp")) {
		for (volatile unsigned long long i = 0; i < o.iters; i++)
			escape_once();
	} else if (!strcmp(mode, "thread-exit") || !strcmp(mode, "block")) {
		pthread_t th;

		if (pthread_create(&th, NULL, misbehaving_thread, ctx))
			wl_die("pthread_create failed");
		if (!strcmp(mode, "thread-exit"))
			pthread_join(th, NULL);
		else
			usleep(200000);
	} else {
		wl_die("unknown --mode %s", mode);
	}
	for (unsigned long long i = 0; i < o.iters; i++)
		nest_site_after(o.size);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
