// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_ctx.c - contexts and what their teardown frees.
 *
 * Allocations on device 0's primary context (cuDevicePrimaryCtxRetain +
 * cuCtxSetCurrent), on a context made with cuCtxCreate_v2 on device 1 (current
 * by creation, then popped, then pushed again with cuCtxPushCurrent), and on
 * contexts made with cuCtxCreate, _v3 and _v4. A VMM handle made while the
 * created context is current survives its destruction. cuCtxDestroy(v1)
 * destroys the current context, cuCtxDestroy_v2 a context that is not current,
 * cuDevicePrimaryCtxReset (v1, as cudaDeviceReset calls it) the primary; an
 * allocation on the reset primary fails with 201 until it is retained again.
 *
 * Options: --size BYTES (default 1 MiB).
 */
#include "wl.h"

enum {
	S_PRIMARY,
	S_PRIMARY_HOST,
	S_CREATED,
	S_CREATED_ARRAY,
	S_VMM,
	S_PUSHED,
	S_V1CTX,
	S_V3,
	S_V4,
	S_AFTER_RESET,
};

static struct wl_site sites[] = {
	[S_PRIMARY] = { "ctx_site_primary", FAKECUDA_DEVICE, 0, 0 },
	[S_PRIMARY_HOST] = { "ctx_site_primary_host", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_CREATED] = { "ctx_site_created", FAKECUDA_DEVICE, 0, 0 },
	[S_CREATED_ARRAY] = { "ctx_site_created_array", FAKECUDA_DEVICE, 0, 0 },
	[S_VMM] = { "ctx_site_vmm", FAKECUDA_DEVICE, 0, 0 },
	[S_PUSHED] = { "ctx_site_pushed", FAKECUDA_DEVICE, 0, 0 },
	[S_V1CTX] = { "ctx_site_v1ctx", FAKECUDA_DEVICE, 0, 0 },
	[S_V3] = { "ctx_site_v3", FAKECUDA_DEVICE, 0, 0 },
	[S_V4] = { "ctx_site_v4", FAKECUDA_DEVICE, 0, 0 },
	[S_AFTER_RESET] = { "ctx_site_after_reset", FAKECUDA_DEVICE, 0, 0 },
};

/* Inlined into each site so that the site function is the driver's caller. */
static inline __attribute__((always_inline)) CUdeviceptr alloc_at(int site, size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[site], size);
	return p;
}

WL_SITE CUdeviceptr ctx_site_primary(size_t size)
{
	return alloc_at(S_PRIMARY, size);
}

WL_SITE CUdeviceptr ctx_site_created(size_t size)
{
	return alloc_at(S_CREATED, size);
}

WL_SITE CUdeviceptr ctx_site_pushed(size_t size)
{
	return alloc_at(S_PUSHED, size);
}

WL_SITE CUdeviceptr ctx_site_v1ctx(size_t size)
{
	return alloc_at(S_V1CTX, size);
}

WL_SITE CUdeviceptr ctx_site_v3(size_t size)
{
	return alloc_at(S_V3, size);
}

WL_SITE CUdeviceptr ctx_site_v4(size_t size)
{
	return alloc_at(S_V4, size);
}

WL_SITE CUdeviceptr ctx_site_after_reset(size_t size)
{
	return alloc_at(S_AFTER_RESET, size);
}

WL_SITE void *ctx_site_primary_host(size_t size)
{
	void *p = NULL;

	wl_check(cuMemHostAlloc(&p, size, 0), "cuMemHostAlloc");
	wl_site_alloc(&sites[S_PRIMARY_HOST], size);
	return p;
}

WL_SITE CUarray ctx_site_created_array(void)
{
	CUDA_ARRAY_DESCRIPTOR d = { .Width = 64, .Height = 64, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
				    .NumChannels = 1 };
	CUarray a = NULL;

	wl_check(cuArrayCreate_v2(&a, &d), "cuArrayCreate_v2");
	wl_site_alloc(&sites[S_CREATED_ARRAY], 64 * 64);
	return a;
}

WL_SITE CUmemGenericAllocationHandle ctx_site_vmm(size_t size)
{
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h = 0;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 1;
	wl_check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
	wl_site_alloc(&sites[S_VMM], size);
	return h;
}

