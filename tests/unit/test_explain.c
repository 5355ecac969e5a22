// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_explain.c - the interval arithmetic of free extents (segments minus
 * blocks) and the classification of out-of-memory failures, each cause
 * against its expected line.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "books/explain.h"
#include "model/pattern.h"
#include "report/report.h"
#include "unit.h"

#define KIB (1ULL << 10)
#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static void subtract(struct extent *segs, size_t ns, struct extent *blocks, size_t nb,
		     struct extent_stats *st)
{
	extents__subtract(segs, ns, blocks, nb, st);
}

static void test_whole_segment_free(void **state)
{
	struct extent segs[] = { { 0x1000, 4096 } };
	struct extent_stats st;

	(void)state;
	subtract(segs, 1, NULL, 0, &st);
	assert_int_equal(st.segment_bytes, 4096);
	assert_int_equal(st.free_bytes, 4096);
	assert_int_equal(st.largest_free, 4096);
	assert_int_equal(st.nr_free, 1);
	assert_int_equal(st.used_bytes, 0);
	assert_true(extents__fragmentation(&st) == 0);
}

static void test_alternate_blocks_split_the_reserve(void **state)
{
	/* two 8 MiB segments, out of order; 1 MiB blocks in every other slot */
	struct extent segs[] = { { 64 * MIB, 8 * MIB }, { 16 * MIB, 8 * MIB } };
	struct extent blocks[8];
	struct extent_stats st;
	size_t n = 0;

	(void)state;
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 8; i += 2)
			blocks[n++] = (struct extent){ segs[s].start + (uint64_t)i * MIB, MIB };
	subtract(segs, 2, blocks, n, &st);
	assert_int_equal(st.segment_bytes, 16 * MIB);
	assert_int_equal(st.used_bytes, 8 * MIB);
	assert_int_equal(st.free_bytes, 8 * MIB);
	assert_int_equal(st.nr_free, 8);
	assert_int_equal(st.largest_free, MIB);
	assert_int_equal(st.outside_bytes, 0);
	assert_true(extents__fragmentation(&st) > 0.87 && extents__fragmentation(&st) < 0.88);
}

static void test_free_extents_never_span_segments(void **state)
{
	/* adjacent segments, each with its first half free: two extents, not one */
	struct extent segs[] = { { 0, 4 * MIB }, { 4 * MIB, 4 * MIB } };
	struct extent blocks[] = { { 2 * MIB, 2 * MIB }, { 6 * MIB, 2 * MIB } };
	struct extent_stats st;

	(void)state;
	subtract(segs, 2, blocks, 2, &st);
	assert_int_equal(st.nr_free, 2);
	assert_int_equal(st.largest_free, 2 * MIB);
	assert_int_equal(st.free_bytes, 4 * MIB);
}

static void test_blocks_outside_and_overlapping(void **state)
{
	/* a block before the segment, one straddling its start, overlapping blocks, one past
	 * its end, one after it: only what lies inside counts as used, once */
	struct extent segs[] = { { 100, 100 } };
	struct extent blocks[] = {
		{ 10, 20 }, { 90, 20 }, { 120, 30 }, { 130, 10 }, { 190, 20 }, { 300, 5 }, { 0, 0 },
	};
	struct extent_stats st;

	(void)state;
	subtract(segs, 1, blocks, 7, &st);
	assert_int_equal(st.segment_bytes, 100);
	/* inside: [100,110) [120,150) [190,200) = 50 used; free [110,120) [150,190) */
	assert_int_equal(st.used_bytes, 50);
	assert_int_equal(st.free_bytes, 50);
	assert_int_equal(st.nr_free, 2);
	assert_int_equal(st.largest_free, 40);
	/* outside: [10,30) [90,100) [200,210) [300,305) */
	assert_int_equal(st.outside_bytes, 45);
}

static void test_block_across_two_segments(void **state)
{
	struct extent segs[] = { { 0, 100 }, { 200, 100 } };
	struct extent blocks[] = { { 50, 200 } };
	struct extent_stats st;

	(void)state;
	subtract(segs, 2, blocks, 1, &st);
	assert_int_equal(st.used_bytes, 100);
	assert_int_equal(st.outside_bytes, 100);
	assert_int_equal(st.free_bytes, 100);
	assert_int_equal(st.largest_free, 50);
	assert_int_equal(st.nr_free, 2);
}

