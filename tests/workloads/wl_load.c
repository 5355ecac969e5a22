// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_load.c - load: N threads allocating and freeing as fast as the stand-in
 * goes, for --seconds, with random sizes and every family: device (v1, v2,
 * pitch), stream-ordered, managed, pinned host memory and registrations,
 * VMM handles with mappings, and arrays. Each thread keeps a ring of
 * allocations per family and frees the oldest, so memory churns around a
 * level; whatever is left at the end stays outstanding for the books.
 *
 * Options: --threads N (16), --seconds via --iters N (seconds, default 5),
 * --size N (largest allocation, default 256 KiB). SIGUSR1 ends the load early
 * (a test that needs the load to run past an attach that may take long).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define RING 8
#define GRAN (2 * WL_MIB)

enum family { F_DEVICE, F_V1, F_PITCH, F_ASYNC, F_MANAGED, F_HOST, F_REGISTER, F_VMM, F_ARRAY,
	      NR_FAMILIES };

struct item {
	uint64_t key; /* pointer, handle or array */
	uint64_t va;  /* VMM: where the handle is mapped */
	void *host;   /* registrations: the buffer */
};

struct worker {
	struct wl_worker head;
	CUdeviceptr va_base; /* VMM: this thread's reservation */
	struct item ring[NR_FAMILIES][RING];
	unsigned int next[NR_FAMILIES];
};

static struct wl_opts o = { .threads = 16, .iters = 5, .size = 256 * 1024 };
static struct timespec deadline;
static volatile sig_atomic_t stop_early;

static void on_usr1(int sig)
{
	(void)sig;
	stop_early = 1;
}

static void release(struct worker *w, enum family f, struct item *it)
{
	switch (f) {
	case F_DEVICE:
	case F_PITCH:
	case F_MANAGED:
		wl_check(cuMemFree_v2(it->key), "cuMemFree_v2");
		break;
	case F_V1:
		wl_check(cuMemFree((CUdeviceptr_v1)it->key), "cuMemFree");
		break;
	case F_ASYNC:
		wl_check(cuMemFreeAsync_ptsz(it->key, NULL), "cuMemFreeAsync_ptsz");
		break;
	case F_HOST:
		wl_check(cuMemFreeHost((void *)(uintptr_t)it->key), "cuMemFreeHost");
		break;
	case F_REGISTER:
		wl_check(cuMemHostUnregister(it->host), "cuMemHostUnregister");
		free(it->host);
		break;
	case F_VMM:
		wl_check(cuMemUnmap(it->va, GRAN), "cuMemUnmap");
		wl_check(cuMemRelease(it->key), "cuMemRelease");
		break;
	case F_ARRAY:
		wl_check(cuArrayDestroy((CUarray)(uintptr_t)it->key), "cuArrayDestroy");
		break;
	default:
		break;
	}
	(void)w;
	memset(it, 0, sizeof(*it));
}

WL_SITE void load_site(struct worker *w, enum family f, size_t size)
{
	unsigned int slot = w->next[f]++ % RING;
	struct item *it = &w->ring[f][slot];
	CUmemAllocationProp prop = { 0 };
	CUDA_ARRAY_DESCRIPTOR ad = { 0 };
	CUdeviceptr p = 0;
	CUdeviceptr_v1 p1 = 0;
	CUmemGenericAllocationHandle handle = 0;
	CUarray arr = NULL;
	size_t pitch = 0;
	void *h = NULL;

	if (it->key)
		release(w, f, it);
	switch (f) {
	case F_DEVICE:
		wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
		it->key = p;
		break;
	case F_V1:
		wl_check(cuMemAlloc(&p1, (unsigned int)size), "cuMemAlloc");
		it->key = p1;
		break;
	case F_PITCH:
		wl_check(cuMemAllocPitch_v2(&p, &pitch, size / 16 + 1, 16, 4), "cuMemAllocPitch_v2");
		it->key = p;
		break;
	case F_ASYNC:
		wl_check(cuMemAllocAsync_ptsz(&p, size, NULL), "cuMemAllocAsync_ptsz");
		it->key = p;
		break;
	case F_MANAGED:
		wl_check(cuMemAllocManaged(&p, size, 1), "cuMemAllocManaged");
		it->key = p;
		break;
	case F_HOST:
		wl_check(cuMemHostAlloc(&h, size, 0), "cuMemHostAlloc");
		it->key = (uintptr_t)h;
		break;
	case F_REGISTER:
		it->host = malloc(size);
		if (!it->host)
			wl_die("out of memory");
		wl_check(cuMemHostRegister_v2(it->host, size, 0), "cuMemHostRegister_v2");
		it->key = (uintptr_t)it->host;
		break;
	case F_VMM:
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = 0;
		wl_check(cuMemCreate(&handle, GRAN, &prop, 0), "cuMemCreate");
		it->key = handle;
		it->va = w->va_base + (uint64_t)slot * GRAN;
		wl_check(cuMemMap(it->va, GRAN, 0, it->key, 0), "cuMemMap");
		break;
	case F_ARRAY:
		ad.Width = size / 4 + 1;
		ad.Height = 1;
		ad.Format = CU_AD_FORMAT_FLOAT;
		ad.NumChannels = 1;
		wl_check(cuArrayCreate_v2(&arr, &ad), "cuArrayCreate_v2");
		it->key = (uintptr_t)arr;
		break;
	default:
		break;
	}
	w->head.calls++;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	wl_check(cuCtxSetCurrent(w->head.ctx), "cuCtxSetCurrent");
	wl_check(cuMemAddressReserve(&w->va_base, RING * GRAN, GRAN, 0, 0), "cuMemAddressReserve");
	while (!stop_early && !wl_past(&deadline)) {
		for (int i = 0; i < 64; i++) {
			enum family f = wl_rand(&w->head.seed) % NR_FAMILIES;
			size_t size = 512 + wl_rand(&w->head.seed) % o.size;

			/* the 32-bit range of v1 pointers is never reused by the stand-in */
			if (f == F_V1)
				size = 512 + size % 2048;
			load_site(w, f, size);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	wl_parse(&o, argc, argv, WL_OPT_THREADS | WL_OPT_ITERS | WL_OPT_SIZE);
	if (!o.threads || o.threads > 256 || !o.size)
		wl_die("--threads must be 1..256 and --size positive");
	signal(SIGUSR1, on_usr1);
	wl_timed_load(&o, sizeof(struct worker), work, &deadline);
	return 0;
}
