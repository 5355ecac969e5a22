// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_ctxrace.c - a context destroyed while threads allocate in it. The main
 * thread keeps one allocation on device 0's primary context, creates a context
 * (cuCtxCreate_v2), starts N threads (8) that make it current and allocate and
 * free device and pinned host memory in it as fast as the stand-in goes (a
 * ring of 8 live buffers each), then destroys it (cuCtxDestroy_v2) after
 * --interval-ms (2000); with --reset 1 the threads use device 1's primary
 * context instead, and the main thread resets it (cuDevicePrimaryCtxReset_v2,
 * as cudaDeviceReset does). A thread stops at its first call the teardown made fail;
 * calls in flight at the teardown succeed or fail by where the driver was. The
 * context's memory is all freed by the teardown; the primary's stays.
 *
 * Options: --threads N, --interval-ms N, --size N (largest allocation, 64 KiB),
 * --reset 0|1.
 */
#include <stdlib.h>
#include <time.h>

#include "wl.h"

#define RING 8

struct worker {
	struct wl_worker head;
	uint64_t ring[RING];
	int pinned[RING];
	unsigned int next;
};

static struct wl_opts o = { .threads = 8, .interval_ms = 2000, .size = 64 * 1024 };

/* One free and one allocation; 0 once a call fails (the context is gone). */
WL_SITE int ctxrace_site(struct worker *w, size_t size, int pinned)
{
	unsigned int i = w->next++ % RING;
	CUdeviceptr p = 0;
	void *h = NULL;
	CUresult rc;

	if (w->ring[i]) {
		rc = w->pinned[i] ? cuMemFreeHost((void *)(uintptr_t)w->ring[i]) :
				    cuMemFree_v2(w->ring[i]);
		w->ring[i] = 0;
		if (rc)
			return 0;
	}
	rc = pinned ? cuMemHostAlloc(&h, size, 0) : cuMemAlloc_v2(&p, size);
	if (rc)
		return 0;
	w->ring[i] = pinned ? (uintptr_t)h : p;
	w->pinned[i] = pinned;
	w->head.calls += 2;
	return 1;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t r;

	wl_check(cuCtxSetCurrent(w->head.ctx), "cuCtxSetCurrent");
	do
		r = wl_rand(&w->head.seed);
	while (ctxrace_site(w, 512 + r % o.size, (r >> 40) & 1));
	return NULL;
}

WL_SITE void ctxrace_keep(void)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, WL_MIB), "cuMemAlloc_v2");
}

int main(int argc, char **argv)
{
	struct timespec pause;
	struct worker *workers;
	unsigned long long calls;
	CUcontext primary, ctx = NULL;
	unsigned long reset = wl_take_num(&argc, argv, "--reset", 1, 0);

	wl_parse(&o, argc, argv, WL_OPT_THREADS | WL_OPT_INTERVAL | WL_OPT_SIZE);
	if (!o.threads || o.threads > 256 || !o.size)
		wl_die("--threads must be 1..256 and --size positive");
	primary = wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	ctxrace_keep();
	if (reset)
		wl_check(cuDevicePrimaryCtxRetain(&ctx, 1), "cuDevicePrimaryCtxRetain");
	else
		wl_check(cuCtxCreate_v2(&ctx, 0, 0), "cuCtxCreate_v2");
	workers = wl_workers_new(o.threads, sizeof(*workers), ctx);
	wl_workers_start(workers, o.threads, sizeof(*workers), work);
	pause.tv_sec = o.interval_ms / 1000;
	pause.tv_nsec = (o.interval_ms % 1000) * 1000000L;
	nanosleep(&pause, NULL);
	if (reset)
		wl_check(cuDevicePrimaryCtxReset_v2(1), "cuDevicePrimaryCtxReset_v2");
	else
		wl_check(cuCtxDestroy_v2(ctx), "cuCtxDestroy_v2");
	calls = wl_workers_join(workers, o.threads, sizeof(*workers));
	wl_check(cuCtxSetCurrent(primary), "cuCtxSetCurrent");
	wl_finish_load(&o, fakecuda_truth_json, calls);
	free(workers);
	return 0;
}
