// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_report.c - report/text.c and report/json.c: snapshots built by hand
 * give exactly the text and JSON in tests/unit/expected/, the JSON carries
 * every field name of the README's contract, and write errors are reported.
 */
#include <math.h>
#include "unit.h"
#include "report/report.h"
#include "util/fmt.h"

static struct snap_frame frames_a[] = {
	{ .kind = "native", .function = "cuMemAlloc_v2", .module = "libcuda",
	  .offset = 0 },
	{ .kind = "native", .function = "cudaMalloc", .module = "/usr/lib/libcudart.so.12",
	  .build_id = "0123456789abcdef", .offset = 0x4a10, .sym_off = 0x45 },
	{ .kind = "native", .function = "train_step", .module = "/opt/app/bin/train",
	  .file = "train.c", .line = 42, .offset = 0x1234, .sym_off = 0x10 },
	{ .kind = "native", .module = "/opt/app/lib/libnosym.so", .offset = 0x999 },
	{ .kind = "native", .address = 0x7f0012345678 },
	{ .kind = "python", .function = "Model.forward", .file = "model.py", .line = 17 },
	{ .kind = "python" },
};

static struct snap_frame frames_b[] = {
	{ .kind = "native", .function = "cuMemAllocManaged", .module = "libcuda" },
	{ .kind = "python", .function = "load", .file = "data.py", .line = 3 },
};

static struct snap_frame frames_c[] = {
	{ .kind = "native", .function = "cuMemAddressReserve", .module = "libcuda" },
};

static struct snap_frame frames_d[] = {
	{ .kind = "native", .function = "cuMemHostAlloc", .module = "libcuda" },
};

static struct snap_stack stacks_1[] = {
	{ .id = 3, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 1536ULL << 20,
	  .outstanding_allocs = 12, .allocs = 12, .frees = 0, .alloc_bytes = 1536ULL << 20,
	  .peak_bytes = 1536ULL << 20, .verdict = "leak", .growth_bytes_per_s = 104857600.5,
	  .why = "grew in 12 of 12 steps", .nframes = 7, .frames = frames_a },
	{ .id = 9, .cls = GL_CLASS_MANAGED, .outstanding_bytes = 1,
	  .outstanding_allocs = 1, .allocs = 5, .frees = 4, .alloc_bytes = 5000,
	  .peak_bytes = 4096, .verdict = "steady", .growth_bytes_per_s = 0,
	  .why = "flat for 30 s", .nframes = 2, .frames = frames_b },
	{ .id = 4, .cls = GL_CLASS_ADDRESS, .outstanding_bytes = 64ULL << 30,
	  .outstanding_allocs = 1, .allocs = 1, .verdict = "unknown", .nframes = 1,
	  .frames = frames_c },
	{ .id = 5, .cls = GL_CLASS_HOST_PINNED, .outstanding_bytes = 20ULL << 20,
	  .outstanding_allocs = 18, .allocs = 18, .alloc_bytes = 20ULL << 20,
	  .peak_bytes = 20ULL << 20, .verdict = "unknown", .growth_bytes_per_s = NAN,
	  .why = "too few points", .nframes = 1, .frames = frames_d },
};

static struct snap_stack fail_stack = { .nframes = 2, .frames = frames_a };

static struct snap_oom oom_1 = {
	.cause = "fragmentation", .why = "PyTorch's reserve had 96.00 MiB free in 48 extents",
	.action = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", .dev = 0,
	.torch_request = true, .blocks_seen = true, .held = 1536ULL << 20,
	.torch_reserved = 1024ULL << 20, .torch_allocated = 928ULL << 20,
	.free_extents = 96ULL << 20, .largest_free = 2ULL << 20, .nr_free = 48,
	.outside_torch = 512ULL << 20, .top_lib = "nccl", .top_lib_bytes = 512ULL << 20,
	.nvml = true, .dev_total = 80ULL << 30, .dev_free = 1ULL << 20, .others_used = 0,
	.retry = "failed", .retry_freed = 0,
};

static struct snap_failure failures_1[] = {
	{ .ts = 123456789, .bytes = 80ULL << 30, .held_device = 1536ULL << 20,
	  .api = "cuMemAlloc_v2", .error = "CUDA_ERROR_OUT_OF_MEMORY", .rc = 2,
	  .cls = GL_CLASS_DEVICE, .stack = &fail_stack, .oom = &oom_1 },
	{ .ts = 123456999, .bytes = 0, .held_device = 0, .api = "cuMemHostAlloc",
	  .error = "CUDA_ERROR_INVALID_VALUE", .rc = 1, .cls = GL_CLASS_HOST_PINNED },
};

