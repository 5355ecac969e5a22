// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_explain.c - a caching allocator over the CUDA driver stand-in (PyTorch's
 * USDT probes through the libc10_cuda.so stand-in) that runs out of device
 * memory for one reason, chosen by --scenario:
 *
 *   fragmentation  7 segments of 8 MiB filled with 1 MiB blocks; every other
 *                  block freed (28 MiB cached, no free extent above 1 MiB);
 *                  then a 2 MiB block: a new segment, which does not fit
 *   leak           a 2 MiB block kept every --interval ms until a segment
 *                  does not fit
 *   library        a library outside the allocator (the libnccl.so.2
 *                  stand-in) takes 40 MiB; then blocks until a segment fails
 *   peak           blocks until a segment fails, at once
 *   preattach      48 MiB allocated before the tracer attaches; then blocks
 *                  until a segment fails
 *   idle           48 MiB allocated before the tracer attaches; nothing after
 *   retry_ok       7 segments of 8 MiB filled with 1 MiB blocks, the blocks of the
 *                  first freed (a segment cached whole); then a new segment: it
 *                  fails, the cached one is freed, and the retry succeeds
 *   torch_preattach  PyTorch's reserve from before attach: 3 segments of 8 MiB
 *                  and 2 MiB of blocks in them before the tracer attaches;
 *                  then 22 MiB of blocks in those segments and one segment of
 *                  its own with 4 MiB of blocks (no failure)
 *
 * The capacity is 60 MiB (FAKECUDA_CAPACITY). On a failed segment it does what
 * PyTorch does: frees the segments it caches whole (none here) and asks
 * once more; that fails too and the workload stops. The truth adds the figures
 * the breakdown must show: "torch_reserved" (the segments allocated since attach),
 * "torch_allocated", "largest_free", "outside_bytes", "pre_attach",
 * "blocks_outside" (block bytes in segments from before attach).
 *
 * Options: --scenario NAME, --interval-ms N (leak only; default 30).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

void faketorch_malloc(void *ptr, int device, uint64_t size, uint64_t stream);
void faketorch_free(void *ptr);
void faketorch_grow(void (*alloc_segment)(void));
int nccl_standin_buffers(int n, size_t size);

#define CAPACITY (60 * WL_MIB)
#define SEGMENT (8 * WL_MIB)
#define MAX_SEGS 16

enum { S_SEGMENT, S_BLOCK, S_NCCL };

static struct wl_site sites[] = {
	[S_SEGMENT] = { "explain_site_segment", FAKECUDA_DEVICE, 0, 0 },
	[S_BLOCK] = { "explain_site_block", -1, 0, 0 },
	[S_NCCL] = { "nccl_standin_buffers", FAKECUDA_DEVICE, 0, 0 },
};

static CUdeviceptr segs[MAX_SEGS];
static uint64_t seg_used[MAX_SEGS];
static int nsegs, seg_rc, pre_segs; /* pre_segs: of segs, from before attach */
static long long allocated, outside, pre_attach, blocks_outside;

