// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fc_mem.c - linear memory of the stand-in: device, pitched, managed and
 * stream-ordered allocations, pinned host memory and host registration.
 *
 * Device pointers are fake addresses from a bump range (a low one below 4 GiB
 * for the legacy v1 calls); pinned host memory is real, page-aligned memory.
 * Every allocation belongs to the calling thread's current context, which must
 * be alive (host registration excepted: it belongs to the current context if
 * there is one).
 */
#include <stdlib.h>

#include "fc_internal.h"

#define FC_V1 1
#define FC_V2 0
#define FC_PAGE 4096
#define FC_HOSTALLOC_FLAGS 0x7U /* PORTABLE | DEVICEMAP | WRITECOMBINED */
#define FC_HOSTREG_FLAGS 0xfU	/* PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY */
#define FC_STREAM_LEGACY ((CUstream)0x1)
#define FC_STREAM_PER_THREAD ((CUstream)0x2)

/* Address of the default pool of device i: &pools[i]. */
static char pools[FC_MAX_DEVICES];

static CUresult need_stream(CUstream s)
{
	if (!s || s == FC_STREAM_LEGACY || s == FC_STREAM_PER_THREAD)
		return CUDA_SUCCESS;
	if (fc_find(FC_K_STREAM, (uint64_t)(uintptr_t)s))
		return CUDA_SUCCESS;
	return CUDA_ERROR_INVALID_HANDLE;
}

static CUresult need_pool(CUmemoryPool pool)
{
	const char *p = (const char *)pool;

	if (p >= pools && p < pools + fc.ndevices)
		return CUDA_SUCCESS;
	return CUDA_ERROR_INVALID_HANDLE;
}

/* A device pointer of size bytes for ctx (lock held). */
static CUresult add_dptr(CUdeviceptr *out, uint64_t size, int cls, int v1, struct fc_ctx *ctx)
{
	uint64_t addr;
	CUresult rc;

	rc = fc_over_capacity(cls, size);
	if (rc)
		return rc;
	addr = fc_reuse(v1 ? FC_POOL_DPTR_V1 : FC_POOL_DPTR, size, NULL);
	if (!addr && v1)
		addr = fc_bump(&fc.next_dptr_v1, size, FC_ALIGN, FC_LIMIT_DPTR_V1);
	else if (!addr)
		addr = fc_bump(&fc.next_dptr, size, FC_ALIGN, FC_BASE_DPTR << 1);
	if (!addr || !fc_insert(FC_K_DPTR, addr, size, cls, ctx))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = addr;
	return CUDA_SUCCESS;
}

/*
 * cuMemAlloc*, cuMemAllocManaged, cuMemAlloc*Async: out may be NULL (then 1).
 * stream and pool are checked when check_stream/pool say so.
 */
static CUresult alloc_dptr(const char *api, CUdeviceptr *out, uint64_t size, int cls, int v1,
			   int check_stream, CUstream stream, int check_pool, CUmemoryPool pool)
{
	struct fc_ctx *ctx;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (!ctx)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!out || !size || (check_pool && !pool))
		goto cleanup;
	rc = check_stream ? need_stream(stream) : CUDA_SUCCESS;
	if (!rc && check_pool)
		rc = need_pool(pool);
	if (!rc)
		rc = add_dptr(out, size, cls, v1, ctx);
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(api, rc, "size=%llu -> 0x%llx", (unsigned long long)size,
		 out && !rc ? (unsigned long long)*out : 0ULL);
	return rc;
}

FC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	CUdeviceptr addr = 0;
	CUresult rc;

	rc = alloc_dptr(__func__, dptr ? &addr : NULL, bytesize, FAKECUDA_DEVICE, FC_V1, 0, NULL,
			0, NULL);
	if (!rc)
		*dptr = (CUdeviceptr_v1)addr;
	return rc;
}

static void (*volatile alloc_hook)(size_t size);

FC_EXPORT void fakecuda_set_alloc_hook(void (*hook)(size_t size))
{
	alloc_hook = hook;
}

FC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	void (*hook)(size_t) = alloc_hook;

	/* a test's code running inside the driver call: it may recurse, longjmp,
	 * exit its thread or block, as callbacks into user code can */
	if (hook)
		hook(bytesize);
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_DEVICE, FC_V2, 0, NULL, 0, NULL);
}