static void expect_current(CUcontext want, const char *when)
{
	CUcontext cur = NULL;

	wl_check(cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
	if (cur != want)
		wl_die("%s: current context is %p, expected %p", when, (void *)cur, (void *)want);
}

/* Device 1 context from cuCtxCreate_v2; popped at the end, P0 current again. */
WL_FRAME static CUcontext use_created(CUcontext p0, size_t s)
{
	CUcontext c1 = NULL, popped = NULL;

	wl_check(cuCtxCreate_v2(&c1, 0, 1), "cuCtxCreate_v2");
	expect_current(c1, "after cuCtxCreate_v2");
	ctx_site_created(2 * s);
	wl_check(cuMemFree_v2(ctx_site_created(2 * s)), "cuMemFree_v2");
	wl_site_free(&sites[S_CREATED], 2 * s);
	ctx_site_created_array();
	ctx_site_vmm(2 * WL_MIB);
	wl_check(cuCtxPopCurrent_v2(&popped), "cuCtxPopCurrent_v2");
	if (popped != c1)
		wl_die("cuCtxPopCurrent_v2 popped %p, expected %p", (void *)popped, (void *)c1);
	expect_current(p0, "after cuCtxPopCurrent_v2");

	wl_check(cuCtxPushCurrent(c1), "cuCtxPushCurrent");
	ctx_site_pushed(s);
	wl_check(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
	expect_current(p0, "after cuCtxPopCurrent");
	return c1;
}

/* cuCtxCreate + cuCtxDestroy of the current context; _v3 and _v4 contexts kept. */
WL_FRAME static void use_other_versions(CUcontext p0, size_t s)
{
	CUctxCreateParams params = { NULL, 0, NULL };
	CUcontext c2 = NULL, c3 = NULL, c4 = NULL;

	wl_check(cuCtxCreate(&c2, 0, 0), "cuCtxCreate");
	ctx_site_v1ctx(s);
	wl_check(cuCtxDestroy(c2), "cuCtxDestroy");
	wl_site_drop(&sites[S_V1CTX], s);
	expect_current(p0, "after cuCtxDestroy of the current context");

	wl_check(cuCtxCreate_v3(&c3, NULL, 0, 0, 1), "cuCtxCreate_v3");
	ctx_site_v3(s / 4);
	wl_check(cuCtxPopCurrent_v2(NULL), "cuCtxPopCurrent_v2");
	wl_check(cuCtxCreate_v4(&c4, &params, 0, 0), "cuCtxCreate_v4");
	ctx_site_v4(s / 4);
	wl_check(cuCtxPopCurrent_v2(NULL), "cuCtxPopCurrent_v2");
	expect_current(p0, "after the _v3 and _v4 contexts");
}

WL_FRAME static void main_phase(CUcontext p0, size_t s)
{
	CUcontext c1, again = NULL;
	CUdeviceptr p = 0;

	ctx_site_primary(s);
	ctx_site_primary(s);
	ctx_site_primary_host(s / 2);
	c1 = use_created(p0, s);
	use_other_versions(p0, s);

	wl_check(cuCtxDestroy_v2(c1), "cuCtxDestroy_v2");
	wl_site_drop(&sites[S_CREATED], 2 * s);
	wl_site_drop(&sites[S_CREATED_ARRAY], 64 * 64);
	wl_site_drop(&sites[S_PUSHED], s);

	wl_check(cuDevicePrimaryCtxReset(0), "cuDevicePrimaryCtxReset");
	wl_site_drop(&sites[S_PRIMARY], s);
	wl_site_drop(&sites[S_PRIMARY], s);
	wl_site_drop(&sites[S_PRIMARY_HOST], s / 2);
	wl_check_rc(cuMemAlloc_v2(&p, s), CUDA_ERROR_INVALID_CONTEXT,
		    "cuMemAlloc_v2 on a reset primary context");
	wl_expect.other_failures = 1;

	wl_check(cuDevicePrimaryCtxRetain(&again, 0), "cuDevicePrimaryCtxRetain");
	if (again != p0)
		wl_die("primary context changed across reset: %p, was %p", (void *)again,
		       (void *)p0);
	wl_check(cuCtxSetCurrent(again), "cuCtxSetCurrent");
	ctx_site_after_reset(s);
	wl_check(cuDevicePrimaryCtxReset_v2(1), "cuDevicePrimaryCtxReset_v2");
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };
	CUcontext p0;

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (o.size < 4)
		wl_die("--size must be at least 4");
	p0 = wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	main_phase(p0, o.size);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
