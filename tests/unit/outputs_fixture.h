/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * outputs_fixture.h - a hand-built snapshot for the tests of the offline
 * outputs (folded, svg, pprof): two processes, Python and native frames,
 * unknown functions and modules, every verdict, a class that is not memory,
 * a stack with nothing outstanding, two stacks with the same frames, and
 * names that need escaping in each format.
 */
#ifndef GL_OUTPUTS_FIXTURE_H
#define GL_OUTPUTS_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "report/report.h"

#define LIBCUDA "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
#define LIBCUDA_ID "aabbccdd00112233"
#define TORCH "/opt/torch/lib/libtorch_cuda.so"
#define TORCH_ID "ddeeff0011223344"
#define NASTY_FN "bad\nname\xff<x>"

#define NATIVE(fn, mod, id, off) \
	{ .kind = "native", .function = fn, .module = mod, .build_id = id, .offset = off }
#define PYTHON(fn, f, l) { .kind = "python", .function = fn, .file = f, .line = l }
#define NFRAMES(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* innermost first, as the snapshot keeps them */
static struct snap_frame fx_leak_frames[] = {
	NATIVE("cuMemAlloc_v2", LIBCUDA, LIBCUDA_ID, 0x4000),
	NATIVE(NULL, TORCH, TORCH_ID, 0x1234),
	PYTHON("forward", "/src/net/model.py", 42),
	PYTHON("train;step", "train.py", 7),
	PYTHON("<module>", "train.py", 1),
};

static struct snap_frame fx_managed_frames[] = {
	NATIVE("cuMemAllocManaged", LIBCUDA, LIBCUDA_ID, 0x5000),
	PYTHON("forward", "/src/net/model.py", 42),
	PYTHON("train;step", "train.py", 7),
	PYTHON("<module>", "train.py", 1),
};

static struct snap_frame fx_reserve_frames[] = {
	NATIVE("cuMemAddressReserve", LIBCUDA, LIBCUDA_ID, 0x6000),
	PYTHON("<module>", "train.py", 1),
};

static struct snap_frame fx_nasty_frames[] = {
	NATIVE("cuMemAlloc_v2", LIBCUDA, LIBCUDA_ID, 0x4000),
	NATIVE(NASTY_FN, "/bin/app", "0123456789abcdef", 0x99),
	{ .kind = "native", .address = 0xdeadbeef },
};

static struct snap_stack fx_stacks_a[] = {
	{ .id = 1, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 3 << 20, .outstanding_allocs = 3,
	  .allocs = 5, .frees = 2, .alloc_bytes = 5 << 20, .verdict = "leak",
	  .nframes = NFRAMES(fx_leak_frames), .frames = fx_leak_frames },
	{ .id = 2, .cls = GL_CLASS_MANAGED, .outstanding_bytes = 1 << 20, .outstanding_allocs = 1,
	  .allocs = 1, .alloc_bytes = 1 << 20, .verdict = "steady",
	  .nframes = NFRAMES(fx_managed_frames), .frames = fx_managed_frames },
	{ .id = 3, .cls = GL_CLASS_ADDRESS, .outstanding_bytes = 64ULL << 30,
	  .outstanding_allocs = 1, .allocs = 1, .alloc_bytes = 64ULL << 30, .verdict = "unknown",
	  .nframes = NFRAMES(fx_reserve_frames), .frames = fx_reserve_frames },
	{ .id = 4, .cls = GL_CLASS_HOST_PINNED, .outstanding_bytes = 2 << 20,
	  .outstanding_allocs = 2, .allocs = 2, .alloc_bytes = 2 << 20, .verdict = "unknown",
	  .nframes = NFRAMES(fx_leak_frames), .frames = fx_leak_frames },
	{ .id = 5, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 0, .outstanding_allocs = 0,
	  .allocs = 10, .frees = 10, .alloc_bytes = 10 << 20, .verdict = "steady",
	  .nframes = NFRAMES(fx_managed_frames), .frames = fx_managed_frames },
};

static struct snap_stack fx_stacks_b[] = {
	{ .id = 6, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 4096, .outstanding_allocs = 1,
	  .allocs = 1, .alloc_bytes = 4096, .verdict = "leak",
	  .nframes = NFRAMES(fx_nasty_frames), .frames = fx_nasty_frames },
};

static struct snap_proc fx_procs[] = {
	{ .pid = 100, .comm = "python3", .nstacks = 5, .stacks = fx_stacks_a },
	{ .pid = 200, .comm = "a<b>&\"c;d", .nstacks = 1, .stacks = fx_stacks_b },
};

static struct snapshot fx_snap = {
	.duration_s = 2.5,
	.complete = true,
	.nprocs = 2,
	.procs = fx_procs,
};

/* Totals over the memory-class stacks of fx_snap. */
#define FX_INUSE_SPACE ((3 << 20) + (1 << 20) + (2 << 20) + 4096)
#define FX_INUSE_OBJECTS (3 + 1 + 2 + 1)
#define FX_ALLOC_SPACE ((5 << 20) + (1 << 20) + (2 << 20) + (10 << 20) + 4096)
#define FX_ALLOC_OBJECTS (5 + 1 + 2 + 10 + 1)
#define FX_SAMPLES 5

/* Runs a reporter into memory; returns the bytes (caller frees) and their length. */
#define CAPTURE(call, lenp)                                                             \
	({                                                                              \
		char *buf_ = NULL;                                                      \
		size_t size_ = 0;                                                       \
		FILE *f = open_memstream(&buf_, &size_);                               \
		assert_non_null(f);                                                     \
		assert_int_equal(call, 0);                                              \
		assert_int_equal(fclose(f), 0);                                         \
		*(lenp) = size_;                                                        \
		buf_;                                                                   \
	})

#endif /* GL_OUTPUTS_FIXTURE_H */