WL_SITE static void explain_site_segment(void)
{
	CUdeviceptr p = 0;

	seg_rc = cuMemAlloc_v2(&p, SEGMENT);
	if (seg_rc) {
		wl_check_rc(seg_rc, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2(segment)");
		wl_expect.oom_failures++;
		return;
	}
	if (nsegs == MAX_SEGS)
		wl_die("more than %d segments", MAX_SEGS);
	wl_site_alloc(&sites[S_SEGMENT], SEGMENT);
	segs[nsegs] = p;
	seg_used[nsegs++] = 0;
}

/* A new segment as PyTorch gets one: on failure, free the cache (nothing is free whole
 * here) and ask again. Returns 0 or the driver's error. */
static int grow(void)
{
	faketorch_grow(explain_site_segment);
	if (seg_rc)
		faketorch_grow(explain_site_segment);
	return seg_rc;
}

WL_SITE static void *explain_site_block(uint64_t size)
{
	void *p;

	if (!nsegs || seg_used[nsegs - 1] + size > SEGMENT)
		if (grow())
			return NULL;
	p = (void *)(uintptr_t)(segs[nsegs - 1] + seg_used[nsegs - 1]);
	seg_used[nsegs - 1] += size;
	faketorch_malloc(p, 0, size, 0);
	allocated += size;
	return p;
}

/* Blocks in the segments from before attach (seen, their segments not), then a segment
 * of its own. */
static void torch_preattach(void)
{
	for (int s = 0; s < 3; s++) {
		while (seg_used[s] + 2 * WL_MIB <= SEGMENT) {
			faketorch_malloc((void *)(uintptr_t)(segs[s] + seg_used[s]), 0, 2 * WL_MIB,
					 0);
			seg_used[s] += 2 * WL_MIB;
			allocated += 2 * WL_MIB;
			blocks_outside += 2 * WL_MIB;
		}
	}
	for (int i = 0; i < 2; i++)
		if (!explain_site_block(2 * WL_MIB))
			wl_die("a block in a segment of its own failed");
}

/* The first segment goes back to the driver (PyTorch empties its cache of whole segments). */
WL_SITE static void explain_site_release(void)
{
	wl_check(cuMemFree_v2(segs[0]), "cuMemFree_v2(cached segment)");
	wl_site_free(&sites[S_SEGMENT], SEGMENT);
	segs[0] = 0;
}

/* A failed segment that PyTorch's retry saves: no out-of-memory error reaches the program. */
static void retry_ok(void)
{
	for (int i = 0; i < 7 * 8; i++)
		explain_site_block(WL_MIB);
	for (int i = 0; i < 8; i++) {
		faketorch_free((void *)(uintptr_t)(segs[0] + (uint64_t)i * WL_MIB));
		allocated -= WL_MIB;
	}
	faketorch_grow(explain_site_segment);
	if (!seg_rc)
		wl_die("the segment past capacity did not fail");
	faketorch_grow(explain_site_release);
	faketorch_grow(explain_site_segment);
	if (seg_rc)
		wl_die("the retry after freeing the cached segment failed");
}

/* Every other 1 MiB block of full segments freed; then a 2 MiB block. */
static void fragment(void)
{
	for (int i = 0; i < 7 * 8; i++)
		explain_site_block(WL_MIB);
	for (int s = 0; s < nsegs; s++) {
		for (int i = 0; i < 8; i += 2) {
			faketorch_free((void *)(uintptr_t)(segs[s] + (uint64_t)i * WL_MIB));
			allocated -= WL_MIB;
		}
	}
	/* no free extent of 2 MiB: the allocator asks for a new segment */
	if (grow() == 0)
		wl_die("the segment past capacity did not fail");
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .interval_ms = 30 };
	const char *scenario = wl_take_str(&argc, argv, "--scenario");
	char extra[256];
	int n;

	if (!scenario)
		wl_die("--scenario fragmentation|leak|library|peak|preattach|idle|torch_preattach|"
		       "retry_ok is required");
	wl_parse(&o, argc, argv, WL_OPT_INTERVAL);
	wl_set_capacity(CAPACITY);
	wl_cuda_start(0);
	if (!strcmp(scenario, "preattach") || !strcmp(scenario, "idle")) {
		CUdeviceptr p;

		wl_check(cuMemAlloc_v2(&p, 48 * WL_MIB), "cuMemAlloc_v2(before attach)");
		pre_attach = 48 * WL_MIB;
		wl_expect.pre_attach_device_bytes = pre_attach;
	}
	if (!strcmp(scenario, "torch_preattach")) {
		/* the segments and 2 MiB of blocks before the tracer listens: none is seen */
		for (; nsegs < 3; nsegs++)
			wl_check(cuMemAlloc_v2(&segs[nsegs], SEGMENT), "cuMemAlloc_v2(segment)");
		faketorch_malloc((void *)(uintptr_t)segs[0], 0, 2 * WL_MIB, 0);
		seg_used[0] = 2 * WL_MIB;
		pre_segs = nsegs;
		pre_attach = 3 * SEGMENT;
		wl_expect.pre_attach_device_bytes = pre_attach;
	}
	wl_ready(&o);
	fakecuda_mark();
	if (!strcmp(scenario, "fragmentation")) {
		fragment();
	} else if (!strcmp(scenario, "torch_preattach")) {
		torch_preattach();
	} else if (!strcmp(scenario, "retry_ok")) {
		retry_ok();
	} else if (!strcmp(scenario, "idle")) {
		/* no CUDA call while traced */
	} else if (!strcmp(scenario, "library") || !strcmp(scenario, "peak") ||
		   !strcmp(scenario, "preattach") || !strcmp(scenario, "leak")) {
		if (!strcmp(scenario, "library")) {
			wl_check(nccl_standin_buffers(4, 10 * WL_MIB), "nccl_standin_buffers");
			for (int i = 0; i < 4; i++)
				wl_site_alloc(&sites[S_NCCL], 10 * WL_MIB);
			outside = 40 * WL_MIB;
		}
		while (explain_site_block(2 * WL_MIB))
			if (!strcmp(scenario, "leak"))
				wl_sleep_ms(o.interval_ms);
	} else {
		wl_die("unknown scenario %s", scenario);
	}
	n = snprintf(extra, sizeof(extra),
		     "\"torch_reserved\":%lld,\"torch_allocated\":%lld,\"outside_bytes\":%lld,"
		     "\"pre_attach\":%lld,\"segment\":%llu,\"blocks_outside\":%lld",
		     (long long)(nsegs - pre_segs - !strcmp(scenario, "retry_ok")) * SEGMENT,
		     allocated, outside, pre_attach,
		     (unsigned long long)SEGMENT, blocks_outside);
	if (n < 0 || (size_t)n >= sizeof(extra))
		wl_die("truth fields too long");
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), extra);
	return 0;
}
