/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libcuda.h - finding the CUDA driver library a process uses and the file
 * offsets of the functions in the probe table.
 */
#ifndef GL_LIBCUDA_H
#define GL_LIBCUDA_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

struct cuda_lib {
	dev_t dev; /* identity of the file, as the tracer sees it */
	ino_t ino;
	char path[PATH_MAX];	      /* path the tracer attaches through */
	char display[PATH_MAX];	      /* path as the process sees it */
	uint64_t offsets[GL_NR_APIS]; /* file offset of each function; 0 = not exported */
	int nr_found;
	const char *why; /* libcuda__open failed with -ENOEXEC: what is wrong with the file */
};

/* Whether a mapped file's name is the CUDA driver (libcuda.so, libcuda.so.1, libcuda.so.580.x). */
bool libcuda__is_driver_name(const char *path);

/*
 * Whether a mapped file is XLA's runtime: jaxlib's xla_extension, libxla*, or the
 * CUDA plugins of newer JAX (jax_plugins/xla_cuda13/xla_cuda_plugin.so,
 * jax_cuda13_plugin/...).
 */
bool libcuda__is_xla_path(const char *path);

/*
 * Finds the libcuda mapped by pid. Returns 0 and fills lib (symbols resolved),
 * -ENOENT if pid maps none (yet), -ESRCH if pid is gone, -ENOEXEC with
 * lib->why if it maps one that cannot be read, or another -errno.
 */
int libcuda__find_in_process(int pid, struct cuda_lib *lib);

/*
 * Opens path and resolves the probe table's symbols. Returns 0, -ENOEXEC with
 * lib->why saying what is wrong with the file, or another -errno.
 */
int libcuda__open(const char *path, const char *display, struct cuda_lib *lib);

/*
 * The libcuda.so.1 the program exe_cmd (a command name or path, may be NULL)
 * would load, searched as the dynamic loader does: the executable's RPATH,
 * LD_LIBRARY_PATH, its RUNPATH, the ld.so cache, then the usual directories.
 * Returns 0 and the path, or -ENOENT.
 */
int libcuda__search(const char *exe_cmd, const char *ld_library_path, char *path, size_t len);

/*
 * Finds PyTorch's libc10_cuda.so mapped by pid: fills path (to attach
 * through), display (as the process sees it) and the file's identity.
 * Returns 0, -ENOENT if pid maps none, -ESRCH if pid is gone, or -errno.
 */
int libcuda__find_torch(int pid, char *path, size_t len, char *display, size_t dlen, dev_t *dev,
			ino_t *ino);

/*
 * The file-name prefix libcuda__find_torch looks for (libc10_cuda.so; the hidden
 * --bench-torch-lib sets another, so that benchmarks probe a private copy).
 */
void libcuda__set_torch_name(const char *prefix);

/* The dynamic loader (ld-linux*.so) pid maps; as libcuda__find_torch. */
int libcuda__find_ldso(int pid, char *path, size_t len, char *display, size_t dlen, dev_t *dev,
		       ino_t *ino);

/* File offset of the function called name in the ELF file path. Returns 0 or -errno. */
int libcuda__symbol_offset(const char *path, const char *name, uint64_t *off);

/* Why libcuda__open() or libcuda__find_in_process() failed with err, in words. */
const char *libcuda__strerror(const struct cuda_lib *lib, int err);

/* Comma-separated names of the REQUIRED functions lib lacks (empty if none). */
void libcuda__missing(const struct cuda_lib *lib, bool required_only, char *buf, size_t len);

#endif /* GL_LIBCUDA_H */
