// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_frameworks.c - allocation patterns of frameworks other than PyTorch's
 * caching allocator, and of steady services, over the CUDA driver stand-in;
 * chosen by --scenario:
 *
 *   pool     XLA's default (the jaxlib/xla_extension.so stand-in): 3/4 of the
 *            device (FAKECUDA_CAPACITY) in one allocation at start, then a
 *            result of --size kept every step, carved out of that block with
 *            no driver call (growth the driver never sees)
 *   service  an inference service: a cache preallocated once (pool_site_cache,
 *            32 MiB), then per request 1 to 8 buffers of random sizes (64 KiB
 *            to 8 MiB) at request_site_buffer, all freed when it is answered
 *   batches  training on batches of random length through a caching allocator:
 *            each step needs length x --size bytes; segments (batch_site_segment)
 *            are kept for reuse and a new one is asked for only when the
 *            longest batch so far is exceeded (the reserve rises to the high-water
 *            mark and stays), activations freed back to the cache every step
 *   late     a leak of --size per step at leak_site_late, 16 steps of it before
 *            the tracer attaches (ready), --iters steps after
 *
 * Steps are --interval-ms apart, --iters of them (default 40). Random sizes come
 * from a fixed seed, so every run is the same. The truth adds "pool_bytes",
 * "pool_used" (bytes carved out of the pool), "pre_attach" and "requests".
 *
 * Options: --scenario NAME, --iters N, --interval-ms N (default 50),
 * --size BYTES (default 1 MiB), --seed N (of the random sizes; default 12345).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

int xla_standin_preallocate(size_t size, CUdeviceptr *out);

enum { S_POOL, S_CACHE, S_REQUEST, S_SEGMENT, S_LATE };

static struct wl_site sites[] = {
	[S_POOL] = { "xla_standin_preallocate", FAKECUDA_DEVICE, 0, 0 },
	[S_CACHE] = { "pool_site_cache", FAKECUDA_DEVICE, 0, 0 },
	[S_REQUEST] = { "request_site_buffer", FAKECUDA_DEVICE, 0, 0 },
	[S_SEGMENT] = { "batch_site_segment", FAKECUDA_DEVICE, 0, 0 },
	[S_LATE] = { "leak_site_late", FAKECUDA_DEVICE, 0, 0 },
};

#define PRE_ATTACH_STEPS 16
#define MAX_SEGS 64

static unsigned int seed = 12345;
static long long pool_bytes, pool_used, pre_attach, requests;

static uint64_t random_between(uint64_t lo, uint64_t hi)
{
	return lo + (uint64_t)rand_r(&seed) % (hi - lo + 1);
}

static uint64_t capacity(void)
{
	const char *c = getenv("FAKECUDA_CAPACITY");

	return c ? strtoull(c, NULL, 10) : 64ULL << 30;
}

/* JAX's preallocation: 3/4 of the device, then every step's result carved out of it. */
WL_FRAME static void run_pool(const struct wl_opts *o)
{
	CUdeviceptr p;

	pool_bytes = (long long)(capacity() / 4 * 3);
	wl_check(xla_standin_preallocate(pool_bytes, &p), "xla_standin_preallocate");
	wl_site_alloc(&sites[S_POOL], pool_bytes);
	for (unsigned long long i = 0; i < o->iters; i++) {
		if (pool_used + (long long)o->size <= pool_bytes)
			pool_used += o->size; /* a kept result: no driver call */
		wl_sleep_ms(o->interval_ms);
	}
}

WL_SITE static CUdeviceptr pool_site_cache(size_t size)
{
	CUdeviceptr p;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(cache)");
	wl_site_alloc(&sites[S_CACHE], size);
	return p;
}

WL_SITE static CUdeviceptr request_site_buffer(size_t size)
{
	CUdeviceptr p;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(request)");
	wl_site_alloc(&sites[S_REQUEST], size);
	return p;
}

