// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_site.c - model/site.c: the frame that names a stack, for each step of the rule and
 * each kind of frame it passes over, and report__site's line for it.
 */
#include "unit.h"
#include "model/site.h"
#include "report/report.h"

#define STACK(fr) ((struct snap_stack){ .nframes = sizeof(fr) / sizeof(fr[0]), .frames = fr })

static const struct snap_frame driver = { .kind = "native",
					  .function = "cuMemAlloc_v2",
					  .module = "/usr/lib/x86_64-linux-gnu/libcuda.so.1" };
static const struct snap_frame runtime = { .kind = "native",
					   .function = "cudaMalloc",
					   .module = "/usr/lib/libcudart.so.12" };
static const struct snap_frame allocator = { .kind = "native",
					     .function = "c10_malloc",
					     .module = "/opt/torch/lib/libc10_cuda.so" };
static const struct snap_frame ffi = { .kind = "native",
				       .function = "ffi_call_unix64",
				       .module = "/usr/lib/libffi.so.8" };
static const struct snap_frame torch_py = {
	.kind = "python",
	.function = "Linear.forward",
	.line = 116,
	.file = "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py"
};
static const struct snap_frame venv_py = {
	.kind = "python",
	.function = "Module._call_impl",
	.line = 1501,
	.file = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
};
static const struct snap_frame frozen_py = { .kind = "python",
					     .function = "_call_with_frames",
					     .file = "<frozen importlib._bootstrap>",
					     .line = 241 };
static const struct snap_frame user_py = { .kind = "python",
					   .function = "Model.forward",
					   .file = "/home/u/model.py",
					   .line = 17 };
static const struct snap_frame main_py = { .kind = "python",
					   .function = "<module>",
					   .file = "/home/u/train.py",
					   .line = 40 };
static const struct snap_frame nameless = { .kind = "native",
					    .module = "/opt/app/bin/app",
					    .offset = 0x1234 };
static const struct snap_frame note = { .kind = "native", .function = "[no Python frames]" };

static void check_pick(const struct snap_stack *st, const struct snap_frame *want, const char *line)
{
	char buf[128];

	assert_ptr_equal(site__pick(st), want);
	report__site(st, buf, sizeof(buf));
	assert_string_equal(buf, line);
}

/* The program's own innermost Python frame, past the library frames inside it. */
static void test_own_python(void **state)
{
	struct snap_frame fr[] = { driver,  runtime,   allocator, ffi,	  torch_py,
				   venv_py, frozen_py, user_py,	  main_py };
	struct snap_stack st = STACK(fr);

	(void)state;
	check_pick(&st, &fr[7], "model.py:17 Model.forward");
}

/* Only library Python frames: the innermost of them, not a native one inside it. */
static void test_library_python(void **state)
{
	struct snap_frame fr[] = { driver, ffi, torch_py, venv_py };
	struct snap_stack st = STACK(fr);

	(void)state;
	check_pick(&st, &fr[2], "linear.py:116 Linear.forward");
}

/* A Python frame whose file is unknown is not a library's. */
static void test_python_no_file(void **state)
{
	struct snap_frame fr[] = { driver, torch_py, { .kind = "python", .line = 3 }, user_py };
	struct snap_stack st = STACK(fr);

	(void)state;
	check_pick(&st, &fr[2], "?:3 ?");
}

/* No Python: the innermost named native frame outside the CUDA stack's libraries. */
static void test_native(void **state)
{
	struct snap_frame fr[] = { driver, runtime, allocator, note, nameless, ffi, driver };
	struct snap_stack st = STACK(fr);

	(void)state;
	check_pick(&st, &fr[5], "ffi_call_unix64 (libffi.so.8)");
}

/* A native site with its source line: the function as its source names it (the
 * compiler's clone suffixes dropped), file:line and module; a name with a dot of its own
 * (Go's main.main) kept whole. */