FC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		bytesize = 0; /* refused as an invalid value, and counted as a failure */
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_MANAGED, FC_V2, 0, NULL, 0, NULL);
}

FC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_DEVICE, FC_V2, 1, stream, 0, NULL);
}

FC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_DEVICE, FC_V2, 1, stream, 0, NULL);
}

FC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					   CUstream stream)
{
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_DEVICE, FC_V2, 1, stream, 1, pool);
}

FC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						CUmemoryPool pool, CUstream stream)
{
	return alloc_dptr(__func__, dptr, bytesize, FAKECUDA_DEVICE, FC_V2, 1, stream, 1, pool);
}

/* pitch = width rounded up to 512, size = pitch * height; elem_size is 4, 8 or 16. */
static CUresult alloc_pitch(const char *api, CUdeviceptr *out, uint64_t *pitch, uint64_t width,
			    uint64_t height, unsigned int elem_size, int v1)
{
	uint64_t p = 0, size = 0;
	struct fc_ctx *ctx;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (!ctx)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!out || !pitch || !width || !height)
		goto cleanup;
	if (elem_size != 4 && elem_size != 8 && elem_size != 16)
		goto cleanup;
	p = (width + FC_ALIGN - 1) & ~(FC_ALIGN - 1);
	if (p < width || __builtin_mul_overflow(p, height, &size) || (v1 && p > UINT32_MAX))
		goto cleanup;
	rc = add_dptr(out, size, FAKECUDA_DEVICE, v1, ctx);
	if (!rc)
		*pitch = p;
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "w=%llu h=%llu elem=%u pitch=%llu size=%llu -> 0x%llx",
		 (unsigned long long)width, (unsigned long long)height, elem_size,
		 (unsigned long long)p, (unsigned long long)size,
		 out && !rc ? (unsigned long long)*out : 0ULL);
	return rc;
}

FC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
				   unsigned int height, unsigned int elem_size)
{
	CUdeviceptr addr = 0;
	uint64_t p = 0;
	CUresult rc;

	rc = alloc_pitch(__func__, dptr ? &addr : NULL, pitch ? &p : NULL, width, height,
			 elem_size, FC_V1);
	if (!rc) {
		*dptr = (CUdeviceptr_v1)addr;
		*pitch = (unsigned int)p;
	}
	return rc;
}

FC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
				      size_t height, unsigned int elem_size)
{
	uint64_t p = 0;
	CUresult rc;

	rc = alloc_pitch(__func__, dptr, pitch ? &p : NULL, width, height, elem_size, FC_V2);
	if (!rc)
		*pitch = p;
	return rc;
}

/* cuMemFree*: 0 is not a free; an unknown or freed pointer is refused with 1. */
static CUresult free_dptr(const char *api, uint64_t key, int check_stream, CUstream stream)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc || !key)
		goto cleanup;
	if (!fc_need_ctx(&rc))
		goto cleanup;
	rc = check_stream ? need_stream(stream) : CUDA_SUCCESS;
	if (rc)
		goto cleanup;
	if (!fc_free_key(FC_K_DPTR, key))
		rc = CUDA_ERROR_INVALID_VALUE;
cleanup:
	if (rc)
		fc_count_free_failure();
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(api, rc, "0x%llx", (unsigned long long)key);
	return rc;
}

FC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	return free_dptr(__func__, dptr, 0, NULL);
}

FC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	return free_dptr(__func__, dptr, 0, NULL);
}

FC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
	return free_dptr(__func__, dptr, 1, stream);
}

FC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
	return free_dptr(__func__, dptr, 1, stream);
}

/* cuMemHostAlloc, cuMemAllocHost*: real page-aligned memory the caller may touch. */
static CUresult host_alloc(const char *api, void **pp, uint64_t size, unsigned int flags)
{
	struct fc_ctx *ctx;
	struct fc_rec *r;
	void *mem = NULL;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (!ctx)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!pp || !size || (flags & ~FC_HOSTALLOC_FLAGS) || size > SIZE_MAX)
		goto cleanup;
	rc = fc_over_capacity(FAKECUDA_HOST_PINNED, size);
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (!fc_reuse(FC_POOL_HOST, size, &mem) && posix_memalign(&mem, FC_PAGE, size)) {
		mem = NULL;
		goto cleanup;
	}
	r = fc_insert(FC_K_HOST, (uint64_t)(uintptr_t)mem, size, FAKECUDA_HOST_PINNED, ctx);
	if (!r) {
		free(mem);
		mem = NULL;
		goto cleanup;
	}
	r->host = mem;
	*pp = mem;
	rc = CUDA_SUCCESS;
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(api, rc, "size=%llu flags=0x%x -> %p", (unsigned long long)size, flags, mem);
	return rc;
}