static struct snap_proc procs[3];
static struct snapshot snap;

/* Three processes: a running leaker, an exited one whose books disagree, one BPF never saw. */
static void build(void)
{
	struct snap_proc *p = &procs[0];

	memset(procs, 0, sizeof(procs));
	memset(&snap, 0, sizeof(snap));
	*p = (struct snap_proc){
		.pid = 4242, .ns_pid = 4242, .comm = "python3", .start_time = 5,
		.duration_ns = 30500000000ULL, .outstanding_allocs = 31,
		.peak_device = 1600ULL << 20, .alloc_calls = 40, .free_calls = 7, .failures = 2,
		.oom_failures = 1, .unmatched_frees = 1, .dropped_bytes = 4096, .failed_frees = 3,
		.bpf_valid = true, .consistent = true, .nstacks = 4, .stacks = stacks_1,
		.nfailures = 2, .failures_list = failures_1,
	};
	p->bytes[GL_CLASS_DEVICE] = 1536ULL << 20;
	p->bytes[GL_CLASS_MANAGED] = 1;
	p->bytes[GL_CLASS_HOST_PINNED] = 20ULL << 20;
	p->bytes[GL_CLASS_ADDRESS] = 64ULL << 30;
	p->bpf.bytes[GL_CLASS_DEVICE] = 1536ULL << 20;
	p->bpf.bytes[GL_CLASS_MANAGED] = 1;
	p->bpf.bytes[GL_CLASS_HOST_PINNED] = 20ULL << 20;
	p->bpf.bytes[GL_CLASS_ADDRESS] = 64ULL << 30;
	p->bpf.allocs[GL_CLASS_DEVICE] = 12;
	p->bpf.allocs[GL_CLASS_MANAGED] = 1;
	p->bpf.allocs[GL_CLASS_HOST_PINNED] = 18;
	p->bpf.alloc_calls = 40;
	p->bpf.free_calls = 7;
	p->bpf.failures = 2;
	p->bpf.unmatched_frees = 1;
	p->memory = (struct snap_memory){
		.valid = true, .blocks_seen = true, .ndevs = 1, .nvml_valid = true,
		.nvml_bytes = 2048ULL << 20, .device_bytes = 1536ULL << 20,
		.torch_reserved = 1024ULL << 20, .torch_allocated = 928ULL << 20,
		.torch_cached = 96ULL << 20, .outside_torch = 512ULL << 20,
		.blocks_in_seen = 928ULL << 20,
		.largest_free = 2ULL << 20, .fragmentation = 1 - 2.0 / 96, .unseen = 512ULL << 20,
		.pinned_host = 20ULL << 20, .managed = 1,
	};
	p->memory.devs[0] = (struct snap_mem_dev){
		.dev = 0, .nvml_valid = true, .nvml_bytes = 2048ULL << 20,
		.device_bytes = 1536ULL << 20, .torch_reserved = 1024ULL << 20,
		.torch_allocated = 928ULL << 20, .torch_cached = 96ULL << 20, .torch_blocks = 464,
		.blocks_in_seen = 928ULL << 20,
		.largest_free = 2ULL << 20, .nr_free = 48, .fragmentation = 1 - 2.0 / 96,
		.outside_torch = 512ULL << 20, .nlibs = 2,
		.libs = { { "nccl", 384ULL << 20 }, { "cublas", 128ULL << 20 } },
	};

	p = &procs[1];
	*p = (struct snap_proc){
		.pid = 77, .ns_pid = 3, .comm = "a\"b\\c\x01\xff", .exited = true,
		.duration_ns = 1000000, .outstanding_allocs = 1, .peak_device = 1024,
		.alloc_calls = 1, .bpf_valid = true, .consistent = false,
	};
	p->bytes[GL_CLASS_DEVICE] = 1024;
	p->bpf.bytes[GL_CLASS_DEVICE] = 2048;
	p->bpf.allocs[GL_CLASS_DEVICE] = 2;
	p->bpf.alloc_calls = 2;

	p = &procs[2];
	*p = (struct snap_proc){ .pid = 9, .comm = "idle", .bpf_valid = false };

	snap = (struct snapshot){
		.now_ns = 999, .duration_s = 30.25, .unmatched_frees = 1, .complete = false,
		.nprocs = 3, .procs = procs, .stack_mode = "fp", .nr_probes = 100,
		.malformed = 2, .stack_missing = 5,
	};
	for (int i = 0; i < GL_NR_STATS; i++)
		snap.stats[i] = i * 10;
	snap.stats[GL_STAT_LOST_STACK] = 0;
	snap.stats[GL_STAT_LOST_CALL] = 0;
	snap.stats[GL_STAT_LOST_PROC] = 0;
}

