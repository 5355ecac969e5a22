// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_basic.c - every allocation family of the driver once or twice: v1 and v2
 * linear memory, pitched, managed, stream-ordered (+_ptsz), pool (+_ptsz),
 * pinned host memory, host registration, arrays and mipmapped arrays. Each
 * family frees one allocation and leaves one outstanding at its site;
 * cuMemFree_v2(0) frees nothing.
 *
 * Options: --size BYTES (base size, default 1 MiB).
 */
#include <stdlib.h>
#include <string.h>

#include "wl.h"

enum {
	S_ALLOC_V2,
	S_ALLOC_V1,
	S_PITCH_V1,
	S_PITCH_V2,
	S_MANAGED,
	S_ASYNC,
	S_ASYNC_PTSZ,
	S_POOL,
	S_POOL_PTSZ,
	S_HOST_ALLOC,
	S_ALLOC_HOST_V1,
	S_ALLOC_HOST_V2,
	S_REGISTER_V1,
	S_REGISTER_V2,
	S_ARRAY,
	S_ARRAY3D,
	S_MIPMAP,
};

static struct wl_site sites[] = {
	[S_ALLOC_V2] = { "basic_site_alloc_v2", FAKECUDA_DEVICE, 0, 0 },
	[S_ALLOC_V1] = { "basic_site_alloc_v1", FAKECUDA_DEVICE, 0, 0 },
	[S_PITCH_V1] = { "basic_site_pitch_v1", FAKECUDA_DEVICE, 0, 0 },
	[S_PITCH_V2] = { "basic_site_pitch_v2", FAKECUDA_DEVICE, 0, 0 },
	[S_MANAGED] = { "basic_site_managed", FAKECUDA_MANAGED, 0, 0 },
	[S_ASYNC] = { "basic_site_async", FAKECUDA_DEVICE, 0, 0 },
	[S_ASYNC_PTSZ] = { "basic_site_async_ptsz", FAKECUDA_DEVICE, 0, 0 },
	[S_POOL] = { "basic_site_pool", FAKECUDA_DEVICE, 0, 0 },
	[S_POOL_PTSZ] = { "basic_site_pool_ptsz", FAKECUDA_DEVICE, 0, 0 },
	[S_HOST_ALLOC] = { "basic_site_host_alloc", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_ALLOC_HOST_V1] = { "basic_site_alloc_host_v1", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_ALLOC_HOST_V2] = { "basic_site_alloc_host_v2", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_REGISTER_V1] = { "basic_site_register_v1", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_REGISTER_V2] = { "basic_site_register_v2", FAKECUDA_HOST_PINNED, 0, 0 },
	[S_ARRAY] = { "basic_site_array", FAKECUDA_DEVICE, 0, 0 },
	[S_ARRAY3D] = { "basic_site_array3d", FAKECUDA_DEVICE, 0, 0 },
	[S_MIPMAP] = { "basic_site_mipmap", FAKECUDA_DEVICE, 0, 0 },
};

WL_SITE CUdeviceptr basic_site_alloc_v2(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_ALLOC_V2], size);
	return p;
}

WL_SITE CUdeviceptr_v1 basic_site_alloc_v1(unsigned int size)
{
	CUdeviceptr_v1 p = 0;

	wl_check(cuMemAlloc(&p, size), "cuMemAlloc");
	wl_site_alloc(&sites[S_ALLOC_V1], size);
	return p;
}

WL_SITE CUdeviceptr_v1 basic_site_pitch_v1(unsigned int width, unsigned int height,
					   unsigned int *size)
{
	CUdeviceptr_v1 p = 0;
	unsigned int pitch = 0;

	wl_check(cuMemAllocPitch(&p, &pitch, width, height, 4), "cuMemAllocPitch");
	*size = pitch * height;
	wl_site_alloc(&sites[S_PITCH_V1], *size);
	return p;
}

WL_SITE CUdeviceptr basic_site_pitch_v2(size_t width, size_t height, size_t *size)
{
	CUdeviceptr p = 0;
	size_t pitch = 0;

	wl_check(cuMemAllocPitch_v2(&p, &pitch, width, height, 8), "cuMemAllocPitch_v2");
	*size = pitch * height;
	wl_site_alloc(&sites[S_PITCH_V2], *size);
	return p;
}

WL_SITE CUdeviceptr basic_site_managed(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
	wl_site_alloc(&sites[S_MANAGED], size);
	return p;
}

WL_SITE CUdeviceptr basic_site_async(size_t size, CUstream stream)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocAsync(&p, size, stream), "cuMemAllocAsync");
	wl_site_alloc(&sites[S_ASYNC], size);
	return p;
}

WL_SITE CUdeviceptr basic_site_async_ptsz(size_t size, CUstream stream)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocAsync_ptsz(&p, size, stream), "cuMemAllocAsync_ptsz");
	wl_site_alloc(&sites[S_ASYNC_PTSZ], size);
	return p;
}

