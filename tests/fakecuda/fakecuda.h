/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * fakecuda.h - the CUDA driver stand-in (libcuda.so.1) used by gpuleak's tests.
 *
 * It owns the subset of the CUDA driver API that the stand-in exports, written
 * from the documented driver ABI (no NVIDIA header is used), and the ground-truth
 * API (fakecuda_*) through which workloads learn what the books should say.
 *
 * Every versioned name (cuMemAlloc and cuMemAlloc_v2, ...) is its own function at
 * its own address, as in the real driver; nothing here is a macro alias.
 *
 * Return codes: 0 success, 1 invalid value (size 0, bad argument, unknown or
 * already freed pointer/handle), 2 out of memory, 3 not initialized (cuInit not
 * called), 101 invalid device, 201 invalid context (no current context, or a
 * destroyed one), 400 invalid handle (unknown stream or pool; cuArrayDestroy and
 * cuMipmappedArrayDestroy of an unknown or destroyed array).
 *
 * Environment, read by cuInit:
 *   FAKECUDA_CAPACITY  bytes of fake device memory (default 64 GiB). Device and
 *                      managed allocations share it; pinned host memory
 *                      (cuMemHostAlloc, cuMemAllocHost*, cuMemHostRegister*,
 *                      cuMemCreate on a host location) has a limit of the same size.
 *   FAKECUDA_DEVICES   number of devices (default 2, at most 64).
 *   FAKECUDA_TRACE     when set to 1, every call is logged to stderr.
 *   FAKECUDA_REUSE     when set to 1, addresses are reused as the real driver reuses
 *                      them: a freed device pointer or pinned host buffer
 *                      (cuMemHostAlloc, cuMemAllocHost*) goes to the next allocation
 *                      of its kind that fits, on any thread, most recently freed
 *                      first (context teardown frees them too); so does the value
 *                      of a freed cuMemCreate handle, to the next cuMemCreate.
 *   FAKECUDA_RETURN_DELAY_US  device and pinned host allocations and frees, and
 *                      cuMemCreate, cuMemRelease and cuMemUnmap, sleep this
 *                      long after their books are done, before they return (the
 *                      real driver's work after its bookkeeping): calls of other
 *                      threads, a context teardown among them, land in between.
 *
 * Size rules (gpuleak computes the same):
 *   cuMemAllocPitch(_v2): pitch = WidthInBytes rounded up to 512, size = pitch * Height.
 *     ElementSizeBytes must be 4, 8 or 16.
 *   Arrays: size = Width * max(Height, 1) * max(Depth, 1) * element size * NumChannels,
 *     element size by Format: 0x01, 0x08 -> 1 byte; 0x02, 0x09, 0x10 -> 2 bytes;
 *     0x03, 0x0a, 0x20 -> 4 bytes. NumChannels is 1, 2 or 4; Width is not 0.
 *   Mipmapped arrays: the sum over levels l = 0 .. numMipmapLevels-1 of the array
 *     size with w = max(Width >> l, 1), h = max(max(Height, 1) >> l, 1),
 *     d = max(max(Depth, 1) >> l, 1); numMipmapLevels is 1 to 32.
 *
 * Books: device pointers are fake addresses (never dereference them), 512-byte
 * aligned, from 0x7e0000000000 upwards (legacy v1 calls: from 0x10000000, fitting
 * 32 bits); addresses are never reused unless FAKECUDA_REUSE=1. Pinned host memory is real memory.
 * Address reservations are 2 MiB aligned from 0x600000000000; cuMemMap must fall
 * inside one and cuMemUnmap must cover whole mappings. Every non-VMM allocation
 * (host registration too, when a context is current) belongs to the context
 * current at the call and is freed by cuCtxDestroy(_v2),
 * cuDevicePrimaryCtxReset(_v2) and the last cuDevicePrimaryCtxRelease(_v2) of
 * that context. VMM handles belong to no context; they are counted by references
 * (create 1, retain +1, each map +1, release -1, unmap -1) and their memory is
 * freed when the count reaches 0. Imported memory (cuIpcOpenMemHandle*,
 * cuMemImportFromShareableHandle) is charged to nobody. After fork() the child
 * starts with empty books and must call cuInit again.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
} CUresult;

typedef int CUdevice;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;

typedef struct CUipcMemHandle_st {
	char reserved[64];
} CUipcMemHandle;

typedef struct CUexecAffinityParam_st {
	int type;
	union {
		struct {
			unsigned int val;
		} smCount;
	} param;
} CUexecAffinityParam;

typedef struct CUctxCreateParams_st {
	CUexecAffinityParam *execAffinityParams;
	int numExecAffinityParams;
	void *cigParams;
} CUctxCreateParams;

enum {
	CU_MEM_ATTACH_GLOBAL = 0x1,
	CU_MEM_ATTACH_HOST = 0x2,
	CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
	CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
	CU_MEM_LOCATION_TYPE_HOST = 0x2,
	CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
	CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
	CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
};

typedef struct CUmemAllocationProp_st {
	int type;		  /* CU_MEM_ALLOCATION_TYPE_PINNED */
	int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_* */
	struct {
		int type; /* CU_MEM_LOCATION_TYPE_* */
		int id;	  /* device ordinal or NUMA node */
	} location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef enum CUarray_format_enum {
	CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
	CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
	CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
	CU_AD_FORMAT_SIGNED_INT8 = 0x08,
	CU_AD_FORMAT_SIGNED_INT16 = 0x09,
	CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
	CU_AD_FORMAT_HALF = 0x10,
	CU_AD_FORMAT_FLOAT = 0x20,
} CUarray_format;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
	size_t Width;
	size_t Height;
	CUarray_format Format;
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
	size_t Width;
	size_t Height;
	size_t Depth;
	CUarray_format Format;
	unsigned int NumChannels;
	unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* Initialization, devices, errors. */
CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int *version);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetCount(int *count);
CUresult cuGetErrorName(CUresult error, const char **name);

