// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_reuse.c - addresses reused across threads: N threads (32) allocate and
 * free device memory (cuMemAlloc_v2/cuMemFree_v2) or, with --pinned 1, pinned
 * host memory (cuMemHostAlloc/cuMemFreeHost), for --iters seconds (8), each
 * keeping a ring of 8 live buffers of random sizes and freeing the oldest. Run
 * it with FAKECUDA_REUSE=1: the stand-in then hands an address freed on one
 * thread to the next allocation on another, often before the free has
 * returned, as the real driver does. What the rings hold at the end stays
 * outstanding. With --vmm 1 the rings hold handles (cuMemCreate) mapped
 * (cuMemMap) in each thread's reservation, given back by cuMemUnmap then
 * cuMemRelease (the release frees) or the other way round (the unmap frees):
 * the stand-in hands a released handle's value to the next cuMemCreate.
 *
 * Options: --threads N, --iters N (seconds), --size N (largest allocation,
 * default 64 KiB), --pinned 0|1, --vmm 0|1.
 */

#include "wl.h"

#define RING 8
/* --vmm: one slot of a reservation holds the largest allocation */
#define SLOT_BYTES (o.size + 512)

struct worker {
	struct wl_worker head;
	uint64_t ring[RING];
	size_t sizes[RING];
	CUdeviceptr va; /* --vmm: the thread's reservation, RING slots */
	unsigned int next;
};

static struct wl_opts o = { .threads = 32, .iters = 8, .size = 64 * 1024 };
static unsigned long pinned, vmm;
static struct timespec deadline;

WL_SITE void reuse_site(struct worker *w, size_t size)
{
	uint64_t *slot = &w->ring[w->next++ % RING];
	CUdeviceptr p = 0;
	void *h = NULL;

	if (*slot && pinned)
		wl_check(cuMemFreeHost((void *)(uintptr_t)*slot), "cuMemFreeHost");
	else if (*slot)
		wl_check(cuMemFree_v2(*slot), "cuMemFree_v2");
	if (pinned) {
		wl_check(cuMemHostAlloc(&h, size, 0), "cuMemHostAlloc");
		*slot = (uintptr_t)h;
	} else {
		wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
		*slot = p;
	}
	w->head.calls += 2;
}

/* --vmm: the oldest handle of the ring unmapped and released, a new one mapped in its place. */
WL_SITE void reuse_vmm_site(struct worker *w, size_t size)
{
	unsigned int n = w->next++, i = n % RING;
	CUdeviceptr va = w->va + (CUdeviceptr)i * SLOT_BYTES;
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h = 0;

	if (w->ring[i] && (n / RING) % 2) {
		wl_check(cuMemUnmap(va, w->sizes[i]), "cuMemUnmap");
		wl_check(cuMemRelease(w->ring[i]), "cuMemRelease");
	} else if (w->ring[i]) {
		wl_check(cuMemRelease(w->ring[i]), "cuMemRelease");
		wl_check(cuMemUnmap(va, w->sizes[i]), "cuMemUnmap");
	}
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	wl_check(cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
	wl_check(cuMemMap(va, size, 0, h, 0), "cuMemMap");
	w->ring[i] = h;
	w->sizes[i] = size;
	w->head.calls += 4;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	wl_check(cuCtxSetCurrent(w->head.ctx), "cuCtxSetCurrent");
	if (vmm)
		wl_check(cuMemAddressReserve(&w->va, (size_t)RING * SLOT_BYTES, 0, 0, 0),
			 "cuMemAddressReserve");
	while (!wl_past(&deadline))
		for (int i = 0; i < 64; i++) {
			size_t size = 512 + wl_rand(&w->head.seed) % o.size;

			if (vmm)
				reuse_vmm_site(w, size);
			else
				reuse_site(w, size);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	pinned = wl_take_num(&argc, argv, "--pinned", 1, 0);
	vmm = wl_take_num(&argc, argv, "--vmm", 1, 0);
	wl_parse(&o, argc, argv, WL_OPT_THREADS | WL_OPT_ITERS | WL_OPT_SIZE);
	if (!o.threads || o.threads > 256 || !o.size)
		wl_die("--threads must be 1..256 and --size positive");
	wl_timed_load(&o, sizeof(struct worker), work, &deadline);
	return 0;
}