static char *text_of(const struct snapshot *s, const struct text_opts *o)
{
	struct unit_mem m;

	assert_int_equal(report__text(unit_mem_open(&m), s, o), 0);
	return unit_mem_close(&m);
}

static char *json_of(const struct snapshot *s)
{
	struct unit_mem m;

	assert_int_equal(report__json(unit_mem_open(&m), s), 0);
	return unit_mem_close(&m);
}

static void test_text_full(void **state)
{
	struct text_opts o = { 0 };
	char *out;

	build();
	out = text_of(&snap, &o);
	unit_check_expected("report_full.txt", out);
	free(out);
}

static void test_text_limits(void **state)
{
	struct text_opts o = { .max_stacks = 1, .max_frames = 2 };
	char *out;

	build();
	out = text_of(&snap, &o);
	unit_check_expected("report_limits.txt", out);
	free(out);
	o.max_frames = 6; /* the first stack has 7 */
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "      ... 1 more frame\n"));
	free(out);
}

/* Records left unread make the books lag the kernel's: each process's warning names it. */
static void test_text_books_behind(void **state)
{
	struct text_opts o = { 0 };
	char *out;

	build();
	snap.unread_bytes = 1 << 20;
	snap.complete = false;
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "WARNING: these books are behind the kernel's exact counters "
				    "(device 2.00 KiB there; records not read yet)\n"));
	assert_null(strstr(out, "books differ"));
	assert_non_null(strstr(out, "1.00 MiB of records from before this report were not read"));
	free(out);
}

static void test_text_summary(void **state)
{
	struct text_opts o = { .summary = true, .max_stacks = 1 };
	char *out;

	build();
	out = text_of(&snap, &o);
	unit_check_expected("report_summary.txt", out);
	assert_int_equal(unit_lines(out), 4);
	free(out);
}

/* "... N more stacks" counts the stacks that would have been shown, not address space. */
static void test_text_more_stacks_count(void **state)
{
	struct text_opts o = { .max_stacks = 1 };
	struct snap_stack st[3];
	char *out;

	build();
	st[0] = stacks_1[0];
	st[1] = stacks_1[2]; /* address space: never listed */
	st[2] = stacks_1[1];
	procs[0].stacks = st;
	procs[0].nstacks = 3;
	procs[0].nfailures = 0;
	snap.nprocs = 1;
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "  ... 1 more stacks\n"));
	free(out);
	/* an address-space stack after the last shown one is not "more" */
	st[1] = stacks_1[1];
	st[2] = stacks_1[2];
	procs[0].nstacks = 3;
	o.max_stacks = 2;
	out = text_of(&snap, &o);
	assert_null(strstr(out, "more stacks"));
	assert_non_null(strstr(out, "  [2] managed"));
	free(out);
}

/* A ctypes call from a three-line Python loop: the interpreter's, libffi's and start-up
 * frames fold into one line each run, the allocating call and the program's lines stay,
 * also where a frame limit falls in the last run; --full-stacks shows them all. */
