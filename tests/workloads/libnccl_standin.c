// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnccl_standin.c - a stand-in for a library outside PyTorch's allocator
 * that asks the CUDA driver for its own buffers (NCCL's communicator buffers
 * are the usual case). Built as libnccl.so.2, so that gpuleak groups what it
 * allocates under "nccl" from the stack's frames.
 *
 * Besides nccl_standin_buffers(), a communicator as NCCL 2.x builds one with
 * cuMem* (NCCL_CUMEM_ENABLE, the default since 2.19): ncclCommInitRank() on
 * the current context's device reserves address space, creates and maps
 * NCCL_STANDIN_BUFFERS handles of $NCCL_STANDIN_BUFFSIZE bytes (default 4 MiB,
 * as NCCL_BUFFSIZE) and one cuMemAlloc_v2 of NCCL_STANDIN_DEVCOMM bytes;
 * ncclCommDestroy() frees them as NCCL does: Retain -> Release -> Unmap ->
 * Release per handle, then cuMemFree_v2. Signatures are NCCL's (ncclUniqueId
 * is 128 bytes, passed by value); no NCCL header is used.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))

#define NCCL_STANDIN_BUFFERS 3
#define NCCL_STANDIN_DEVCOMM (64ULL << 10)

typedef struct {
	char internal[128];
} ncclUniqueId;

struct ncclComm {
	int nranks, rank, dev;
	uint64_t id_hash;
	CUdeviceptr va, devcomm;
	size_t buffsize;
	CUmemGenericAllocationHandle h[NCCL_STANDIN_BUFFERS];
};
typedef struct ncclComm *ncclComm_t;

enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInvalidArgument = 4 };

/* Allocates n buffers of size bytes; returns 0 or the driver's error. */
EXPORT __attribute__((noinline)) int nccl_standin_buffers(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		CUdeviceptr p;
		int rc = cuMemAlloc_v2(&p, size);

		if (rc)
			return rc;
	}
	return 0;
}

EXPORT int ncclGetUniqueId(ncclUniqueId *id)
{
	uint64_t v[2] = { (uint64_t)getpid(), (uint64_t)(uintptr_t)id };

	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, v, sizeof(v));
	return ncclSuccess;
}

/* What one communicator holds on its device: the bytes ncclCommInitRank() allocates. */
EXPORT size_t nccl_standin_comm_bytes(void)
{
	const char *e = getenv("NCCL_STANDIN_BUFFSIZE");
	size_t b = e ? strtoull(e, NULL, 0) : 0;

	return NCCL_STANDIN_BUFFERS * (b ? b : 4ULL << 20) + NCCL_STANDIN_DEVCOMM;
}

static __attribute__((noinline)) int comm_alloc(struct ncclComm *c)
{
	CUmemAllocationProp prop = { 0 };

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = c->dev;
	if (cuMemAddressReserve(&c->va, NCCL_STANDIN_BUFFERS * c->buffsize, 0, 0, 0))
		return ncclUnhandledCudaError;
	for (int i = 0; i < NCCL_STANDIN_BUFFERS; i++) {
		if (cuMemCreate(&c->h[i], c->buffsize, &prop, 0) ||
		    cuMemMap(c->va + i * c->buffsize, c->buffsize, 0, c->h[i], 0))
			return ncclUnhandledCudaError;
	}
	return cuMemAlloc_v2(&c->devcomm, NCCL_STANDIN_DEVCOMM) ? ncclUnhandledCudaError :
								   ncclSuccess;
}

EXPORT __attribute__((noinline)) int ncclCommInitRank(ncclComm_t *comm, int nranks,
						      ncclUniqueId id, int rank)
{
	struct ncclComm *c;
	CUdevice dev;

	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	if (cuCtxGetDevice(&dev))
		return ncclUnhandledCudaError;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->nranks = nranks;
	c->rank = rank;
	c->dev = dev;
	memcpy(&c->id_hash, id.internal, sizeof(c->id_hash));
	c->buffsize = (nccl_standin_comm_bytes() - NCCL_STANDIN_DEVCOMM) / NCCL_STANDIN_BUFFERS;
	if (comm_alloc(c)) {
		free(c);
		return ncclUnhandledCudaError;
	}
	*comm = c;
	return ncclSuccess;
}

EXPORT __attribute__((noinline)) int ncclCommDestroy(ncclComm_t c)
{
	int rc = ncclSuccess;

	if (!c)
		return ncclInvalidArgument;
	for (int i = 0; i < NCCL_STANDIN_BUFFERS; i++) {
		CUdeviceptr va = c->va + i * c->buffsize;
		CUmemGenericAllocationHandle r = 0;

		/* NCCL's order: the handle found again from the address, released twice */
		if (cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va) || cuMemRelease(r) ||
		    cuMemUnmap(va, c->buffsize) || cuMemRelease(c->h[i]))
			rc = ncclUnhandledCudaError;
	}
	if (cuMemAddressFree(c->va, NCCL_STANDIN_BUFFERS * c->buffsize) ||
	    cuMemFree_v2(c->devcomm))
		rc = ncclUnhandledCudaError;
	free(c);
	return rc;
}