WL_SITE CUdeviceptr basic_site_pool(size_t size, CUmemoryPool pool, CUstream stream)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocFromPoolAsync(&p, size, pool, stream), "cuMemAllocFromPoolAsync");
	wl_site_alloc(&sites[S_POOL], size);
	return p;
}

WL_SITE CUdeviceptr basic_site_pool_ptsz(size_t size, CUmemoryPool pool, CUstream stream)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAllocFromPoolAsync_ptsz(&p, size, pool, stream),
		 "cuMemAllocFromPoolAsync_ptsz");
	wl_site_alloc(&sites[S_POOL_PTSZ], size);
	return p;
}

WL_SITE void *basic_site_host_alloc(size_t size)
{
	void *p = NULL;

	wl_check(cuMemHostAlloc(&p, size, 0), "cuMemHostAlloc");
	wl_site_alloc(&sites[S_HOST_ALLOC], size);
	memset(p, 0xa5, size); /* pinned host memory is real */
	return p;
}

WL_SITE void *basic_site_alloc_host_v1(unsigned int size)
{
	void *p = NULL;

	wl_check(cuMemAllocHost(&p, size), "cuMemAllocHost");
	wl_site_alloc(&sites[S_ALLOC_HOST_V1], size);
	memset(p, 0x5a, size);
	return p;
}

WL_SITE void *basic_site_alloc_host_v2(size_t size)
{
	void *p = NULL;

	wl_check(cuMemAllocHost_v2(&p, size), "cuMemAllocHost_v2");
	wl_site_alloc(&sites[S_ALLOC_HOST_V2], size);
	return p;
}

WL_SITE void basic_site_register_v1(void *p, size_t size)
{
	wl_check(cuMemHostRegister(p, size, 0), "cuMemHostRegister");
	wl_site_alloc(&sites[S_REGISTER_V1], size);
}

WL_SITE void basic_site_register_v2(void *p, size_t size)
{
	wl_check(cuMemHostRegister_v2(p, size, 0), "cuMemHostRegister_v2");
	wl_site_alloc(&sites[S_REGISTER_V2], size);
}

/* 2D arrays: Width * Height * element size * channels bytes. */
WL_SITE CUarray basic_site_array(size_t w, size_t h, CUarray_format fmt, unsigned int channels,
				 size_t size)
{
	CUDA_ARRAY_DESCRIPTOR d = {
		.Width = w, .Height = h, .Format = fmt, .NumChannels = channels
	};
	CUarray a = NULL;

	wl_check(cuArrayCreate_v2(&a, &d), "cuArrayCreate_v2");
	wl_site_alloc(&sites[S_ARRAY], size);
	return a;
}

WL_SITE CUarray basic_site_array3d(const CUDA_ARRAY3D_DESCRIPTOR *d, size_t size)
{
	CUarray a = NULL;

	wl_check(cuArray3DCreate_v2(&a, d), "cuArray3DCreate_v2");
	wl_site_alloc(&sites[S_ARRAY3D], size);
	return a;
}

WL_SITE CUmipmappedArray basic_site_mipmap(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels,
					   size_t size)
{
	CUmipmappedArray a = NULL;

	wl_check(cuMipmappedArrayCreate(&a, d, levels), "cuMipmappedArrayCreate");
	wl_site_alloc(&sites[S_MIPMAP], size);
	return a;
}

WL_FRAME static void exercise_linear(size_t s)
{
	CUdeviceptr_v1 v1;
	unsigned int size1;
	size_t size2;

	basic_site_alloc_v2(s);
	wl_check(cuMemFree_v2(basic_site_alloc_v2(2 * s)), "cuMemFree_v2");
	wl_site_free(&sites[S_ALLOC_V2], 2 * s);

	basic_site_alloc_v1(s / 2);
	wl_check(cuMemFree(basic_site_alloc_v1(s / 4)), "cuMemFree");
	wl_site_free(&sites[S_ALLOC_V1], s / 4);

	basic_site_pitch_v1(1000, 16, &size1); /* pitch 1024: 16384 bytes */
	v1 = basic_site_pitch_v1(100, 3, &size1);
	wl_check(cuMemFree(v1), "cuMemFree");
	wl_site_free(&sites[S_PITCH_V1], size1);

	basic_site_pitch_v2(3000, 7, &size2); /* pitch 3072: 21504 bytes */
	wl_check(cuMemFree_v2(basic_site_pitch_v2(513, 2, &size2)), "cuMemFree_v2");
	wl_site_free(&sites[S_PITCH_V2], size2);

	basic_site_managed(s);
	wl_check(cuMemFree_v2(basic_site_managed(s / 2)), "cuMemFree_v2");
	wl_site_free(&sites[S_MANAGED], s / 2);

	wl_check(cuMemFree_v2(0), "cuMemFree_v2(0)");
}