static void test_text_folds_plumbing(void **state)
{
#define NATIVE(fn, mod) { .kind = "native", .function = fn, .module = mod }
	struct snap_frame fr[] = {
		NATIVE("cuMemAlloc_v2", "/usr/lib/libcuda.so.1"),
		NATIVE("ffi_call_unix64", "/usr/lib/libffi.so.8"),
		NATIVE("ffi_call", "/usr/lib/libffi.so.8"),
		NATIVE("_ctypes_callproc", "/usr/lib/_ctypes.cpython-311-x86_64-linux-gnu.so"),
		NATIVE("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
		{ .kind = "python", .function = "step", .file = "/home/u/loop.py", .line = 3 },
		NATIVE("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
		NATIVE("Py_RunMain", "/usr/bin/python3.11"),
		NATIVE("__libc_start_call_main", "/usr/lib/libc.so.6"),
		NATIVE("__libc_start_main", "/usr/lib/libc.so.6"),
		NATIVE("_start", "/usr/bin/python3.11"),
	};
#undef NATIVE
	struct snap_stack st = { .id = 1, .cls = GL_CLASS_DEVICE, .verdict = "unknown",
				 .outstanding_bytes = 1 << 20, .outstanding_allocs = 1,
				 .allocs = 1, .alloc_bytes = 1 << 20, .nframes = 11, .frames = fr };
	struct text_opts o = { 0 };
	char *out;

	build();
	procs[0].stacks = &st;
	procs[0].nstacks = 1;
	procs[0].nfailures = 0;
	snap.nprocs = 1;
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "      at loop.py:3 step\n"
				    "      #0  cuMemAlloc_v2+0x0 (libcuda.so.1)\n"
				    "      #1-#4 4 frames in libffi.so.8, "
				    "_ctypes.cpython-311-x86_64-linux-gnu.so, python3.11 "
				    "(--full-stacks shows them)\n"
				    "      #5  step (/home/u/loop.py:3) [python]\n"
				    "      #6-#10 5 frames in python3.11, libc.so.6 "
				    "(--full-stacks shows them)\n"));
	free(out);
	/* a limit inside the trailing plumbing: it folds whole, no "more" line after it */
	o.max_frames = 8;
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "      #6-#10 5 frames in python3.11, libc.so.6 "
				    "(--full-stacks shows them)\n"));
	assert_null(strstr(out, "more frame"));
	free(out);
	/* a limit before the program's last line: cut there, the rest counted */
	o.max_frames = 5;
	out = text_of(&snap, &o);
	assert_non_null(strstr(out, "      #1-#4 4 frames in"));
	assert_null(strstr(out, "step (/home/u/loop.py:3)"));
	assert_non_null(strstr(out, "      ... 6 more frames\n"));
	free(out);
	o.max_frames = 0;
	o.full_stacks = true;
	out = text_of(&snap, &o);
	assert_null(strstr(out, "frames in"));
	assert_non_null(strstr(out, "      #10 _start+0x0 (python3.11)\n"));
	free(out);
}

static void test_text_lost_and_empty(void **state)
{
	struct text_opts o = { 0 };
	struct snapshot empty = { .complete = true };
	char *out;

	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n");
	free(out);
	empty.lost_events = 3;
	empty.complete = false;
	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n"
				 "WARNING: 3 events were lost (ring buffer full); figures are "
				 "incomplete: raise --ringbuf-size.\n");
	free(out);
	/* records the last drain left unread: said after a loss, before the rest */
	empty.unread_bytes = 3 << 20;
	out = text_of(&empty, &o);
	assert_non_null(strstr(out, "WARNING: 3 events were lost"));
	free(out);
	empty.lost_events = 0;
	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n"
				 "WARNING: gpuleak reads its ring buffer slower than the programs "
				 "fill it: 3.00 MiB of records from before this report were not "
				 "read yet (1 s of reading); the figures are behind the kernel's, a "
				 "later report catches up.\n");
	free(out);
	empty.unread_bytes = 0;
	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n"
				 "WARNING: the books disagree with the kernel's exact counters: "
				 "the totals are the kernel's, the stacks are incomplete (see "
				 "\"bpf\" in --json).\n");
	free(out);
	/* a cap that bites is named, with what it cost */
	empty.stats[GL_STAT_ALLOC_TABLE_FULL] = 99000;
	empty.cap_allocs = 1000;
	empty.untracked_allocs = 99000;
	empty.untracked_bytes = 99000ULL << 12;
	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n"
				 "WARNING: the kernel's allocation table (--max-allocs 1000) "
				 "was full: 99000 allocations (386.72 MiB) are in no figure, and "
				 "frees of them count as unmatched; raise --max-allocs.\n");
	free(out);
	/* so is the cap on stacks, which costs attribution, not totals */
	empty.complete = true;
	empty.cap_stacks = 16;
	empty.stack_overflows = 5;
	out = text_of(&empty, &o);
	assert_string_equal(out, "no CUDA allocations seen\n"
				 "NOTE: more distinct stacks than --max-stacks 16: 5 allocations "
				 "counted under one \"other stacks\" entry (totals exact)\n");
	free(out);
}