FC_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	return host_alloc(__func__, pp, bytesize, flags);
}

FC_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	return host_alloc(__func__, pp, bytesize, 0);
}

FC_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return host_alloc(__func__, pp, bytesize, 0);
}

FC_EXPORT CUresult cuMemFreeHost(void *p)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	if (!fc_need_ctx(&rc))
		goto cleanup;
	if (!p || !fc_free_key(FC_K_HOST, (uint64_t)(uintptr_t)p))
		rc = CUDA_ERROR_INVALID_VALUE;
cleanup:
	if (rc)
		fc_count_free_failure();
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(__func__, rc, "%p", p);
	return rc;
}

/* cuMemHostRegister*: pins the caller's memory; the key is p, registered once. */
static CUresult host_register(const char *api, void *p, uint64_t size, unsigned int flags)
{
	struct fc_ctx *ctx;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!p || !size || (flags & ~FC_HOSTREG_FLAGS))
		goto cleanup;
	if (fc_find(FC_K_HOSTREG, (uint64_t)(uintptr_t)p))
		goto cleanup;
	rc = fc_over_capacity(FAKECUDA_HOST_PINNED, size);
	if (rc)
		goto cleanup;
	ctx = fc_current();
	if (ctx && !ctx->alive)
		ctx = NULL;
	if (!fc_insert(FC_K_HOSTREG, (uint64_t)(uintptr_t)p, size, FAKECUDA_HOST_PINNED, ctx))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "%p size=%llu flags=0x%x", p, (unsigned long long)size, flags);
	return rc;
}

FC_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)
{
	return host_register(__func__, p, bytesize, flags);
}

FC_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
	return host_register(__func__, p, bytesize, flags);
}

FC_EXPORT CUresult cuMemHostUnregister(void *p)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	if (!p || !fc_free_key(FC_K_HOSTREG, (uint64_t)(uintptr_t)p))
		rc = CUDA_ERROR_INVALID_VALUE;
cleanup:
	if (rc)
		fc_count_free_failure();
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "%p", p);
	return rc;
}

FC_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	uint64_t used;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	if (fc_need_ctx(&rc) && (!free_bytes || !total_bytes))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc) {
		used = fc.t.total_bytes[FAKECUDA_DEVICE] + fc.t.total_bytes[FAKECUDA_MANAGED];
		*total_bytes = fc.capacity;
		*free_bytes = used < fc.capacity ? fc.capacity - used : 0;
	}
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

FC_EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	struct fc_ctx *ctx;
	uint64_t addr = 0;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (ctx && (!stream || flags > 1))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc)
		goto cleanup;
	addr = fc_bump(&fc.next_obj, 64, 64, FC_BASE_VA);
	if (!addr || !fc_insert(FC_K_STREAM, addr, 0, FC_CLS_NONE, ctx))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else
		*stream = (CUstream)(uintptr_t)addr;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "-> 0x%llx", (unsigned long long)addr);
	return rc;
}

FC_EXPORT CUresult cuStreamDestroy_v2(CUstream stream)
{
	struct fc_rec *r = NULL;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc)
		r = fc_find(FC_K_STREAM, (uint64_t)(uintptr_t)stream);
	if (r)
		fc_remove(r, FC_QUIET);
	else if (!rc)
		rc = CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "%p", (void *)stream);
	return rc;
}

FC_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && (dev < 0 || dev >= fc.ndevices))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (!rc && !pool)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc)
		*pool = (CUmemoryPool)&pools[dev];
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

/* Pools hold no memory of their own here: allocations are booked as they are made. */
FC_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep_bytes)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc)
		rc = need_pool(pool);
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "%p keep=%zu", (void *)pool, keep_bytes);
	return rc;
}
