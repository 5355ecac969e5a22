/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * record_fixture.h - a small recording written through the real writer, with
 * every record type in it: two processes (one exits), device and pinned
 * allocations, a free, an unmatched free, an out-of-memory failure, context
 * records, native, Python, API and unknown frames, modules with and without
 * a build-id; with rf_opts.windows, the tensor level in windows too (its mode,
 * PyTorch blocks in two windows, the second forgetting the first's). Shared by
 * the unit tests and the fuzzer's seed generator; plain C (no cmocka). Paths
 * in it name no real machine.
 */
#ifndef GL_RECORD_FIXTURE_H
#define GL_RECORD_FIXTURE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "books/proc_int.h" /* a process made up for the recorder */
#include "stacks/modules.h"
#include "stacks/stacks.h"
#include "trace/probes.h"
#include "recording/record.h"

#define RF_PID 4242
#define RF_PID2 4343
#define RF_START 777000000ULL
#define RF_START2 888000000ULL
#define RF_CTX 0xc0ffee00ULL
#define RF_MIB (1ULL << 20)
#define RF_APP "/opt/app/bin/train"
#define RF_APP_BUILD_ID "00112233445566778899aabbccddeeff00112233"
#define RF_CUDA "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
#define RF_CUDA_BUILD_ID "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
#define RF_LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"

struct rf_opts {
	uint64_t max_size; /* 0: no limit */
	bool no_end;	   /* stop without recorder__finish (a killed recorder) */
	int churn;	   /* extra alloc/free pairs of 1 MiB at stack 2 */
	bool windows;	   /* tensor windows: RF_BLOCKS1 blocks in the first, RF_BLOCKS2 after */
};

/* What the fixture leaves in the books of RF_PID (BPF's books say the same). */
#define RF_DEVICE_BYTES (2 * RF_MIB)
#define RF_DEVICE_ALLOCS 2
#define RF_PINNED_BYTES 4096
/* With windows: blocks of RF_BLOCK bytes; the second window forgot the first's. */
#define RF_BLOCK 4096
#define RF_BLOCKS1 3
#define RF_BLOCKS2 2
#define RF_REC_START 1000000000ULL

static inline void rf_code_info(void *ctx, uint32_t id, const char **function, const char **file)
{
	(void)ctx;
	*function = id == 1 ? "train_step" : id == 2 ? "<module>" : NULL;
	*file = id <= 2 ? "/opt/app/train.py" : NULL;
}

static inline void rf_call(struct recorder *r, uint32_t pid, uint64_t start, uint64_t *ts,
			   struct gl_call c, uint32_t stack)
{
	const struct gl_api_desc *d = probe__desc(c.api);

	c.hdr = (struct gl_hdr){ GL_REC_CALL, sizeof(c), pid, pid, start, *ts += 1000000 };
	if (!c.kind)
		c.kind = d->kind;
	if (!c.cls && c.op != GL_OP_CTX_NEW)
		c.cls = d->cls;
	recorder__applied(r, &c, sizeof(c), stack);
}

/*
 * The tensor level in windows for RF_PID: window 1 (start) from the beginning
 * with RF_BLOCKS1 blocks, its tail and close; window 2 (request) that forgets
 * them, with RF_BLOCKS2 blocks, still open. *ts: the time, advanced.
 */
static inline void rf_windows(struct recorder *r, uint64_t *ts, uint32_t stack)
{
	for (int i = 0; i < RF_BLOCKS1; i++)
		rf_call(r, RF_PID, RF_START, ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10100000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 100 + i }, stack);
	recorder__window(r, GLR_WINDOW_TAIL, 0, *ts += 1000000, false);
	recorder__window(r, GLR_WINDOW_CLOSE, 0, *ts += 1000000, false);
	recorder__window(r, GLR_WINDOW_OPEN, 4, *ts += 1000000, true);
	for (int i = 0; i < RF_BLOCKS2; i++)
		rf_call(r, RF_PID, RF_START, ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10180000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 200 + i }, stack);
}

