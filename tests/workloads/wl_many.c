// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_many.c - many outstanding allocations, each from its own call stack:
 * --iters N (100000) device allocations of --size bytes (4096), never freed.
 * Allocation i is made through a chain of 17 calls of many_a/many_b that
 * spells i in binary, so up to 131072 allocations have distinct stacks; with
 * --same 1 they all come from one stack, with --stacks N from N stacks in turn;
 * --pause MS sleeps MS milliseconds once the first N (one turn) are made.
 * Every stack has the same ip, sp and word at sp at the driver call, and the
 * same layout: they differ in the return addresses above it.
 *
 * Options: --iters N, --size N, --same 0|1, --stacks N, --pause MS.
 */
#include <unistd.h>

#include "wl.h"

#define LEVELS 17

static struct wl_opts o = { .iters = 100000, .size = 4096 };
static struct wl_site sites[] = { { "many_site", FAKECUDA_DEVICE, 0, 0 } };

WL_SITE void many_site(void)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, o.size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[0], o.size);
}

WL_FRAME void many_b(unsigned int level, unsigned long i);

WL_FRAME void many_a(unsigned int level, unsigned long i)
{
	if (!level)
		many_site();
	else if (i & 1)
		many_b(level - 1, i >> 1);
	else
		many_a(level - 1, i >> 1);
	__asm__ volatile("" ::: "memory"); /* no tail call: every level is a frame */
}

WL_FRAME void many_b(unsigned int level, unsigned long i)
{
	if (!level)
		many_site();
	else if (i & 1)
		many_b(level - 1, i >> 1);
	else
		many_a(level - 1, i >> 1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	unsigned long same = wl_take_num(&argc, argv, "--same", 1, 0);
	unsigned long stacks = wl_take_num(&argc, argv, "--stacks", 1UL << LEVELS, 0);
	unsigned long pause_ms = wl_take_num(&argc, argv, "--pause", 60000, 0);

	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_SIZE);
	if (!o.size)
		wl_die("--size must be positive");
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	for (unsigned long i = 0; i < o.iters; i++) {
		if (pause_ms && stacks && i == stacks)
			usleep(pause_ms * 1000); /* the tracer catches up */
		many_a(LEVELS, same ? 0 : stacks ? i % stacks : i);
	}
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