/* A preallocated cache, then requests of random size, each freed when answered. */
WL_FRAME static void run_service(const struct wl_opts *o)
{
	CUdeviceptr bufs[8];
	size_t sizes[8];

	pool_site_cache(32 * WL_MIB);
	for (unsigned long long i = 0; i < o->iters; i++) {
		int n = (int)random_between(1, 8);

		for (int b = 0; b < n; b++) {
			sizes[b] = random_between(64 << 10, 8 * WL_MIB) & ~511ULL;
			bufs[b] = request_site_buffer(sizes[b]);
		}
		for (int b = 0; b < n; b++) {
			wl_check(cuMemFree_v2(bufs[b]), "cuMemFree_v2(request)");
			wl_site_free(&sites[S_REQUEST], sizes[b]);
		}
		requests++;
		wl_sleep_ms(o->interval_ms);
	}
}

WL_SITE static CUdeviceptr batch_site_segment(size_t size)
{
	CUdeviceptr p;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(segment)");
	wl_site_alloc(&sites[S_SEGMENT], size);
	return p;
}

/* Batches of random length: the reserve follows the longest batch so far, then stays. */
WL_FRAME static void run_batches(const struct wl_opts *o)
{
	CUdeviceptr segs[MAX_SEGS];
	uint64_t reserved = 0;
	int nsegs = 0;

	for (unsigned long long i = 0; i < o->iters; i++) {
		uint64_t need = random_between(8, 512) * o->size / 64;

		/* a segment for what the cache cannot serve, 2 MiB-rounded as PyTorch's */
		if (need > reserved && nsegs < MAX_SEGS) {
			uint64_t more = (need - reserved + 2 * WL_MIB - 1) & ~(2 * WL_MIB - 1);

			segs[nsegs++] = batch_site_segment(more);
			reserved += more;
		}
		requests++;
		wl_sleep_ms(o->interval_ms);
	}
	(void)segs;
}

WL_SITE static void leak_site_late(size_t size, int booked)
{
	CUdeviceptr p;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2(late)");
	if (booked)
		wl_site_alloc(&sites[S_LATE], size);
}

WL_FRAME static void late_step(const struct wl_opts *o, int booked)
{
	leak_site_late(o->size, booked);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .iters = 40, .interval_ms = 50, .size = WL_MIB };
	const char *scenario = wl_take_str(&argc, argv, "--scenario");
	char extra[256];
	int n;

	if (!scenario)
		wl_die("--scenario pool|service|batches|late is required");
	seed = (unsigned int)wl_take_num(&argc, argv, "--seed", UINT32_MAX, seed);
	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_INTERVAL | WL_OPT_SIZE);
	if (!o.size)
		wl_die("--size must not be 0");
	wl_cuda_start(0);
	if (!strcmp(scenario, "late")) {
		for (int i = 0; i < PRE_ATTACH_STEPS; i++)
			late_step(&o, 0);
		pre_attach = PRE_ATTACH_STEPS * (long long)o.size;
		wl_expect.pre_attach_device_bytes = pre_attach;
	}
	wl_ready(&o);
	fakecuda_mark();
	if (!strcmp(scenario, "pool")) {
		run_pool(&o);
	} else if (!strcmp(scenario, "service")) {
		run_service(&o);
	} else if (!strcmp(scenario, "batches")) {
		run_batches(&o);
	} else if (!strcmp(scenario, "late")) {
		for (unsigned long long i = 0; i < o.iters; i++) {
			late_step(&o, 1);
			wl_sleep_ms(o.interval_ms);
		}
	} else {
		wl_die("unknown scenario %s", scenario);
	}
	n = snprintf(extra, sizeof(extra),
		     "\"pool_bytes\":%lld,\"pool_used\":%lld,\"pre_attach\":%lld,"
		     "\"requests\":%lld",
		     pool_bytes, pool_used, pre_attach, requests);
	if (n < 0 || (size_t)n >= sizeof(extra))
		wl_die("truth fields too long");
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), extra);
	return 0;
}