/* Contexts. */
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams,
			unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
			CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *dev); /* the current context's; 201 without one */
CUresult cuCtxPushCurrent(CUcontext ctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent(CUcontext *pctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);

/* Linear device memory. */
CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
			 unsigned int height, unsigned int elem_size);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
			    unsigned int elem_size);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemFree(CUdeviceptr_v1 dptr);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);

/* Stream-ordered allocation. */
CUresult cuStreamCreate(CUstream *stream, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep_bytes);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				 CUstream stream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				      CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);

/* Pinned host memory. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags);
CUresult cuMemAllocHost(void **pp, unsigned int bytesize);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags);
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags);
CUresult cuMemHostUnregister(void *p);

/* Virtual memory management. */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
				      int handle_type, unsigned long long flags);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
					int handle_type);

/* Inter-process memory. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr);
CUresult cuIpcOpenMemHandle(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);

/* Arrays. */
CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc);
CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc);
CUresult cuArrayDestroy(CUarray array);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
				unsigned int levels);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray array);

/*
 * Ground truth. Nothing below starts with "cu", so gpuleak never probes it.
 *
 * Classes: device (cuMemAlloc*, pitch, async, pool, arrays, cuMemCreate on a
 * device), managed (cuMemAllocManaged), host pinned (cuMemHostAlloc,
 * cuMemAllocHost*, cuMemHostRegister*, cuMemCreate on a host location).
 * Allocation calls: the functions above that add charged memory (the three
 * classes); free calls: the functions that give it back, counting the
 * cuMemRelease or cuMemUnmap that drops a VMM handle's last reference.
 */
enum fakecuda_class {
	FAKECUDA_DEVICE = 0,
	FAKECUDA_MANAGED = 1,
	FAKECUDA_HOST_PINNED = 2,
	FAKECUDA_NR_CLASSES = 3,
};

#define FAKECUDA_TRUTH_DEVICES 16

struct fakecuda_truth {
	/* outstanding, allocations made after the mark */
	uint64_t bytes[FAKECUDA_NR_CLASSES];
	/* device memory of those per device ordinal (the context's, or cuMemCreate's
	 * location); in the truth JSON as "device_bytes_by_device": [per ordinal] */
	uint64_t dev_bytes[FAKECUDA_TRUTH_DEVICES];
	int ndevices;
	uint64_t allocs[FAKECUDA_NR_CLASSES];
	/* outstanding, all allocations including those made before the mark */
	uint64_t total_bytes[FAKECUDA_NR_CLASSES];
	uint64_t total_allocs[FAKECUDA_NR_CLASSES];
	/* calls after the mark */
	uint64_t alloc_calls;	     /* successful allocation calls */
	uint64_t free_calls;	     /* successful frees of allocations made after the mark */
	uint64_t unmatched_frees;    /* successful frees of allocations made before the mark */
	uint64_t oom_failures;	     /* allocation calls that returned 2 */
	uint64_t other_failures;     /* allocation calls that returned anything else but 0 */
	uint64_t free_failures;	     /* free calls that failed (double free, unknown pointer) */
	uint64_t ctx_dropped_bytes;  /* freed by context teardown, made after the mark */
	uint64_t ctx_dropped_allocs; /* the same, counted */
	uint64_t pre_attach_dropped_bytes; /* freed by context teardown, made before the mark */
	/* state now, never charged */
	uint64_t reserved_bytes; /* address space reserved (cuMemAddressReserve) */
	uint64_t imported_bytes; /* open IPC mappings and imported handles */
	uint64_t reused_addresses; /* allocations since the mark given a freed address back */
	int pid;
};

/* Starts an epoch: allocations made from now on are "seen", older ones are "pre-attach";
 * the per-call counters restart at 0. Thread-safe. */
void fakecuda_mark(void);

/* Fills *t with the books as they are now. Thread-safe. */
void fakecuda_truth(struct fakecuda_truth *t);

/*
 * Writes *t to f as one JSON object and a newline. extra_json_fields, when not NULL
 * or empty, is inserted verbatim before the closing brace (e.g. "\"sites\":{...}",
 * without a leading comma). Keys: device_bytes, managed_bytes, host_pinned_bytes,
 * outstanding_allocs, device_allocs, managed_allocs, host_pinned_allocs,
 * pre_attach_device_bytes, pre_attach_managed_bytes, pre_attach_host_pinned_bytes,
 * pre_attach_allocs, unmatched_frees, oom_failures, other_failures, free_failures,
 * alloc_calls, free_calls, ctx_dropped_bytes, ctx_dropped_allocs,
 * pre_attach_dropped_bytes, reserved_bytes, imported_bytes, reused_addresses, pid.
 * Returns 0, or -1 with errno set when writing failed.
 */
int fakecuda_truth_write(FILE *f, const struct fakecuda_truth *t, const char *extra_json_fields);

/* fakecuda_truth() then fakecuda_truth_write(). */
int fakecuda_truth_json(FILE *f, const char *extra_json_fields);

/*
 * Calls hook(size) at the start of every cuMemAlloc_v2, inside the driver call
 * and before anything is allocated (NULL: none). The hook may call the driver
 * again, longjmp out, exit its thread or block: what user callbacks do.
 */
void fakecuda_set_alloc_hook(void (*hook)(size_t size));

#ifdef __cplusplus
}
#endif

#endif /* FAKECUDA_H */
