// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_dp.c - nn.DataParallel's memory on two devices, from one process: the
 * model is replicated on devices 0 and 1 (dp_site_replica, the same stack on
 * both), each step scatters its input to device 1 and frees it
 * (dp_site_scatter, steady), and gathers the outputs on device 0
 * (output_device 0: dp_site_gather), keeping them: device 0 climbs, device 1
 * does not. The truth's device_bytes_by_device is the stand-in's own per device.
 * Its contexts are made after the tracer attached, so that their devices are known.
 *
 * Options: --size BYTES (a step's output, default 4 MiB), --iters N (16),
 * --interval-ms N between steps (0).
 */
#include <unistd.h>

#include "wl.h"

enum { S_REPLICA, S_SCATTER, S_GATHER };

static struct wl_site sites[] = {
	[S_REPLICA] = { "dp_site_replica", FAKECUDA_DEVICE, 0, 0 },
	[S_SCATTER] = { "dp_site_scatter", FAKECUDA_DEVICE, 0, 0 },
	[S_GATHER] = { "dp_site_gather", FAKECUDA_DEVICE, 0, 0 },
};

static CUcontext ctxs[2];

static inline __attribute__((always_inline)) CUdeviceptr alloc_on(int dev, int site, size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuCtxSetCurrent(ctxs[dev]), "cuCtxSetCurrent");
	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[site], size);
	return p;
}

WL_SITE CUdeviceptr dp_site_replica(int dev, size_t size)
{
	return alloc_on(dev, S_REPLICA, size);
}

WL_SITE CUdeviceptr dp_site_scatter(int dev, size_t size)
{
	return alloc_on(dev, S_SCATTER, size);
}

WL_SITE CUdeviceptr dp_site_gather(int dev, size_t size)
{
	return alloc_on(dev, S_GATHER, size);
}

WL_FRAME static void step(size_t size)
{
	CUdeviceptr in = dp_site_scatter(1, size);

	dp_site_gather(0, size); /* output_device 0: kept */
	wl_check(cuCtxSetCurrent(ctxs[1]), "cuCtxSetCurrent");
	wl_check(cuMemFree_v2(in), "cuMemFree_v2");
	wl_site_free(&sites[S_SCATTER], size);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 4 * WL_MIB, .iters = 16 };
	volatile int ndevs = 2; /* not unrolled */

	wl_parse(&o, argc, argv, WL_OPT_SIZE | WL_OPT_ITERS | WL_OPT_INTERVAL);
	wl_check(cuInit(0), "cuInit");
	wl_ready(&o);
	fakecuda_mark();
	/* after attach: the tracer sees which device each context is on */
	for (int dev = 0; dev < 2; dev++)
		wl_check(cuDevicePrimaryCtxRetain(&ctxs[dev], dev), "cuDevicePrimaryCtxRetain");
	for (int dev = 0; dev < ndevs; dev++) /* one call site: one stack on both devices */
		dp_site_replica(dev, 4 * o.size);
	for (unsigned long long i = 0; i < o.iters; i++) {
		step(o.size);
		if (o.interval_ms)
			usleep(o.interval_ms * 1000);
	}
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
