// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_oom.c - allocation calls that fail and frees the driver rejects.
 *
 * With a capacity of --size bytes (FAKECUDA_CAPACITY, set before cuInit): three
 * quarters are allocated at oom_site_fill; a device and a pinned host request
 * beyond what is left fail with 2 at oom_site_too_big; size 0 (v2, v1,
 * managed), a bad array format, a bad pitch element size and an allocation
 * with no current context fail with another code at oom_site_invalid; a double
 * free, a free of an unknown pointer, of an unknown host pointer and of an
 * unknown handle fail with 1. One quarter is then freed and allocated again.
 *
 * Options: --size BYTES (the capacity, default 16 MiB).
 */
#include <stdlib.h>

#include "wl.h"

enum { S_FILL, S_TOO_BIG, S_INVALID };

static struct wl_site sites[] = {
	[S_FILL] = { "oom_site_fill", FAKECUDA_DEVICE, 0, 0 },
	[S_TOO_BIG] = { "oom_site_too_big", FAKECUDA_DEVICE, 0, 0 },
	[S_INVALID] = { "oom_site_invalid", FAKECUDA_DEVICE, 0, 0 },
};

WL_SITE CUdeviceptr oom_site_fill(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_FILL], size);
	return p;
}

WL_SITE void oom_site_too_big(size_t size, size_t host_size)
{
	CUdeviceptr p = 0;
	void *h = NULL;

	wl_check_rc(cuMemAlloc_v2(&p, size), CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2 too big");
	wl_check_rc(cuMemHostAlloc(&h, host_size, 0), CUDA_ERROR_OUT_OF_MEMORY,
		    "cuMemHostAlloc too big");
	wl_expect.oom_failures += 2;
}

WL_SITE void oom_site_invalid(void)
{
	CUDA_ARRAY_DESCRIPTOR bad = { .Width = 16, .Height = 16, .Format = 0x77, .NumChannels = 1 };
	CUdeviceptr p = 0;
	CUdeviceptr_v1 p1 = 0;
	CUcontext ctx = NULL;
	CUarray a = NULL;
	size_t pitch = 0;

	wl_check_rc(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc_v2(0)");
	wl_check_rc(cuMemAlloc(&p1, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc(0)");
	wl_check_rc(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE,
		    "cuMemAllocManaged(0)");
	wl_check_rc(cuArrayCreate_v2(&a, &bad), CUDA_ERROR_INVALID_VALUE,
		    "cuArrayCreate_v2(bad format)");
	wl_check_rc(cuMemAllocPitch_v2(&p, &pitch, 64, 64, 3), CUDA_ERROR_INVALID_VALUE,
		    "cuMemAllocPitch_v2(element size 3)");
	wl_check(cuCtxPopCurrent_v2(&ctx), "cuCtxPopCurrent_v2");
	wl_check_rc(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_INVALID_CONTEXT,
		    "cuMemAlloc_v2 without a context");
	wl_check(cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent_v2");
	wl_expect.other_failures += 6;
}

WL_FRAME static void bad_frees(CUdeviceptr p, size_t size)
{
	int local;

	wl_check(cuMemFree_v2(p), "cuMemFree_v2");
	wl_site_free(&sites[S_FILL], size);
	wl_check_rc(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE, "cuMemFree_v2 twice");
	wl_check_rc(cuMemFree_v2(0xdead0000ULL), CUDA_ERROR_INVALID_VALUE,
		    "cuMemFree_v2(unknown)");
	wl_check_rc(cuMemFreeHost(&local), CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost(unknown)");
	wl_check_rc(cuMemRelease(0x1234), CUDA_ERROR_INVALID_VALUE, "cuMemRelease(unknown)");
	wl_expect.free_failures += 4;
}

WL_FRAME static void main_phase(size_t capacity)
{
	size_t quarter = capacity / 4;
	CUdeviceptr p;

	oom_site_fill(quarter);
	p = oom_site_fill(quarter);
	oom_site_fill(quarter);
	oom_site_too_big(capacity - 3 * quarter + 1, capacity + 1);
	oom_site_invalid();
	bad_frees(p, quarter);
	oom_site_fill(quarter);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 16 * WL_MIB };

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (o.size < 4096)
		wl_die("--size must be at least 4096");
	wl_set_capacity(o.size);
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	main_phase(o.size);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
