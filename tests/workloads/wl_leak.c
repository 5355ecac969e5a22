// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_leak.c - a training loop that leaks: the demo program and the staircase test.
 *
 * Every step, train_step() keeps one --size buffer at leak_site_staircase
 * (never freed: outstanding memory climbs step after step) and allocates and
 * frees a scratch buffer of four times that at churn_site_scratch (no leak).
 * Steps are --interval-ms apart; after --iters steps (0: until SIGINT or
 * SIGTERM) the truth is written. -v tells on stderr what is going on.
 *
 * Options: --iters N (default 10, 0 = forever), --interval-ms N (default 100),
 * --size BYTES (default 1 MiB), -v/--verbose.
 */
#include <unistd.h>

#include "wl.h"

enum { S_STAIRCASE, S_CHURN };

static struct wl_site sites[] = {
	[S_STAIRCASE] = { "leak_site_staircase", FAKECUDA_DEVICE, 0, 0 },
	[S_CHURN] = { "churn_site_scratch", FAKECUDA_DEVICE, 0, 0 },
};

/* A buffer kept "for later" and never given back: the leak. */
WL_SITE CUdeviceptr leak_site_staircase(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_STAIRCASE], size);
	return p;
}

/* A scratch buffer used and given back within the step: no leak. */
WL_SITE void churn_site_scratch(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_CHURN], size);
	wl_check(cuMemFree_v2(p), "cuMemFree_v2");
	wl_site_free(&sites[S_CHURN], size);
}

WL_FRAME static void train_step(size_t size)
{
	churn_site_scratch(4 * size);
	leak_site_staircase(size);
}

WL_FRAME static void train_loop(const struct wl_opts *o)
{
	unsigned long long step;

	for (step = 1; !wl_stop && (!o->iters || step <= o->iters); step++) {
		train_step(o->size);
		if (o->verbose)
			fprintf(stderr, "%s: step %llu: %.1f MiB leaked at leak_site_staircase\n",
				wl_prog, step, (double)sites[S_STAIRCASE].bytes / WL_MIB);
		if (!o->iters || step < o->iters)
			wl_sleep_ms(o->interval_ms);
	}
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .iters = 10, .interval_ms = 100, .size = WL_MIB };

	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_INTERVAL | WL_OPT_SIZE | WL_OPT_VERBOSE);
	if (!o.size)
		wl_die("--size must not be 0");
	wl_stop_on_signals();
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	if (o.verbose)
		fprintf(stderr, "%s: pid %d leaks %llu bytes every %llu ms at leak_site_staircase "
			"for %llu steps (0: until Ctrl-C)\n", wl_prog, (int)getpid(), o.size,
			o.interval_ms, o.iters);
	train_loop(&o);
	if (o.verbose)
		fprintf(stderr, "%s: done: %.1f MiB outstanding at leak_site_staircase\n", wl_prog,
			(double)sites[S_STAIRCASE].bytes / WL_MIB);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
