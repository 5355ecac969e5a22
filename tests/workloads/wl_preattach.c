// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_preattach.c - allocations made before the tracer attaches.
 *
 * Before "ready": four device buffers of --size bytes, one pinned host buffer
 * and one mapped VMM handle (pre_site_setup). After the mark: two of the device
 * buffers, the host buffer and the VMM handle are freed (four unmatched frees:
 * the tracer never saw them allocated); then post_site_main allocates three
 * buffers and frees one. Two pre-attach device buffers stay outstanding.
 *
 * Options: --size BYTES (default 1 MiB).
 */
#include "wl.h"

#define VMM_SIZE (2 * WL_MIB)

enum { S_POST };

static struct wl_site sites[] = {
	[S_POST] = { "post_site_main", FAKECUDA_DEVICE, 0, 0 },
};

struct pre {
	CUdeviceptr dev[4];
	void *host;
	CUdeviceptr va;
	CUmemGenericAllocationHandle handle;
};

/* Not booked at a site: the tracer cannot see these allocations. */
WL_SITE void pre_site_setup(struct pre *p, size_t size)
{
	CUmemAllocationProp prop = { 0 };
	unsigned int i;

	for (i = 0; i < 4; i++)
		wl_check(cuMemAlloc_v2(&p->dev[i], size), "cuMemAlloc_v2");
	wl_check(cuMemHostAlloc(&p->host, size / 2, 0), "cuMemHostAlloc");
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	wl_check(cuMemCreate(&p->handle, VMM_SIZE, &prop, 0), "cuMemCreate");
	wl_check(cuMemAddressReserve(&p->va, VMM_SIZE, 0, 0, 0), "cuMemAddressReserve");
	wl_check(cuMemMap(p->va, VMM_SIZE, 0, p->handle, 0), "cuMemMap");
}

WL_FRAME static void free_pre(struct pre *p)
{
	wl_check(cuMemFree_v2(p->dev[0]), "cuMemFree_v2");
	wl_check(cuMemFree_v2(p->dev[2]), "cuMemFree_v2");
	wl_check(cuMemFreeHost(p->host), "cuMemFreeHost");
	wl_check(cuMemUnmap(p->va, VMM_SIZE), "cuMemUnmap");
	wl_check(cuMemRelease(p->handle), "cuMemRelease");
	wl_expect.unmatched_frees = 4;
}

WL_SITE CUdeviceptr post_site_main(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_POST], size);
	return p;
}

WL_FRAME static void main_phase(struct pre *p, size_t size)
{
	free_pre(p);
	post_site_main(size);
	wl_check(cuMemFree_v2(post_site_main(2 * size)), "cuMemFree_v2");
	wl_site_free(&sites[S_POST], 2 * size);
	post_site_main(size / 2);
	wl_expect.pre_attach_device_bytes = 2 * size;
	wl_expect.reserved_bytes = VMM_SIZE;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };
	struct pre p = { { 0 }, NULL, 0, 0 };

	wl_parse(&o, argc, argv, WL_OPT_SIZE);
	if (o.size < 2)
		wl_die("--size must be at least 2");
	wl_cuda_start(0);
	pre_site_setup(&p, o.size);
	wl_ready(&o);
	fakecuda_mark();
	main_phase(&p, o.size);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
