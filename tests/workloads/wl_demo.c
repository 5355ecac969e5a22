// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_demo.c - the demo: a "training loop" that leaks GPU memory, against any libcuda.
 *
 * It loads the CUDA driver with dlopen (the real one, or gpuleak's stand-in:
 * --lib PATH) and runs --steps steps --interval-ms apart. Each step allocates a
 * batch buffer and a scratch buffer and frees them, as a healthy loop does, but
 * remember_activations() keeps one more buffer every step and never frees it:
 * the staircase users see in nvidia-smi. A weights buffer allocated once and
 * kept is not a leak.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*primary_retain)(CUcontext *, int);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
} cu;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void check(CUresult rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "wl_demo: %s failed with CUresult %d\n", what, rc);
		exit(1);
	}
}

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "wl_demo: %s\n", dlerror());
		exit(1);
	}
	return p;
}

#define NOINLINE __attribute__((noinline))

static NOINLINE CUdeviceptr load_weights(size_t bytes)
{
	CUdeviceptr p;

	check(cu.alloc(&p, bytes), "cuMemAlloc_v2(weights)");
	return p;
}

/* The bug: activations kept "for debugging" in a list that only grows. */
static NOINLINE void remember_activations(CUdeviceptr *kept, int step, size_t bytes)
{
	check(cu.alloc(&kept[step], bytes), "cuMemAlloc_v2(activations)");
}

static NOINLINE void forward_backward(size_t bytes)
{
	CUdeviceptr batch, scratch;

	check(cu.alloc(&batch, bytes), "cuMemAlloc_v2(batch)");
	check(cu.alloc(&scratch, 4 * bytes), "cuMemAlloc_v2(scratch)");
	check(cu.free(scratch), "cuMemFree_v2(scratch)");
	check(cu.free(batch), "cuMemFree_v2(batch)");
}

static NOINLINE void train_step(CUdeviceptr *kept, int step, size_t bytes)
{
	forward_backward(bytes);
	remember_activations(kept, step, bytes);
}

int main(int argc, char **argv)
{
	const char *lib_path = "libcuda.so.1";
	int steps = 30, interval_ms = 200;
	size_t bytes = 8 << 20;
	CUdeviceptr weights, *kept;
	CUcontext ctx;
	void *lib;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib_path = argv[++i];
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--interval-ms") && i + 1 < argc)
			interval_ms = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: wl_demo [--lib PATH] [--steps N] [--interval-ms N]\n");
			return 2;
		}
	}
	if (steps < 1 || steps > 100000 || interval_ms < 0) {
		fprintf(stderr, "wl_demo: bad --steps or --interval-ms\n");
		return 2;
	}
	lib = dlopen(lib_path, RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "wl_demo: %s\n", dlerror());
		return 1;
	}
	cu.init = sym(lib, "cuInit");
	cu.primary_retain = sym(lib, "cuDevicePrimaryCtxRetain");
	cu.set_current = sym(lib, "cuCtxSetCurrent");
	cu.alloc = sym(lib, "cuMemAlloc_v2");
	cu.free = sym(lib, "cuMemFree_v2");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	check(cu.init(0), "cuInit");
	check(cu.primary_retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
	check(cu.set_current(ctx), "cuCtxSetCurrent");
	kept = calloc(steps, sizeof(*kept));
	if (!kept)
		return 1;
	weights = load_weights(64 << 20);
	fprintf(stderr, "wl_demo: training for %d steps with %s\n", steps, lib_path);
	for (int step = 0; step < steps && !stop; step++) {
		struct timespec ts = { interval_ms / 1000, (interval_ms % 1000) * 1000000L };

		train_step(kept, step, bytes);
		nanosleep(&ts, NULL);
	}
	/* like most leaky jobs, it ends without giving the memory back */
	(void)weights;
	free(kept);
	return 0;
}
