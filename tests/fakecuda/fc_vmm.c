// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fc_vmm.c - virtual memory management and inter-process memory of the stand-in.
 *
 * It owns address reservations (address space, never memory), allocation
 * handles counted by references (cuMemCreate 1, cuMemRetainAllocationHandle +1,
 * each cuMemMap +1, cuMemRelease -1, cuMemUnmap -1: the memory is freed when
 * the count reaches 0), mappings, shareable handles (fake file descriptors) and
 * IPC handles. Imported memory (cuMemImportFromShareableHandle,
 * cuIpcOpenMemHandle*) is another process's: it is charged to nobody. Handles
 * belong to no context; IPC mappings belong to the context current when opened.
 */
#include <string.h>
#include <unistd.h>

#include "fc_internal.h"

#define FC_IPC_MAGIC "fakecuda-ipc"

/* What a CUipcMemHandle carries here. */
struct fc_ipc {
	char magic[16];
	int32_t pid;
	uint32_t pad;
	uint64_t dptr;
	uint64_t size;
};

_Static_assert(sizeof(struct fc_ipc) <= sizeof(CUipcMemHandle), "IPC handle too small");

/* The reservation or mapping (kind) that contains [va, va + size), NULL if none. */
static struct fc_rec *range_of(int kind, uint64_t va, uint64_t size)
{
	struct fc_rec *r;

	for (r = fc.ranges; r; r = r->rnext) {
		if (r->kind == kind && va >= r->key && va - r->key < r->size &&
		    size <= r->size - (va - r->key))
			return r;
	}
	return NULL;
}

/* Whether [va, va + size) overlaps a mapping. */
static int overlaps_mapping(uint64_t va, uint64_t size)
{
	struct fc_rec *r;

	for (r = fc.ranges; r; r = r->rnext) {
		if (r->kind == FC_K_MAPPING && va < r->key + r->size && r->key < va + size)
			return 1;
	}
	return 0;
}

FC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				       CUdeviceptr addr, unsigned long long flags)
{
	uint64_t va = 0, align = alignment > FC_VA_ALIGN ? alignment : FC_VA_ALIGN;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!ptr || !size || flags || (align & (align - 1)))
		goto cleanup;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	va = fc_bump(&fc.next_va, size, align, FC_BASE_DPTR);
	if (!va || !fc_insert(FC_K_VA, va, size, FC_CLS_ADDRESS, NULL))
		goto cleanup;
	*ptr = va;
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "size=%zu align=%zu hint=0x%llx -> 0x%llx", size, alignment, addr,
		 (unsigned long long)va);
	return rc;
}

/* Frees a whole reservation, which must hold no mapping. */
FC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct fc_rec *r;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	r = fc_find(FC_K_VA, ptr);
	if (!r || r->size != size || overlaps_mapping(ptr, size))
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		fc_remove(r, FC_QUIET);
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "0x%llx size=%zu", ptr, size);
	return rc;
}

static CUresult location_class(const CUmemAllocationProp *prop, int *cls)
{
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	switch (prop->location.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		if (prop->location.id < 0 || prop->location.id >= fc.ndevices)
			return CUDA_ERROR_INVALID_DEVICE;
		*cls = FAKECUDA_DEVICE;
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		*cls = FAKECUDA_HOST_PINNED;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* A new handle with one reference, a released one's value first (lock held). */
static struct fc_rec *new_handle(uint64_t size, int cls)
{
	uint64_t key = fc_reuse(FC_POOL_HANDLE, 0, NULL);
	struct fc_rec *r;

	r = fc_insert(FC_K_HANDLE, key ? key : fc.next_handle, size, cls, NULL);
	if (r) {
		r->refs = 1;
		if (!key)
			fc.next_handle++;
	}
	return r;
}

FC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct fc_rec *r = NULL;
	int cls = FAKECUDA_DEVICE;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!handle || !size || !prop || flags)
		goto cleanup;
	rc = location_class(prop, &cls);
	if (!rc)
		rc = fc_over_capacity(cls, size);
	if (rc)
		goto cleanup;
	r = new_handle(size, cls);
	if (r && cls == FAKECUDA_DEVICE)
		fc_set_dev(r, prop->location.id);
	if (r)
		*handle = r->key;
	else
		rc = CUDA_ERROR_OUT_OF_MEMORY;
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(__func__, rc, "size=%zu cls=%d -> 0x%llx", size, cls,
		 r ? (unsigned long long)r->key : 0ULL);
	return rc;
}

/* Drops one reference (lock held); the last one frees the memory. */
static void unref(struct fc_rec *h)
{
	if (!--h->refs)
		fc_remove(h, FC_FREED);
}

FC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct fc_rec *r;
	int refs = 0;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	r = fc_find(FC_K_HANDLE, handle);
	if (!r) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto cleanup;
	}
	refs = r->refs - 1;
	unref(r);
cleanup:
	if (rc)
		fc_count_free_failure();
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(__func__, rc, "0x%llx refs=%d", handle, refs);
	return rc;
}

