// SPDX-License-Identifier: BSD-2-Clause
/*
 * site.c - the site rule (site.h): whose code a Python file is, which native libraries are
 * the CUDA stack's plumbing, and which frame of a stack wins.
 */
#include <stdbool.h>
#include <string.h>
#include "site.h"

/*
 * Installed packages, the standard library and frozen modules are not the program's; nor
 * is code that torch.compile generates: Inductor's modules in its cache directory
 * (TMPDIR/torchinductor_USER/) and torch.fx's graph modules ("<eval_with_key>.N").
 */
static bool is_library_python(const char *file)
{
	if (!file)
		return false;
	return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	       strstr(file, "/lib/python3") || !strncmp(file, "<frozen ", 8) ||
	       strstr(file, "/torchinductor_") || !strncmp(file, "<eval_with_key>", 15);
}

/*
 * The CUDA runtime linked into the program (nvcc's default, libcudart_static.a): its
 * entry points (cudaMalloc, cudaMallocAsync, ...) and its internals, whose symbols nvcc
 * names libcudart_static_<hash>, lie in the program's own file.
 */
static bool is_static_runtime(const char *fn)
{
	return !strncmp(fn, "libcudart_static_", 17) || !strncmp(fn, "__cuda", 6) ||
	       !strncmp(fn, "cudart::", 8) ||
	       (!strncmp(fn, "cuda", 4) && fn[4] >= 'A' && fn[4] <= 'Z');
}

/* Frames of the CUDA stack itself (driver, runtime, PyTorch's allocator) say little. */
static bool is_plumbing(const struct snap_frame *f)
{
	static const char *const libs[] = { "libcuda.so", "libcudart.so",     "libc10_cuda.so",
					    "libc10.so",  "libtorch_cuda.so", "libtorch_cpu.so",
					    "libcublas",  "libcublasLt",      "libnccl.so" };
	const char *base = f->module ? strrchr(f->module, '/') : NULL;

	base = base ? base + 1 : f->module;
	if (!base || (f->function && is_static_runtime(f->function)))
		return true;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return false;
}

/* The base name of f's module, or NULL. */
static const char *module_base(const struct snap_frame *f)
{
	const char *base = f->module ? strrchr(f->module, '/') : NULL;

	return base ? base + 1 : f->module;
}

bool site__is_plumbing(const struct snap_frame *f)
{
	static const char *const libs[] = { "libpython", "python3",  "python2", "libffi",
					    "_ctypes",	 "ld-linux", "libc.so", "libc-" };
	static const char *const start[] = {
		"_start", "__libc_start_main", "__libc_start_call_main", "start_thread", "clone3",
		"clone"
	};
	const char *base = module_base(f);

	if (f->kind[0] == 'p' || (f->function && f->function[0] == '[' && !f->module))
		return false; /* Python frames, and gpuleak's notes */
	if (is_plumbing(f) && base)
		return true;
	for (size_t i = 0; f->function && i < sizeof(start) / sizeof(start[0]); i++)
		if (!strcmp(f->function, start[i]))
			return true;
	for (size_t i = 0; base && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return base && !strcmp(base, "python");
}

const struct snap_frame *site__pick(const struct snap_stack *st)
{
	const struct snap_frame *native = NULL, *python = NULL;

	for (uint32_t i = 0; i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];

		if (f->kind[0] == 'p') {
			if (!is_library_python(f->file))
				return f;
			if (!python)
				python = f;
		} else if (!native && f->function && !is_plumbing(f)) {
			native = f;
		}
	}
	if (python)
		return python;
	if (native)
		return native;
	return st->nframes ? &st->frames[0] : NULL;
}