/* A process that could not be held at a library's mapping: named, with the library. */
static void test_text_unheld(void **state)
{
	struct snap_proc p = { .pid = 42, .comm = "job", .consistent = true, .unheld = 1,
			       .unheld_lib = "libcuda.so.1" };
	struct snapshot s = { .complete = false, .procs = &p, .nprocs = 1 };
	char why[512];

	assert_string_equal(report__incomplete_why(&s, why, sizeof(why)),
			    "PID 42 (job) mapped libcuda.so.1 and could not be held until its "
			    "probes were in (more than --max-held processes held at once, the "
			    "signal was refused, the hold outlasted --hold-timeout, or it was "
			    "continued by another tracer or a "
			    "SIGCONT): its first calls may be missing from the figures");
	s.lost_events = 1; /* lost events come first */
	assert_non_null(strstr(report__incomplete_why(&s, why, sizeof(why)), "events were lost"));
	/* the cap on processes is named with what it dropped */
	s.lost_events = 0;
	s.cap_procs = 2;
	s.procs_refused = 7;
	assert_string_equal(report__incomplete_why(&s, why, sizeof(why)),
			    "more processes than --max-procs 2: 7 records of processes past it "
			    "dropped, those processes are in no figure; raise --max-procs");
}

static void test_json_full(void **state)
{
	char *out;

	build();
	out = json_of(&snap);
	unit_check_expected("report_full.json", out);
	free(out);
}

static void test_json_empty(void **state)
{
	struct snapshot empty = { .complete = true };
	char *out = json_of(&empty);

	unit_check_expected("report_empty.json", out);
	free(out);
}

/* The README's "JSON report" field names: added to, never renamed. */
static void test_json_contract(void **state)
{
	static const char *const top[] = {
		"version", "lost_events", "unmatched_frees", "complete", "stats", "processes",
	};
	static const char *const proc[] = {
		"pid", "comm", "state", "device_bytes", "managed_bytes", "host_pinned_bytes",
		"address_space_bytes", "outstanding_allocs", "peak_device_bytes", "alloc_calls",
		"free_calls", "failures", "oom_failures", "unmatched_frees",
		"context_dropped_bytes", "unheld_mappings", "consistent", "bpf", "stacks",
		"failures_list",
	};
	static const char *const stack[] = {
		"memory", "outstanding_bytes", "outstanding_allocs", "allocs", "frees", "verdict",
		"growth_bytes_per_s", "frames",
	};
	static const char *const frame[] = { "kind", "function", "module", "offset", "build_id" };
	static const char *const failure[] = {
		"api", "error", "bytes", "frames", "oom", "cause", "why", "action",
		"request_bytes", "device_free_bytes", "torch_retry", "is_torch_retry",
	};
	static const char *const memory[] = {
		"memory", "nvml_bytes", "seen_bytes", "driver_level_only", "torch_reserved_bytes",
		"torch_allocated_bytes", "torch_cached_bytes", "largest_free_extent_bytes",
		"fragmentation", "outside_torch_bytes", "outside_torch_libraries", "library",
		"context_and_pre_attach_bytes", "unexplained_bytes", "pinned_host_bytes",
	};
	static const char *const values[] = {
		"\"version\":1,", "\"state\":\"running\"", "\"state\":\"exited\"",
		"\"memory\":\"device\"", "\"memory\":\"managed\"", "\"memory\":\"host_pinned\"",
		"\"verdict\":\"leak\"", "\"verdict\":\"steady\"", "\"verdict\":\"unknown\"",
		"\"kind\":\"native\"", "\"error\":\"CUDA_ERROR_OUT_OF_MEMORY\"",
		"\"consistent\":true", "\"consistent\":false", "\"complete\":false",
	};
	const struct {
		const char *const *names;
		size_t n;
	} groups[] = {
		{ top, sizeof(top) / sizeof(top[0]) },
		{ proc, sizeof(proc) / sizeof(proc[0]) },
		{ stack, sizeof(stack) / sizeof(stack[0]) },
		{ frame, sizeof(frame) / sizeof(frame[0]) },
		{ failure, sizeof(failure) / sizeof(failure[0]) },
		{ memory, sizeof(memory) / sizeof(memory[0]) },
		{ values, sizeof(values) / sizeof(values[0]) },
	};
	char *out, key[64];

	build();
	out = json_of(&snap);
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		for (size_t i = 0; i < groups[g].n; i++) {
			const char *name = groups[g].names[i];

			if (name[0] == '"')
				snprintf(key, sizeof(key), "%s", name);
			else
				snprintf(key, sizeof(key), "\"%s\":", name);
			if (!strstr(out, key))
				fail_msg("the JSON report has no %s", key);
		}
	}
	/* address-space stacks are not memory: not in the stack lists */
	assert_null(strstr(out, "\"memory\":\"address_space\""));
	/* a process BPF has no books for says so */
	assert_non_null(strstr(out, "\"bpf\":null"));
	free(out);
}

