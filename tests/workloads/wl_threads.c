// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_threads.c - N threads allocating and freeing pseudo-random sizes at once.
 *
 * Each thread makes the primary context current, then per iteration allocates
 * one buffer and, once it holds RING buffers, frees the oldest. At the end it
 * frees all but KEEP buffers. Even threads use cuMemAlloc_v2/cuMemFree_v2 at
 * thread_site_even, odd threads cuMemAllocAsync_ptsz/cuMemFreeAsync_ptsz at
 * thread_site_odd. Sizes are 512 to --size bytes, seeded by thread number.
 *
 * Options: --threads N (default 8), --iters N (default 1000), --size BYTES
 * (largest allocation, default 1 MiB).
 */
#include <stdlib.h>

#include "wl.h"

#define RING 4
#define KEEP 2

enum { S_EVEN, S_ODD };

static struct wl_site sites[] = {
	[S_EVEN] = { "thread_site_even", FAKECUDA_DEVICE, 0, 0 },
	[S_ODD] = { "thread_site_odd", FAKECUDA_DEVICE, 0, 0 },
};

struct worker {
	struct wl_worker head;
	unsigned long long iters;
	unsigned long long max_size;
	CUdeviceptr ptr[RING];
	size_t size[RING];
};

WL_SITE CUdeviceptr thread_site_even(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_EVEN], size);
	return p;
}

WL_SITE CUdeviceptr thread_site_odd(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocAsync_ptsz(&p, size, NULL), "cuMemAllocAsync_ptsz");
	wl_site_alloc(&sites[S_ODD], size);
	return p;
}

static void release(struct worker *w, unsigned int slot)
{
	if (w->head.index % 2) {
		wl_check(cuMemFreeAsync_ptsz(w->ptr[slot], NULL), "cuMemFreeAsync_ptsz");
		wl_site_free(&sites[S_ODD], w->size[slot]);
	} else {
		wl_check(cuMemFree_v2(w->ptr[slot]), "cuMemFree_v2");
		wl_site_free(&sites[S_EVEN], w->size[slot]);
	}
}

WL_FRAME static void worker_loop(struct worker *w)
{
	unsigned long long i;
	unsigned int slot;
	size_t size;

	for (i = 0; i < w->iters; i++) {
		slot = i % RING;
		if (i >= RING)
			release(w, slot);
		size = 512 + wl_rand(&w->head.seed) % (w->max_size - 511);
		w->ptr[slot] = w->head.index % 2 ? thread_site_odd(size) : thread_site_even(size);
		w->size[slot] = size;
	}
	/* keep the KEEP newest buffers, free the older ones still held */
	for (i = w->iters > RING ? w->iters - RING : 0; i + KEEP < w->iters; i++)
		release(w, i % RING);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	wl_check(cuCtxSetCurrent(w->head.ctx), "cuCtxSetCurrent");
	worker_loop(w);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .threads = 8, .iters = 1000, .size = WL_MIB };
	struct worker *workers;

	wl_parse(&o, argc, argv, WL_OPT_THREADS | WL_OPT_ITERS | WL_OPT_SIZE);
	if (!o.threads || o.size < 512)
		wl_die("--threads must be at least 1 and --size at least 512");
	workers = wl_workers_new(o.threads, sizeof(*workers), wl_cuda_start(0));
	for (unsigned int i = 0; i < o.threads; i++) {
		workers[i].iters = o.iters;
		workers[i].max_size = o.size;
	}
	wl_ready(&o);
	fakecuda_mark();
	wl_workers_start(workers, o.threads, sizeof(*workers), worker_main);
	wl_workers_join(workers, o.threads, sizeof(*workers));
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	free(workers);
	return 0;
}
