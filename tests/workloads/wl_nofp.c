// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_nofp.c - allocations deep inside code built without frame pointers, as
 * in the CUDA and PyTorch libraries: the stacks test and the stack benchmark.
 *
 * main -> nofp_phase -> nofp_deep (--depth times) -> nofp_outer_entry ->
 * nofp_outer_step (libnofp_outer.so) -> nofp_inner_call -> nofp_inner_site
 * (libnofp_inner.so) -> cuMemAlloc_v2. Everything is built with -O2
 * -fomit-frame-pointer. The program keeps 3 allocations of --size, then
 * allocates and frees --iters more through the same path, timing that loop
 * (the truth's "loop_ns" and "loop_iters"; "cpu_ns": the CPU time the
 * process had used by then).
 *
 * Options: --size BYTES (default 1 MiB), --iters N (default 100),
 * --depth N (frames of nofp_deep, 560 bytes of stack each; default 0),
 * --alternate N (then N more allocations from two call sites of one function,
 * in runs of 8: the first site's are kept, the second's freed but the first
 * of each run; the two stacks
 * agree on sp and on every word near it, and differ deeper down, in the return
 * address into nofp_alternate),
 * --spread N (then N more from six call sites of one function in turn, each
 * kept: six stacks that agree near sp and differ deeper, more than a key of
 * BPF's stack cache has ways for shapes, all of one shape).
 */
#include <unistd.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "wl.h"

#define NOFP_KEEP 3

CUresult nofp_outer_entry(CUdeviceptr *p, size_t size);

enum { S_INNER };

static struct wl_site sites[] = {
	[S_INNER] = { "nofp_inner_site", FAKECUDA_DEVICE, 0, 0 },
};

WL_FRAME static CUresult nofp_deep(CUdeviceptr *p, size_t size, unsigned long depth)
{
	volatile char frame[512];
	CUresult rc;

	frame[0] = (char)depth;
	if (depth == 0)
		rc = nofp_outer_entry(p, size);
	else
		rc = nofp_deep(p, size, depth - 1);
	return rc + frame[0] - (char)depth;
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

WL_FRAME static unsigned long long nofp_phase(const struct wl_opts *o, unsigned long depth)
{
	unsigned long long t0;
	CUdeviceptr p;

	for (int i = 0; i < NOFP_KEEP; i++) {
		wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
		wl_site_alloc(&sites[S_INNER], o->size);
	}
	t0 = now_ns();
	for (unsigned long long i = 0; i < o->iters; i++) {
		wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
		wl_site_alloc(&sites[S_INNER], o->size);
		wl_check(cuMemFree_v2(p), "cuMemFree_v2");
		wl_site_free(&sites[S_INNER], o->size);
	}
	return now_ns() - t0;
}

static volatile unsigned long alt_sink;

WL_FRAME static void nofp_alternate(const struct wl_opts *o, unsigned long depth, unsigned long n)
{
	CUdeviceptr p;

	for (unsigned long i = 0; i < n; i++) {
		if ((i / 8) % 2 == 0) {
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2"); /* kept */
			wl_site_alloc(&sites[S_INNER], o->size);
		} else {
			alt_sink = i; /* keeps the compiler from merging the two calls */
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2"); /* mostly freed */
			wl_site_alloc(&sites[S_INNER], o->size);
			if (i % 8 == 0)
				continue; /* the first of each run is kept */
			wl_check(cuMemFree_v2(p), "cuMemFree_v2");
			wl_site_free(&sites[S_INNER], o->size);
		}
		/* the tracer catches up: later calls find what it learnt from these */
		if (i == 15)
			usleep(1000000);
		else if (i % 8 == 7)
			usleep(1000);
	}
}

WL_FRAME static void nofp_spread(const struct wl_opts *o, unsigned long depth, unsigned long n)
{
	CUdeviceptr p;

	for (unsigned long i = 0; i < n; i++) {
		alt_sink = i; /* one value per call site: the compiler keeps six calls */
		switch (i % 6) {
		case 0: wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2"); break;
		case 1:
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
			alt_sink = 1;
			break;
		case 2:
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
			alt_sink = 2;
			break;
		case 3:
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
			alt_sink = 3;
			break;
		case 4:
			wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2");
			alt_sink = 4;
			break;
		default: wl_check(nofp_deep(&p, o->size, depth), "cuMemAlloc_v2"); alt_sink = 5;
		}
		wl_site_alloc(&sites[S_INNER], o->size);
		if (i == 11)
			usleep(300000); /* the tracer catches up */
	}
}

static unsigned long long cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .iters = 100, .size = WL_MIB };
	unsigned long long loop_ns;
	unsigned long depth, alternate, spread;
	char extra[160];

	depth = wl_take_num(&argc, argv, "--depth", 10000, 0);
	alternate = wl_take_num(&argc, argv, "--alternate", 100000, 0);
	spread = wl_take_num(&argc, argv, "--spread", 100000, 0);
	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_SIZE | WL_OPT_VERBOSE);
	if (!o.size)
		wl_die("--size must not be 0");
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	loop_ns = nofp_phase(&o, depth);
	nofp_alternate(&o, depth, alternate);
	nofp_spread(&o, depth, spread);
	if (o.verbose)
		fprintf(stderr, "%s: %llu alloc/free pairs at depth %lu: %.0f ns each\n", wl_prog,
			o.iters, depth, o.iters ? (double)loop_ns / o.iters : 0);
	snprintf(extra, sizeof(extra),
		 "\"loop_ns\":%llu,\"loop_iters\":%llu,\"depth\":%lu,\"cpu_ns\":%llu", loop_ns,
		 o.iters, depth, cpu_ns());
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), extra);
	return 0;
}
