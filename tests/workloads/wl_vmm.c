// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_vmm.c - the virtual memory management API as PyTorch's expandable segments
 * and NCCL use it: a large address reservation (never memory), handles created,
 * mapped and unmapped; a release before the unmap (freed at the unmap); retain
 * + release of a mapped handle (still outstanding); NCCL's Retain -> Release ->
 * Unmap -> Release; a handle never mapped; a handle on a host location; a map
 * outside any reservation (refused).
 *
 * Options: --size BYTES (the piece size, default 2 MiB).
 */
#include "wl.h"

#define RESERVE_BYTES (64ULL << 30)

enum { S_MAP_UNMAP, S_RELEASE_FIRST, S_RETAINED, S_NCCL, S_NEVER_MAPPED, S_HOST };

static struct wl_site sites[] = {
	[S_MAP_UNMAP] = { "vmm_site_map_unmap", FAKECUDA_DEVICE, 0, 0 },
	[S_RELEASE_FIRST] = { "vmm_site_release_first", FAKECUDA_DEVICE, 0, 0 },
	[S_RETAINED] = { "vmm_site_retained", FAKECUDA_DEVICE, 0, 0 },
	[S_NCCL] = { "vmm_site_nccl", FAKECUDA_DEVICE, 0, 0 },
	[S_NEVER_MAPPED] = { "vmm_site_never_mapped", FAKECUDA_DEVICE, 0, 0 },
	[S_HOST] = { "vmm_site_host", FAKECUDA_HOST_PINNED, 0, 0 },
};

/*
 * cuMemCreate of size bytes on device 0 (host: on the host) booked at site;
 * inlined so that the site function is the driver's caller.
 */
static inline __attribute__((always_inline)) CUmemGenericAllocationHandle
create(int site, size_t size, int host)
{
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h = 0;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	wl_check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
	wl_site_alloc(&sites[site], size);
	return h;
}

WL_SITE CUmemGenericAllocationHandle vmm_site_map_unmap(size_t size)
{
	return create(S_MAP_UNMAP, size, 0);
}

WL_SITE CUmemGenericAllocationHandle vmm_site_release_first(size_t size)
{
	return create(S_RELEASE_FIRST, size, 0);
}

WL_SITE CUmemGenericAllocationHandle vmm_site_retained(size_t size)
{
	return create(S_RETAINED, size, 0);
}

WL_SITE CUmemGenericAllocationHandle vmm_site_nccl(size_t size)
{
	return create(S_NCCL, size, 0);
}

WL_SITE CUmemGenericAllocationHandle vmm_site_never_mapped(size_t size)
{
	return create(S_NEVER_MAPPED, size, 0);
}

WL_SITE CUmemGenericAllocationHandle vmm_site_host(size_t size)
{
	return create(S_HOST, size, 1);
}

/* Create, map, unmap, release: freed by the release. */
WL_FRAME static void map_unmap(CUdeviceptr va, size_t g)
{
	CUmemGenericAllocationHandle h = vmm_site_map_unmap(g);

	wl_check(cuMemMap(va, g, 0, h, 0), "cuMemMap");
	wl_check(cuMemUnmap(va, g), "cuMemUnmap");
	wl_check(cuMemRelease(h), "cuMemRelease");
	wl_site_free(&sites[S_MAP_UNMAP], g);
}

/* Release while mapped frees nothing; the unmap drops the last reference. */
WL_FRAME static void release_first(CUdeviceptr va, size_t g)
{
	CUmemGenericAllocationHandle h = vmm_site_release_first(2 * g);

	wl_check(cuMemMap(va, 2 * g, 0, h, 0), "cuMemMap");
	wl_check(cuMemRelease(h), "cuMemRelease");
	wl_check(cuMemUnmap(va, 2 * g), "cuMemUnmap");
	wl_site_free(&sites[S_RELEASE_FIRST], 2 * g);
}

/* A retain and its release on a mapped handle: the handle stays outstanding. */
WL_FRAME static void retained(CUdeviceptr va, size_t g)
{
	CUmemGenericAllocationHandle h = vmm_site_retained(g), r = 0;

	wl_check(cuMemMap(va, g, 0, h, 0), "cuMemMap");
	wl_check(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 100)),
		 "cuMemRetainAllocationHandle");
	if (r != h)
		wl_die("cuMemRetainAllocationHandle gave 0x%llx, expected 0x%llx", r, h);
	wl_check(cuMemRelease(r), "cuMemRelease");
}

/* NCCL frees its buffers as Retain -> Release -> Unmap -> Release. */
WL_FRAME static void nccl(CUdeviceptr va, size_t g)
{
	CUmemGenericAllocationHandle h = vmm_site_nccl(4 * g), r = 0;

	wl_check(cuMemMap(va, 4 * g, 0, h, 0), "cuMemMap");
	wl_check(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va),
		 "cuMemRetainAllocationHandle");
	wl_check(cuMemRelease(r), "cuMemRelease");
	wl_check(cuMemUnmap(va, 4 * g), "cuMemUnmap");
	wl_check(cuMemRelease(h), "cuMemRelease");
	wl_site_free(&sites[S_NCCL], 4 * g);
}

WL_FRAME static void main_phase(size_t g)
{
	CUdeviceptr va = 0, small = 0;
	CUmemGenericAllocationHandle h;

	wl_check(cuMemAddressReserve(&va, RESERVE_BYTES, 0, 0, 0), "cuMemAddressReserve");
	wl_check(cuMemAddressReserve(&small, 4 * g, 0, 0, 0), "cuMemAddressReserve");
	map_unmap(va, g);
	release_first(va + 2 * g, g);
	retained(va + 4 * g, g);
	nccl(va + 8 * g, g);
	h = vmm_site_never_mapped(3 * g);
	wl_check_rc(cuMemMap(0x1000, g, 0, h, 0), CUDA_ERROR_INVALID_VALUE,
		    "cuMemMap outside a reservation");
	vmm_site_host(g);
	wl_check(cuMemAddressFree(small, 4 * g), "cuMemAddressFree");
	wl_expect.reserved_bytes = RESERVE_BYTES;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 2 * WL_MIB };

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (!o.size || o.size > (1ULL << 30))
		wl_die("--size must be between 1 and 1 GiB");
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	main_phase(o.size);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