static void test_overlapping_segments_merge(void **state)
{
	struct extent segs[] = { { 0, 100 }, { 50, 100 }, { 0, 0 } };
	struct extent_stats st;

	(void)state;
	subtract(segs, 3, NULL, 0, &st);
	assert_int_equal(st.segment_bytes, 150);
	assert_int_equal(st.nr_free, 1);
}

static void test_library_groups(void **state)
{
	static const struct {
		const char *path, *group;
		bool program;
	} cases[] = {
		{ "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "nccl", false },
		{ "/venv/nvidia/cublas/lib/libcublasLt.so.12", "cublas", false },
		{ "/venv/nvidia/cublas/lib/libcublas.so.12", "cublas", false },
		{ "/venv/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "cudnn", false },
		{ "/venv/site-packages/cupy/_core/core.cpython-312-x86_64-linux-gnu.so", "cupy",
		  false },
		{ "/venv/site-packages/cupy_backends/cuda/api/runtime.cpython-312.so", "cupy",
		  false },
		{ "/venv/site-packages/jaxlib/xla_extension.so", "xla", false },
		{ "/opt/xla/libxla_gpu.so", "xla", false },
		{ "/venv/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so", "xla", false },
		{ "/venv/site-packages/jax_cuda13_plugin/_triton.so", "xla", false },
		{ "/srv/train", "program", true },
		{ "/usr/lib/libfoo.so.1", "libfoo.so.1", false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(explain__library_group(cases[i].path, cases[i].program),
				    cases[i].group);
	assert_true(explain__is_torch_allocator("/venv/torch/lib/libc10_cuda.so"));
	assert_false(explain__is_torch_allocator("/venv/torch/lib/libc10.so"));
	assert_false(explain__is_torch_allocator(NULL));
}

/* A framework's preallocated pool: one allocation of a large share of its device. */
static void test_pools(void **state)
{
	const char *fw, *with;

	(void)state;
	/* JAX's default: 75 % of the device in one block, XLA named, its two settings given */
	assert_true(explain__is_pool("xla", 60 * GIB, 80 * GIB, &fw, &with));
	assert_string_equal(fw, "XLA");
	assert_non_null(strstr(with, "XLA_PYTHON_CLIENT_PREALLOCATE=false"));
	assert_non_null(strstr(with, "XLA_PYTHON_CLIENT_ALLOCATOR=platform"));
	/* XLA_PYTHON_CLIENT_MEM_FRACTION=.25 still is one */
	assert_true(explain__is_pool("xla", 20 * GIB, 80 * GIB, &fw, &with));
	assert_false(explain__is_pool("xla", 19 * GIB, 80 * GIB, &fw, &with));
	assert_null(fw);
	/* another library: said generically */
	assert_true(explain__is_pool("libfoo.so", 40 * GIB, 80 * GIB, &fw, &with));
	assert_null(fw);
	assert_non_null(strstr(with, "allocate on demand"));
	/* no device total: a smaller floor for XLA than for an unknown library */
	assert_true(explain__is_pool("xla", 2 * GIB, 0, &fw, &with));
	assert_false(explain__is_pool("libfoo.so", 2 * GIB, 0, &fw, &with));
	assert_true(explain__is_pool("libfoo.so", 5 * GIB, 0, &fw, &with));
	assert_false(explain__is_pool(NULL, 512 * MIB, 80 * GIB, &fw, &with));
}

static struct snap_frame fr_pool[] = {
	{ .kind = "native", .function = "cuMemAlloc_v2", .module = "/usr/lib/libcuda.so.1" },
	{ .kind = "native", .function = "BFCAllocator::Init", .module = "/j/xla_extension.so" },
	{ .kind = "python", .function = "<module>", .file = "/srv/jax_job.py", .line = 7 },
};

/* The text names the pool, its share, its line and both settings. */
static void test_pool_text(void **state)
{
	struct snap_stack st = { .id = 3,
				 .cls = GL_CLASS_DEVICE,
				 .outstanding_bytes = 60 * GIB,
				 .outstanding_allocs = 1,
				 .verdict = "steady",
				 .nframes = 3,
				 .frames = fr_pool };
	struct snap_proc p = { .pid = 7, .nstacks = 1, .stacks = &st };
	struct unit_mem m;
	FILE *f = unit_mem_open(&m);
	const char *with;
	const char *fw;

	(void)state;
	assert_true(explain__is_pool("xla", 60 * GIB, 80 * GIB, &fw, &with));
	p.memory = (struct snap_memory){ .valid = true,
					 .device_bytes = 60 * GIB,
					 .outside_torch = 60 * GIB,
					 .npools = 1 };
	p.memory.pools[0] = (struct snap_pool){ .dev = 0,
						.bytes = 60 * GIB,
						.dev_total = 80 * GIB,
						.stack = 3,
						.library = "xla",
						.framework = fw,
						.visible_with = with };
	report__memory_text(f, &p, "  ");
	unit_mem_close(&m);
	assert_non_null(strstr(m.buf, "pool: XLA's preallocated pool, 60.00 GiB in one allocation "
				      "(75% of device 0's 80.00 GiB) at jax_job.py:7"));
	assert_non_null(strstr(m.buf, "growth inside it is invisible to gpuleak"));
	assert_non_null(strstr(m.buf, "XLA_PYTHON_CLIENT_PREALLOCATE=false "
				      "XLA_PYTHON_CLIENT_ALLOCATOR=platform"));
	free(m.buf);
}

/* Each cause from facts as the books would have them; the lines in expected/. */
static void test_oom_causes(void **state)
{
	const struct {
		const char *name;
		struct oom_facts f;
	} cases[] = {
		{ "fragmentation",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 60 * MIB,
		    .torch_allocated = 28 * MIB,
		    .free_extents = 32 * MIB,
		    .largest_free = MIB,
		    .nr_free = 32,
		    .nvml = true,
		    .dev_total = 64 * MIB,
		    .dev_free = 4 * MIB } },
		{ "leak",
		  { .request = 2 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 62 * MIB,
		    .torch_reserved = 62 * MIB,
		    .torch_allocated = 62 * MIB,
		    .leak_bytes = 40 * MIB,
		    .nvml = true,
		    .dev_total = 64 * MIB } },
		{ "torch_cache",
		  { .request = 16 * MIB,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 56 * MIB,
		    .torch_allocated = 8 * MIB,
		    .free_extents = 48 * MIB,
		    .largest_free = 48 * MIB,
		    .outside_torch = 4 * MIB,
		    .top_lib = "cublas",
		    .top_lib_bytes = 4 * MIB } },
		{ "outside_torch",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 20 * MIB,
		    .torch_allocated = 20 * MIB,
		    .outside_torch = 40 * MIB,
		    .top_lib = "nccl",
		    .top_lib_bytes = 40 * MIB } },
		/* PyTorch beside JAX in one process: XLA's preallocation holds the device */
		{ "outside_torch_xla",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 12 * MIB,
		    .torch_allocated = 12 * MIB,
		    .outside_torch = 48 * MIB,
		    .top_lib = "xla",
		    .top_lib_bytes = 48 * MIB } },
		{ "other_processes",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .held = 20 * MIB,
		    .torch_reserved = 20 * MIB,
		    .nvml = true,
		    .proc_listed = true,
		    .proc_used = 20 * MIB,
		    .dev_total = 64 * MIB,
		    .others_used = 40 * MIB } },
		{ "before_attach",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .held = 8 * MIB,
		    .torch_reserved = 8 * MIB,
		    .nvml = true,
		    .proc_listed = true,
		    .proc_used = 60 * MIB,
		    .dev_total = 64 * MIB } },
		{ "peak",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 60 * MIB,
		    .torch_allocated = 60 * MIB,
		    .nvml = true,
		    .proc_listed = true,
		    .proc_used = 60 * MIB,
		    .dev_total = 64 * MIB,
		    .dev_free = 4 * MIB } },
		{ "no_nvml",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 60 * MIB,
		    .torch_allocated = 60 * MIB } },
		/* a request below the largest free extent is no fragmentation, whatever the split */
		{ "not_fragmentation",
		  { .request = MIB,
		    .torch_request = true,
		    .blocks_seen = true,
		    .held = 60 * MIB,
		    .torch_reserved = 60 * MIB,
		    .torch_allocated = 28 * MIB,
		    .free_extents = 32 * MIB,
		    .largest_free = MIB,
		    .nr_free = 32 } },
		/* without the blocks the reserve cannot be split: no fragmentation claimed */
		{ "driver_only",
		  { .request = 8 * MIB,
		    .torch_request = true,
		    .held = 60 * MIB,
		    .torch_reserved = 60 * MIB,
		    .free_extents = 60 * MIB,
		    .largest_free = MIB } },
	};
	struct unit_mem m;
	FILE *f = unit_mem_open(&m);
	struct oom_explain ex;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oom__classify(&cases[i].f, &ex);
		assert_non_null(oom__cause_name(ex.cause));
		assert_non_null(ex.action);
		fprintf(f, "%s: %s: %s\n  action: %s\n", cases[i].name, oom__cause_name(ex.cause),
			ex.why, ex.action);
	}
	unit_check_expected("oom_causes.txt", unit_mem_close(&m));
	free(m.buf);
	assert_null(oom__cause_name(OOM_CAUSE_NONE));
}

