// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_torch.c - a caching allocator over the CUDA driver stand-in, announcing
 * its blocks through PyTorch's USDT probes (libc10_cuda.so stand-in).
 *
 * Like PyTorch, it asks the driver for segments (20 MiB, cuMemAlloc_v2, called
 * back from the allocator library) and carves tensor blocks out of them: after warm-up the driver sees nothing,
 * while torch_site_leak keeps one block per step (the leak the driver cannot
 * see) and torch_site_scratch allocates and frees one per step. The truth
 * adds "torch_block_bytes" and "torch_blocks": the blocks outstanding.
 *
 * The context (device 0's primary, or --device N's) is made current before
 * the tracer attaches, as a training job's is: BPF does not know its device.
 * After attach the job makes it current again and allocates a workspace
 * outside the caching allocator (as cuBLAS does), then the segments; the
 * blocks' device tells gpuleak where both are.
 *
 * Options: --iters N steps (default 40), --size N block bytes (256 KiB),
 * --device N (0), --interval-ms N between steps (0), --warm 1 (the workspace and the
 * first segment before it says ready: its steps then make no driver call). The truth also says in how
 * many steps a tracer held the probes' semaphore (traced_steps, untraced_steps) and
 * its least and greatest value (one per tracer attached: semaphore_min, _max).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "wl.h"

void faketorch_malloc(void *ptr, int device, uint64_t size, uint64_t stream);
void faketorch_free(void *ptr);
void faketorch_grow(void (*alloc_segment)(void));
int faketorch_traced(void);
int faketorch_semaphore(void);

#define SEGMENT (20 * WL_MIB)

enum { S_SEGMENT, S_WORKSPACE, S_LEAK, S_SCRATCH };

static struct wl_site sites[] = {
	[S_SEGMENT] = { "torch_site_segment", FAKECUDA_DEVICE, 0, 0 },
	[S_WORKSPACE] = { "torch_site_workspace", FAKECUDA_DEVICE, 0, 0 },
	[S_LEAK] = { "torch_site_leak", -1, 0, 0 },
	[S_SCRATCH] = { "torch_site_scratch", -1, 0, 0 },
};

static int device;
static CUdeviceptr seg_base;
static uint64_t seg_used;
static long long blocks, block_bytes;

WL_SITE static void torch_site_segment(void)
{
	wl_check(cuMemAlloc_v2(&seg_base, SEGMENT), "cuMemAlloc_v2(segment)");
	wl_site_alloc(&sites[S_SEGMENT], SEGMENT);
	seg_used = 0;
}

WL_SITE static void torch_site_workspace(void)
{
	CUdeviceptr p;

	wl_check(cuMemAlloc_v2(&p, WL_MIB), "cuMemAlloc_v2(workspace)");
	wl_site_alloc(&sites[S_WORKSPACE], WL_MIB);
}

/* A block from the current segment; a new segment when it is full. */
static void *carve(uint64_t size)
{
	void *p;

	if (!seg_base || seg_used + size > SEGMENT)
		faketorch_grow(torch_site_segment);
	p = (void *)(uintptr_t)(seg_base + seg_used);
	seg_used += size;
	return p;
}

WL_SITE void *torch_site_leak(uint64_t size)
{
	void *p = carve(size);

	faketorch_malloc(p, device, size, 0);
	blocks++;
	block_bytes += size;
	return p;
}

WL_SITE void torch_site_scratch(uint64_t size)
{
	void *p = carve(size);

	faketorch_malloc(p, device, size, 7);
	faketorch_free(p);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .iters = 40, .size = 256 * 1024 };
	long long traced = 0, untraced = 0, sem_min = 1 << 16, sem_max = -1;
	char extra[256];
	CUcontext ctx;
	bool warm;

	device = (int)wl_take_num(&argc, argv, "--device", 63, 0);
	warm = wl_take_num(&argc, argv, "--warm", 1, 0);
	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_SIZE | WL_OPT_INTERVAL);
	ctx = wl_cuda_start(device);
	if (!warm)
		wl_ready(&o);
	fakecuda_mark();
	wl_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	torch_site_workspace();
	if (warm) {
		faketorch_grow(torch_site_segment);
		wl_ready(&o);
	}
	for (unsigned long long i = 0; i < o.iters; i++) {
		/* whether a tracer held the probes' semaphore during this step */
		if (faketorch_traced())
			traced++;
		else
			untraced++;
		if (faketorch_semaphore() < sem_min)
			sem_min = faketorch_semaphore();
		if (faketorch_semaphore() > sem_max)
			sem_max = faketorch_semaphore();
		torch_site_leak(o.size);
		torch_site_scratch(2 * o.size);
		if (o.interval_ms)
			usleep(o.interval_ms * 1000);
	}
	snprintf(extra, sizeof(extra), "\"torch_block_bytes\":%lld,\"torch_blocks\":%lld,"
		 "\"traced_steps\":%lld,\"untraced_steps\":%lld,\"semaphore_min\":%lld,"
		 "\"semaphore_max\":%lld", block_bytes, blocks, traced, untraced, sem_min, sem_max);
	wl_finish(&o, fakecuda_truth_json, sites, 2, extra);
	return 0;
}
