/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * python.h - CPython frames: finding the interpreter in a process, telling
 * BPF where its thread states are and how its frames are laid out, turning
 * the (code object, instruction offset) pairs BPF records into function,
 * file and line, and merging them into the native stack.
 */
#ifndef GL_PYTHON_H
#define GL_PYTHON_H

#include <stdbool.h>
#include <stdint.h>
#include "stacks/stacks.h"

struct python;
struct modules;
struct gl_py_proc;

/*
 * Where the settings BPF needs to walk a process's frames go: the tracer's
 * py_procs map (trace/pyprocs.c). The Python module decides what they are;
 * the tracer owns the map.
 */
struct py_publisher {
	/* pid's settings; returns 0 or -errno */
	int (*set)(void *ctx, int pid, const struct gl_py_proc *walk);
	/* withdraws pid's settings */
	void (*clear)(void *ctx, int pid);
	void *ctx;
};

/* NULL with errno on failure. m is not owned. */
struct python *python__new(struct modules *m);
void python__free(struct python *py);
/*
 * Settings for BPF go to pub from now on (copied; NULL: nowhere, as for
 * offline use; names and lines still resolve).
 */
void python__set_publisher(struct python *py, const struct py_publisher *pub);

/*
 * Looks for a CPython interpreter in pid (the python binary or libpython);
 * when one of a supported version is found, publishes how BPF is to walk its
 * frames (python__set_publisher()). Returns 0, -ENOENT if pid runs no
 * CPython, -ENOTSUP for a version gpuleak cannot walk, or another -errno.
 * Calling it again for the same process is cheap.
 */
int python__attach(struct python *py, int pid);
/* Forgets pid (exited or exec'd); withdraws its settings. */
void python__detach(struct python *py, int pid);

/*
 * Merges the Python frames of record v into frames[0..n) (native frames,
 * innermost first): each native frame of the interpreter's eval loop is
 * replaced by the Python frames it was running; Python frames that no native
 * frame accounts for (a truncated native stack) go after the native ones.
 * Python frames are resolved (reading the code objects from the process's
 * memory, cached per process and code object) and interned as FRAME_PYTHON
 * frames (mod = code id, addr = line). Returns the new count (<= max). A
 * record without Python frames leaves frames unchanged.
 */
int python__merge(struct python *py, const struct stack_owner *who, const struct stack_view *v,
		  struct frame *frames, int n, int max);

/* Qualified function name and file of a Python code id; NULLs if unknown. */
void python__code_info(struct python *py, uint32_t id, const char **function, const char **file);

/*
 * The merge itself, on resolved frames: native[0..n) with is_eval[i] telling
 * which are eval-loop frames, pyf[0..npy) Python frames innermost first with
 * their GL_PY_* flags. Writes the result to out (out may not alias native);
 * returns its length (<= max).
 */
int python__merge_frames(const struct frame *native, const bool *is_eval, int n,
			 const struct frame *pyf, const uint32_t *flags, int npy, struct frame *out,
			 int max);

#endif /* GL_PYTHON_H */