static struct snap_frame fr_backward[] = {
	{ .kind = "native", .function = "faketorch_malloc" },
	{ .kind = "native", .function = "torch::autograd::Engine::evaluate_function" },
	{ .kind = "python", .function = "train_step", .file = "train.py", .line = 9 },
};

static struct snap_frame fr_forward[] = {
	{ .kind = "native", .function = "faketorch_malloc" },
	{ .kind = "python", .function = "Model.forward", .file = "model.py", .line = 4 },
};

/* Each pattern from the counts and frames of a leaking stack; none where they do not fit. */
static void test_leak_patterns(void **state)
{
	const struct {
		const char *name;
		struct snap_stack st;
	} cases[] = {
		{ "pinned",
		  { .cls = GL_CLASS_HOST_PINNED,
		    .verdict = "leak",
		    .allocs = 20,
		    .outstanding_allocs = 20,
		    .outstanding_bytes = 20 * MIB } },
		{ "graph",
		  { .cls = GL_CLASS_TORCH_BLOCK,
		    .verdict = "leak",
		    .allocs = 30,
		    .frees = 2,
		    .outstanding_allocs = 28,
		    .outstanding_bytes = 28 * MIB,
		    .nframes = 3,
		    .frames = fr_backward } },
		{ "outputs",
		  { .cls = GL_CLASS_TORCH_BLOCK,
		    .verdict = "leak",
		    .allocs = 12,
		    .outstanding_allocs = 12,
		    .outstanding_bytes = 12 * MIB,
		    .nframes = 2,
		    .frames = fr_forward } },
		{ "attribute",
		  { .cls = GL_CLASS_TORCH_BLOCK,
		    .verdict = "leak",
		    .allocs = 40,
		    .frees = 39,
		    .outstanding_allocs = 1,
		    .outstanding_bytes = 40 * MIB,
		    .nframes = 2,
		    .frames = fr_forward } },
		{ "churn",
		  { .cls = GL_CLASS_DEVICE,
		    .verdict = "leak",
		    .allocs = 400,
		    .frees = 350,
		    .outstanding_allocs = 50,
		    .outstanding_bytes = 3 * MIB } },
		{ "steady",
		  { .cls = GL_CLASS_TORCH_BLOCK,
		    .verdict = "steady",
		    .allocs = 12,
		    .outstanding_allocs = 12,
		    .outstanding_bytes = 12 * MIB } },
		{ "few",
		  { .cls = GL_CLASS_DEVICE,
		    .verdict = "leak",
		    .allocs = 3,
		    .outstanding_allocs = 3,
		    .outstanding_bytes = 3 * MIB } },
	};
	struct unit_mem m;
	FILE *f = unit_mem_open(&m);
	char ev[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = pattern__of(&cases[i].st, ev, sizeof(ev));

		fprintf(f, "%s: %s%s%s\n", cases[i].name, p ? p : "none", p ? ": " : "", ev);
		if (p)
			fprintf(f, "  fix: %s\n", pattern__fix(&cases[i].st, p));
		if (!p)
			assert_string_equal(ev, "");
	}
	/* evidence cut to its buffer, and says so */
	assert_non_null(pattern__of(&cases[0].st, ev, 16));
	assert_int_equal(strlen(ev), 15);
	assert_string_equal(ev + 12, "...");
	unit_check_expected("leak_patterns.txt", unit_mem_close(&m));
	free(m.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_segment_free),
		cmocka_unit_test(test_alternate_blocks_split_the_reserve),
		cmocka_unit_test(test_free_extents_never_span_segments),
		cmocka_unit_test(test_blocks_outside_and_overlapping),
		cmocka_unit_test(test_block_across_two_segments),
		cmocka_unit_test(test_overlapping_segments_merge),
		cmocka_unit_test(test_library_groups),
		cmocka_unit_test(test_pools),
		cmocka_unit_test(test_pool_text),
		cmocka_unit_test(test_oom_causes),
		cmocka_unit_test(test_leak_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