static void test_write_errors(void **state)
{
	FILE *f = fopen("/dev/full", "w");
	struct text_opts o = { 0 };

	assert_non_null(f);
	build();
	assert_int_equal(report__text(f, &snap, &o), -EIO);
	clearerr(f);
	assert_int_equal(report__json(f, &snap), -EIO);
	fclose(f);
}

/* Blocks in segments from before attach: no "reserved = allocated + cached" over a reserve
 * smaller than its blocks; the reserve seen is split alone, the rest said to predate. */
static void test_memory_reserve_before_attach(void **state)
{
	struct snap_proc p = { .pid = 9, .comm = "python3" };
	struct snap_memory *m = &p.memory;
	struct unit_mem mem;
	char *text;

	(void)state;
	*m = (struct snap_memory){ .valid = true, .blocks_seen = true, .device_bytes = 8ULL << 20,
				   .torch_reserved = 8ULL << 20, .torch_allocated = 26ULL << 20,
				   .torch_cached = 4ULL << 20, .largest_free = 4ULL << 20,
				   .blocks_outside = 22ULL << 20, .blocks_in_seen = 4ULL << 20 };
	report__memory_text(unit_mem_open(&mem), &p, "");
	text = unit_mem_close(&mem);
	assert_null(strstr(text, "reserved ="));
	assert_non_null(strstr(text, "PyTorch: 26.00 MiB allocated in blocks; part of its "
				     "reserve predates the attach: 22.00 MiB of the blocks"));
	assert_non_null(strstr(text, "of the reserve seen since attach: 8.00 MiB = 4.00 MiB "
				     "allocated + 4.00 MiB cached"));
	free(text);
	/* no segment seen at all: nothing is split */
	m->torch_reserved = m->device_bytes = m->torch_cached = m->blocks_in_seen = 0;
	m->blocks_outside = m->torch_allocated;
	report__memory_text(unit_mem_open(&mem), &p, "");
	text = unit_mem_close(&mem);
	assert_null(strstr(text, "allocated +"));
	assert_non_null(strstr(text, "no segment of PyTorch's was seen allocated since attach"));
	free(text);
}

static void test_memory_classes(void **state)
{
	assert_true(report__is_memory_class(GL_CLASS_DEVICE));
	assert_true(report__is_memory_class(GL_CLASS_MANAGED));
	assert_true(report__is_memory_class(GL_CLASS_HOST_PINNED));
	assert_false(report__is_memory_class(GL_CLASS_ADDRESS));
	assert_false(report__is_memory_class(GL_CLASS_IMPORTED));
	assert_false(report__is_memory_class(GL_NR_CLASSES));
	assert_false(report__is_memory_class(255));
}

static void test_fmt_bytes(void **state)
{
	char b[32];

	assert_string_equal(fmt_bytes(0, b, sizeof(b)), "0 B");
	assert_string_equal(fmt_bytes(1023, b, sizeof(b)), "1023 B");
	assert_string_equal(fmt_bytes(1024, b, sizeof(b)), "1.00 KiB");
	assert_string_equal(fmt_bytes(1536ULL << 20, b, sizeof(b)), "1.50 GiB");
	assert_string_equal(fmt_bytes(1ULL << 50, b, sizeof(b)), "1.00 PiB");
	assert_string_equal(fmt_bytes(UINT64_MAX, b, sizeof(b)), "16384.00 PiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_full),
		cmocka_unit_test(test_text_limits),
		cmocka_unit_test(test_text_books_behind),
		cmocka_unit_test(test_text_summary),
		cmocka_unit_test(test_text_more_stacks_count),
		cmocka_unit_test(test_text_unheld),
		cmocka_unit_test(test_text_folds_plumbing),
		cmocka_unit_test(test_text_lost_and_empty),
		cmocka_unit_test(test_json_full),
		cmocka_unit_test(test_json_empty),
		cmocka_unit_test(test_json_contract),
		cmocka_unit_test(test_write_errors),
		cmocka_unit_test(test_memory_reserve_before_attach),
		cmocka_unit_test(test_memory_classes),
		cmocka_unit_test(test_fmt_bytes),
	};

	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