/* Writes the fixture to path. Returns 0 or -errno. */
static inline int rf_write(const char *path, const struct rf_opts *o)
{
	struct recorder_opts ro = { .max_size = o->max_size, .stack_mode = GL_STACK_FP,
				    .code_info = rf_code_info, .host = "gpu-node-7",
				    .wall_ns = 1700000000000000000ULL };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct recorder *r = NULL;
	struct proc p = { .t = { .pid = RF_PID, .ns_pid = 7, .start_time = RF_START } };
	struct gl_proc exit_rec = { .event = GL_PROC_EXIT };
	struct gl_proc_stats bpf = { .start_time = RF_START };
	uint64_t stats[GL_NR_STATS] = { [GL_STAT_STALE_ENTRY] = 1 };
	uint64_t ts = 2000000000ULL;
	uint32_t cuda, app, libc, s1, s2, s3;
	int err = -ENOMEM;

	if (!m || !s)
		goto cleanup;
	cuda = modules__add(m, 0x801, 11, RF_CUDA, RF_CUDA_BUILD_ID);
	app = modules__add(m, 0x801, 12, RF_APP, RF_APP_BUILD_ID);
	libc = modules__add(m, 0x801, 13, RF_LIBC, "");
	{
		struct frame f1[] = {
			{ 0x1000, cuda, FRAME_NATIVE }, { 0x2040, app, FRAME_NATIVE },
			{ 42, 1, FRAME_PYTHON },	{ 7, 2, FRAME_PYTHON },
			{ 0x27249, libc, FRAME_NATIVE },
		};
		struct frame f2[] = { { 0x1000, cuda, FRAME_NATIVE }, { 0x3000, app, FRAME_NATIVE },
				      { 0x7fff0000, 0, FRAME_UNKNOWN } };
		struct frame f3[] = { { 0, GL_API_cuMemHostAlloc, FRAME_API } };

		s1 = stacks__intern(s, f1, 5);
		s2 = stacks__intern(s, f2, 3);
		s3 = stacks__intern(s, f3, 1);
	}
	r = recorder__new(path, &ro);
	if (!r) {
		err = -errno;
		goto cleanup;
	}
	recorder__begin(r, m, s, RF_REC_START, 1000000000ULL);
	if (o->windows) {
		recorder__tensor_level(r, "windowed", 0);
		recorder__window(r, GLR_WINDOW_OPEN, 0, RF_REC_START, false);
	}
	p.t.first_ns = ts;
	snprintf(p.t.comm, sizeof(p.t.comm), "train");
	recorder__proc_new(r, &p);
	rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuDevicePrimaryCtxRetain,
		.op = GL_OP_CTX_NEW, .key = RF_CTX, .flags = 1 }, 0);
	for (int i = 0; i < 3; i++)
		rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
			.op = GL_OP_ALLOC, .key = 0x10000000 + i * RF_MIB, .bytes = RF_MIB,
			.ctx = RF_CTX, .seq = i + 1 }, s1);
	rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemFree_v2,
		.op = GL_OP_FREE, .key = 0x10000000, .bytes = RF_MIB, .ctx = RF_CTX }, 0);
	rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
		.op = GL_OP_FAIL, .rc = 2, .bytes = 1ULL << 40, .ctx = RF_CTX, .seq = 9 }, s2);
	rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemHostAlloc,
		.op = GL_OP_ALLOC, .key = 0x7f0000000000, .bytes = RF_PINNED_BYTES }, s3);
	rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemFree_v2,
		.op = GL_OP_UNMATCHED_FREE, .key = 0x12345 }, 0);
	if (o->windows)
		rf_windows(r, &ts, s1);
	for (int i = 0; i < o->churn; i++) {
		rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
			.op = GL_OP_ALLOC, .key = 0x20000000, .bytes = RF_MIB, .seq = 9 + i }, s2);
		rf_call(r, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_cuMemFree_v2,
			.op = GL_OP_FREE, .key = 0x20000000, .bytes = RF_MIB }, 0);
	}
	/* a second process that allocates and exits: its books at exit come with the exit */
	p = (struct proc){ .t = { .pid = RF_PID2, .start_time = RF_START2, .first_ns = ts } };
	snprintf(p.t.comm, sizeof(p.t.comm), "worker");
	recorder__proc_new(r, &p);
	rf_call(r, RF_PID2, RF_START2, &ts, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
		.op = GL_OP_ALLOC, .key = 0x30000000, .bytes = RF_MIB / 2, .seq = 1 }, s1);
	/* its exit record as BPF sent it is left to the exit hook */
	exit_rec.hdr = (struct gl_hdr){ GL_REC_PROC, sizeof(exit_rec), RF_PID2, RF_PID2, RF_START2,
					ts += 1000000 };
	recorder__applied(r, &exit_rec, sizeof(exit_rec), 0);
	p.t.exit_ns = ts;
	p.t.final.start_time = RF_START2;
	p.t.final.bytes[GL_CLASS_DEVICE] = RF_MIB / 2;
	p.t.final.allocs[GL_CLASS_DEVICE] = 1;
	p.t.final.alloc_calls = 1;
	recorder__proc_exit(r, &p);
	err = recorder__tick(r, ts, stats);
	if (o->no_end)
		goto cleanup;
	bpf.bytes[GL_CLASS_DEVICE] = RF_DEVICE_BYTES;
	bpf.allocs[GL_CLASS_DEVICE] = RF_DEVICE_ALLOCS;
	bpf.bytes[GL_CLASS_HOST_PINNED] = RF_PINNED_BYTES;
	bpf.allocs[GL_CLASS_HOST_PINNED] = 1;
	if (o->windows) {
		bpf.bytes[GL_CLASS_TORCH_BLOCK] = RF_BLOCKS2 * RF_BLOCK;
		bpf.allocs[GL_CLASS_TORCH_BLOCK] = RF_BLOCKS2;
	}
	bpf.failures = 1;
	bpf.unmatched_frees = 1;
	/* every call counted, as BPF counts them: the books agree with no call in flight */
	bpf.alloc_calls = 4 + o->churn;
	bpf.free_calls = 2 + o->churn;
	recorder__bpf_proc(r, RF_PID, &bpf);
	err = recorder__finish(r, ts + 1000000, stats, 0, 100) ?: err;
cleanup:
	recorder__free(r);
	stacks__free(s);
	modules__free(m);
	return err;
}

#endif /* GL_RECORD_FIXTURE_H */