FC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct fc_rec *h, *m;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	h = fc_find(FC_K_HANDLE, handle);
	if (!h || !size || flags || offset > h->size || size > h->size - offset)
		goto cleanup;
	if (!range_of(FC_K_VA, ptr, size) || overlaps_mapping(ptr, size))
		goto cleanup;
	m = fc_insert(FC_K_MAPPING, ptr, size, FC_CLS_NONE, NULL);
	if (!m) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto cleanup;
	}
	m->handle = h;
	h->refs++;
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "0x%llx size=%zu offset=%zu handle=0x%llx", ptr, size, offset,
		 handle);
	return rc;
}

/* Unmaps [ptr, ptr + size), which must be exactly a run of whole mappings starting at ptr. */
FC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	uint64_t va, step, end = ptr + size;
	struct fc_rec *m, *h;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!size || end < ptr)
		goto cleanup;
	for (va = ptr; va < end; va += m->size) {
		m = fc_find(FC_K_MAPPING, va);
		if (!m || m->size > end - va)
			goto cleanup;
	}
	for (va = ptr; va < end; va += step) {
		m = fc_find(FC_K_MAPPING, va);
		h = m->handle;
		step = m->size;
		fc_remove(m, FC_QUIET);
		unref(h);
	}
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_return_delay();
	fc_trace(__func__, rc, "0x%llx size=%zu", ptr, size);
	return rc;
}

FC_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct fc_rec *m = NULL;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	m = handle ? range_of(FC_K_MAPPING, (uint64_t)(uintptr_t)addr, 1) : NULL;
	if (!m) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto cleanup;
	}
	m->handle->refs++;
	*handle = m->handle->key;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "%p -> 0x%llx", addr, m ? (unsigned long long)m->handle->key : 0ULL);
	return rc;
}

/* Writes a fake file descriptor naming the handle to *(int *)shareable. */
FC_EXPORT CUresult cuMemExportToShareableHandle(void *shareable,
						CUmemGenericAllocationHandle handle,
						int handle_type, unsigned long long flags)
{
	struct fc_rec *h, *e;
	int fd = -1;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	h = fc_find(FC_K_HANDLE, handle);
	if (!h || !shareable || flags || handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		goto cleanup;
	e = fc_insert(FC_K_EXPORT, (uint64_t)fc.next_fd, h->size, FC_CLS_NONE, NULL);
	if (!e) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto cleanup;
	}
	e->link = h->key;
	fd = fc.next_fd++;
	*(int *)shareable = fd;
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "0x%llx -> fd %d", handle, fd);
	return rc;
}

/* A new handle on the exported memory: one reference, charged to nobody. */
FC_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
						  void *os_handle, int handle_type)
{
	struct fc_rec *e, *h = NULL;
	int fd = (int)(intptr_t)os_handle;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	e = fc_find(FC_K_EXPORT, (uint64_t)fd);
	if (!e || !handle || handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		goto cleanup;
	h = new_handle(e->size, FC_CLS_IMPORTED);
	if (!h) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto cleanup;
	}
	*handle = h->key;
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "fd %d -> 0x%llx", fd, h ? (unsigned long long)h->key : 0ULL);
	return rc;
}

FC_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
	struct fc_ipc ipc;
	struct fc_rec *r;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	if (!fc_need_ctx(&rc))
		goto cleanup;
	r = fc_find(FC_K_DPTR, dptr);
	if (!r || !handle || r->cls != FAKECUDA_DEVICE) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto cleanup;
	}
	memset(&ipc, 0, sizeof(ipc));
	memcpy(ipc.magic, FC_IPC_MAGIC, sizeof(FC_IPC_MAGIC));
	ipc.pid = (int32_t)getpid();
	ipc.dptr = dptr;
	ipc.size = r->size;
	memset(handle, 0, sizeof(*handle));
	memcpy(handle->reserved, &ipc, sizeof(ipc));
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "0x%llx", dptr);
	return rc;
}

/* Maps the exporter's allocation at a new address; only this process's handles open. */
static CUresult ipc_open(const char *api, CUdeviceptr *dptr, const CUipcMemHandle *handle,
			 unsigned int flags)
{
	struct fc_ctx *ctx;
	struct fc_ipc ipc;
	uint64_t addr = 0;
	CUresult rc;

	memcpy(&ipc, handle->reserved, sizeof(ipc));
	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (!ctx)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!dptr || flags > 1 || memcmp(ipc.magic, FC_IPC_MAGIC, sizeof(FC_IPC_MAGIC)) ||
	    ipc.pid != (int32_t)getpid() || !fc_find(FC_K_DPTR, ipc.dptr))
		goto cleanup;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	addr = fc_bump(&fc.next_dptr, ipc.size, FC_ALIGN, FC_BASE_DPTR << 1);
	if (!addr || !fc_insert(FC_K_IPC, addr, ipc.size, FC_CLS_IMPORTED, ctx))
		goto cleanup;
	*dptr = addr;
	rc = CUDA_SUCCESS;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "0x%llx -> 0x%llx", (unsigned long long)ipc.dptr,
		 (unsigned long long)addr);
	return rc;
}

FC_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags)
{
	return ipc_open(__func__, dptr, &handle, flags);
}

FC_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, CUipcMemHandle handle,
					 unsigned int flags)
{
	return ipc_open(__func__, dptr, &handle, flags);
}

FC_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	if (!fc_need_ctx(&rc))
		goto cleanup;
	if (!fc_free_key(FC_K_IPC, dptr))
		rc = CUDA_ERROR_INVALID_VALUE;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "0x%llx", dptr);
	return rc;
}