static void test_native_line(void **state)
{
	struct snap_frame fr[] = {
		driver,
		{ .kind = "native",
		  .function = "remember_activations.constprop.0.isra.0",
		  .module = "/opt/app/wl_demo",
		  .file = "/src/tests/workloads/wl_demo.c",
		  .line = 72 },
	};
	struct snap_frame go[] = {
		driver,
		{ .kind = "native",
		  .function = "main.train",
		  .module = "/opt/app/trainer",
		  .file = "/src/train.go",
		  .line = 9 },
	};
	struct snap_stack st = STACK(fr), g = STACK(go);

	(void)state;
	check_pick(&st, &fr[1], "remember_activations (wl_demo.c:72, wl_demo)");
	check_pick(&g, &go[1], "main.train (train.go:9, trainer)");
}

/* Nothing better: the innermost frame, named or not. */
static void test_innermost(void **state)
{
	struct snap_frame plumbing[] = { runtime, allocator, driver };
	struct snap_frame unnamed[] = { nameless, runtime };
	struct snap_stack a = STACK(plumbing), b = STACK(unnamed);

	(void)state;
	check_pick(&a, &plumbing[0], "cudaMalloc (libcudart.so.12)");
	check_pick(&b, &unnamed[0], "app+0x1234");
}

/* The API frame of a stack with no native frames is named as the reports always named it. */
static void test_api_only(void **state)
{
	struct snap_frame fr[] = {
		{ .kind = "native", .function = "cuMemHostAlloc", .module = "libcuda" }
	};
	struct snap_stack st = STACK(fr), empty = { 0 };
	char buf[32];

	(void)state;
	check_pick(&st, &fr[0], "cuMemHostAlloc (libcuda)");
	assert_null(site__pick(&empty));
	report__site(&empty, buf, sizeof(buf));
	assert_string_equal(buf, "[no stack]");
}

/* A program linked with the static CUDA runtime: its site is its own function. */
static void test_site_skips_the_static_runtime(void **state)
{
	struct snap_frame frames[] = {
		{ .kind = "native", .function = "cuMemAlloc_v2", .module = "libcuda.so.1" },
		{ .kind = "native",
		  .function = "libcudart_static_5382377d5c77",
		  .module = "/opt/app/fw_raw" },
		{ .kind = "native", .function = "cudaMalloc", .module = "/opt/app/fw_raw" },
		{ .kind = "native",
		  .function = "leak_malloc(unsigned long)",
		  .module = "/opt/app/fw_raw" },
		{ .kind = "native", .function = "main", .module = "/opt/app/fw_raw" },
	};
	struct snap_stack st = { .nframes = 5, .frames = frames };
	char buf[128];

	(void)state;
	assert_ptr_equal(site__pick(&st), &frames[3]);
	report__site(&st, buf, sizeof(buf));
	assert_string_equal(buf, "leak_malloc(unsigned long) (fw_raw)");
	/* a program's own function whose name only begins with "cuda" is the program's */
	frames[3].function = "cudata_load";
	assert_ptr_equal(site__pick(&st), &frames[3]);
	/* nothing but the runtime: the innermost frame */
	st.nframes = 3;
	assert_ptr_equal(site__pick(&st), &frames[0]);
}

/* Code generated by torch.compile is not the program's: the site is the caller's line. */
static void test_site_skips_generated_code(void **state)
{
	struct snap_frame frames[] = {
		{ .kind = "native", .function = "cuMemAlloc_v2", .module = "libcuda.so.1" },
		{ .kind = "python",
		  .function = "partition_0",
		  .line = 94,
		  .file = "/tmp/torchinductor_root/c5/c5u2hm5z2pv2lzjqc743ighma.py" },
		{ .kind = "python", .function = "forward", .line = 7, .file = "<eval_with_key>.3" },
		{ .kind = "python",
		  .function = "run_new_shape",
		  .line = 27,
		  .file = "/home/u/fw_compile.py" },
	};
	struct snap_stack st = { .nframes = 4, .frames = frames };
	char buf[128];

	(void)state;
	report__site(&st, buf, sizeof(buf));
	assert_string_equal(buf, "fw_compile.py:27 run_new_shape");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_python),
		cmocka_unit_test(test_library_python),
		cmocka_unit_test(test_python_no_file),
		cmocka_unit_test(test_native),
		cmocka_unit_test(test_innermost),
		cmocka_unit_test(test_api_only),
		cmocka_unit_test(test_native_line),
		cmocka_unit_test(test_site_skips_the_static_runtime),
		cmocka_unit_test(test_site_skips_generated_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