WL_FRAME static void exercise_stream_ordered(size_t s)
{
	CUmemoryPool pool = NULL;
	CUstream stream = NULL;

	wl_check(cuStreamCreate(&stream, 0), "cuStreamCreate");
	wl_check(cuDeviceGetDefaultMemPool(&pool, 0), "cuDeviceGetDefaultMemPool");

	basic_site_async(s, stream);
	wl_check(cuMemFreeAsync(basic_site_async(3 * s, stream), stream), "cuMemFreeAsync");
	wl_site_free(&sites[S_ASYNC], 3 * s);
	wl_check(cuMemFree_v2(basic_site_async(s / 8, NULL)), "cuMemFree_v2");
	wl_site_free(&sites[S_ASYNC], s / 8);

	basic_site_async_ptsz(s / 2, NULL);
	wl_check(cuMemFreeAsync_ptsz(basic_site_async_ptsz(s, stream), stream),
		 "cuMemFreeAsync_ptsz");
	wl_site_free(&sites[S_ASYNC_PTSZ], s);

	basic_site_pool(2 * s, pool, stream);
	wl_check(cuMemFreeAsync(basic_site_pool(s, pool, stream), stream), "cuMemFreeAsync");
	wl_site_free(&sites[S_POOL], s);

	basic_site_pool_ptsz(s / 4, pool, NULL);
	wl_check(cuMemFreeAsync_ptsz(basic_site_pool_ptsz(s, pool, NULL), NULL),
		 "cuMemFreeAsync_ptsz");
	wl_site_free(&sites[S_POOL_PTSZ], s);

	wl_check(cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo");
	wl_check(cuStreamDestroy_v2(stream), "cuStreamDestroy_v2");
}

/* Returns the two registered buffers that stay registered (freed by the caller). */
WL_FRAME static void exercise_host(size_t s, void **keep1, void **keep2)
{
	void *p;

	basic_site_host_alloc(s);
	wl_check(cuMemFreeHost(basic_site_host_alloc(s / 2)), "cuMemFreeHost");
	wl_site_free(&sites[S_HOST_ALLOC], s / 2);

	basic_site_alloc_host_v1(s / 2);
	wl_check(cuMemFreeHost(basic_site_alloc_host_v1(s / 4)), "cuMemFreeHost");
	wl_site_free(&sites[S_ALLOC_HOST_V1], s / 4);

	basic_site_alloc_host_v2(s / 2);
	wl_check(cuMemFreeHost(basic_site_alloc_host_v2(s)), "cuMemFreeHost");
	wl_site_free(&sites[S_ALLOC_HOST_V2], s);

	*keep1 = malloc(s);
	*keep2 = malloc(2 * s);
	p = malloc(s);
	if (!*keep1 || !*keep2 || !p)
		wl_die("out of memory");
	basic_site_register_v1(*keep1, s);
	basic_site_register_v2(*keep2, 2 * s);
	basic_site_register_v2(p, s);
	wl_check(cuMemHostUnregister(p), "cuMemHostUnregister");
	wl_site_free(&sites[S_REGISTER_V2], s);
	free(p);
}

WL_FRAME static void exercise_arrays(void)
{
	CUDA_ARRAY3D_DESCRIPTOR d3 = { 16, 16, 8, CU_AD_FORMAT_HALF, 2, 0 };
	CUDA_ARRAY3D_DESCRIPTOR d1 = { 10, 0, 0, CU_AD_FORMAT_SIGNED_INT32, 1, 0 };
	CUDA_ARRAY3D_DESCRIPTOR m1 = { 64, 64, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0 };
	CUDA_ARRAY3D_DESCRIPTOR m2 = { 8, 2, 0, CU_AD_FORMAT_FLOAT, 1, 0 };

	basic_site_array(64, 32, CU_AD_FORMAT_FLOAT, 4, 64 * 32 * 4 * 4);
	wl_check(cuArrayDestroy(basic_site_array(100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 100)),
		 "cuArrayDestroy");
	wl_site_free(&sites[S_ARRAY], 100);

	basic_site_array3d(&d3, 16 * 16 * 8 * 2 * 2);
	wl_check(cuArrayDestroy(basic_site_array3d(&d1, 40)), "cuArrayDestroy");
	wl_site_free(&sites[S_ARRAY3D], 40);

	/* levels 64x64, 32x32, 16x16, 8x8 of 4 bytes: 16384 + 4096 + 1024 + 256 */
	basic_site_mipmap(&m1, 4, 21760);
	/* levels 8x2, 4x1, 2x1, 1x1 of 4 bytes: 64 + 16 + 8 + 4 */
	wl_check(cuMipmappedArrayDestroy(basic_site_mipmap(&m2, 4, 92)),
		 "cuMipmappedArrayDestroy");
	wl_site_free(&sites[S_MIPMAP], 92);
}

WL_FRAME static void main_phase(size_t s, void **keep1, void **keep2)
{
	exercise_linear(s);
	exercise_stream_ordered(s);
	exercise_host(s, keep1, keep2);
	exercise_arrays();
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };
	void *keep1 = NULL, *keep2 = NULL;

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (o.size < 64)
		wl_die("--size must be at least 64");
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	main_phase(o.size, &keep1, &keep2);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	free(keep1);
	free(keep2);
	return 0;
}
