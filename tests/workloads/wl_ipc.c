// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_ipc.c - exported and imported memory within one process.
 *
 * A device buffer (ipc_site_export) is exported with cuIpcGetMemHandle and
 * opened twice, with cuIpcOpenMemHandle_v2 (left open) and cuIpcOpenMemHandle
 * (closed). A VMM handle (ipc_site_vmm) is exported as a shareable handle and
 * imported twice: the first import is mapped, unmapped and released, the
 * second is kept. Imported memory is charged to nobody: only the two exported
 * allocations count, and imported_bytes holds what is still open.
 *
 * Options: --size BYTES (the device buffer, default 1 MiB).
 */
#include "wl.h"

#define VMM_SIZE (2 * WL_MIB)

enum { S_EXPORT, S_VMM };

static struct wl_site sites[] = {
	[S_EXPORT] = { "ipc_site_export", FAKECUDA_DEVICE, 0, 0 },
	[S_VMM] = { "ipc_site_vmm", FAKECUDA_DEVICE, 0, 0 },
};

WL_SITE CUdeviceptr ipc_site_export(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_EXPORT], size);
	return p;
}

WL_SITE CUmemGenericAllocationHandle ipc_site_vmm(size_t size)
{
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h = 0;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	wl_check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
	wl_site_alloc(&sites[S_VMM], size);
	return h;
}

WL_FRAME static void ipc_pointers(size_t size)
{
	CUdeviceptr p = ipc_site_export(size), open1 = 0, open2 = 0;
	CUipcMemHandle handle;

	wl_check(cuIpcGetMemHandle(&handle, p), "cuIpcGetMemHandle");
	wl_check(cuIpcOpenMemHandle_v2(&open1, handle, 1), "cuIpcOpenMemHandle_v2");
	wl_check(cuIpcOpenMemHandle(&open2, handle, 0), "cuIpcOpenMemHandle");
	if (open1 == p || open2 == p || open1 == open2)
		wl_die("IPC mappings must have addresses of their own");
	wl_check(cuIpcCloseMemHandle(open2), "cuIpcCloseMemHandle");
	wl_check_rc(cuMemFree_v2(open1), CUDA_ERROR_INVALID_VALUE, "cuMemFree_v2(IPC mapping)");
	wl_expect.free_failures = 1;
	wl_expect.imported_bytes += size;
}

WL_FRAME static void shareable_handles(void)
{
	CUmemGenericAllocationHandle h = ipc_site_vmm(VMM_SIZE), imp1 = 0, imp2 = 0;
	CUdeviceptr va = 0;
	int fd = -1;

	wl_check(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 "cuMemExportToShareableHandle");
	wl_check(cuMemImportFromShareableHandle(&imp1, (void *)(intptr_t)fd,
						CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		 "cuMemImportFromShareableHandle");
	wl_check(cuMemAddressReserve(&va, 8 * VMM_SIZE, 0, 0, 0), "cuMemAddressReserve");
	wl_check(cuMemMap(va, VMM_SIZE, 0, imp1, 0), "cuMemMap");
	wl_check(cuMemUnmap(va, VMM_SIZE), "cuMemUnmap");
	wl_check(cuMemRelease(imp1), "cuMemRelease");
	wl_check(cuMemImportFromShareableHandle(&imp2, (void *)(intptr_t)fd,
						CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		 "cuMemImportFromShareableHandle");
	if (imp1 == h || imp2 == h)
		wl_die("an imported handle must differ from the exporter's");
	wl_expect.imported_bytes += VMM_SIZE;
	wl_expect.reserved_bytes = 8 * VMM_SIZE;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (!o.size)
		wl_die("--size must not be 0");
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	ipc_pointers(o.size);
	shareable_handles();
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
