// SPDX-License-Identifier: BSD-2-Clause
/*
 * site.c - what the reporters share about stacks: which frame tells where a
 * stack allocates, that frame as one line, and which classes are memory.
 */
#include <stdio.h>
#include <string.h>
#include "report.h"
#include "util/pyfile.h"

bool report__is_memory_class(uint8_t cls)
{
	return cls == GL_CLASS_DEVICE || cls == GL_CLASS_MANAGED || cls == GL_CLASS_HOST_PINNED ||
	       cls == GL_CLASS_TORCH_BLOCK;
}

static const char *basename_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
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
	const char *base = basename_of(f->module);

	if (!base || (f->function && is_static_runtime(f->function)))
		return true;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return false;
}

/* Python frames of installed packages and of the standard library are not the user's. */
const struct snap_frame *report__site_frame(const struct snap_stack *st)
{
	const struct snap_frame *native = NULL, *python = NULL;

	for (uint32_t i = 0; i < st->nframes; i++) {
		const struct snap_frame *f = &st->frames[i];

		if (f->kind[0] == 'p') {
			if (!pyfile__is_library(f->file))
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

void report__site(const struct snap_stack *st, char *buf, size_t len)
{
	const struct snap_frame *f = report__site_frame(st);

	if (!f)
		snprintf(buf, len, "[no stack]");
	else if (f->kind[0] == 'p')
		snprintf(buf, len, "%s:%d %s%s", basename_of(f->file) ? basename_of(f->file) : "?",
			 f->line, f->function ? f->function : "?",
			 f->inferred ? " (inferred)" : "");
	else if (f->function)
		snprintf(buf, len, "%s (%s)", f->function,
			 basename_of(f->module) ? basename_of(f->module) : "?");
	else
		snprintf(buf, len, "%s+0x%llx",
			 basename_of(f->module) ? basename_of(f->module) : "?",
			 (unsigned long long)f->offset);
}

double report__proc_growth(const struct snap_proc *p)
{
	double g = 0;

	for (uint32_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].cls == GL_CLASS_DEVICE)
			g += p->stacks[i].growth_bytes_per_s;
	return g;
}
