/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pyproc.h - the CPython interpreter inside a process: which mapped file
 * holds it (a python executable or libpython3.X.so), where _PyRuntime and the
 * eval loop are, which version it is; and bounded reads of the process's
 * memory.
 */
#ifndef GL_PYPROC_H
#define GL_PYPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct py_target {
	uint64_t runtime;      /* address of _PyRuntime */
	uint64_t version_addr; /* address of Py_Version (3.11+), 0 if absent */
	uint64_t code_type;    /* address of PyCode_Type, 0 if unknown */
	uint64_t str_type;     /* address of PyUnicode_Type, 0 if unknown */
	uint64_t bytes_type;   /* address of PyBytes_Type, 0 if unknown */
	uint64_t eval_start;   /* _PyEval_EvalFrameDefault: file offsets in the module */
	uint64_t eval_end;
	uint64_t dev, ino; /* the module's identity, as struct modules keys it */
	int minor;	   /* 3.minor from the file name or the symbols; 0 unknown */
	char path[512];
};

/*
 * Looks for the interpreter in pid's mappings. Returns 0 and fills *t;
 * -ENOENT when no mapped file defines _PyRuntime; -ESRCH when pid is gone;
 * another -errno.
 */
int pyproc__find(int pid, struct py_target *t);

/*
 * Copies up to len bytes at addr in pid into buf (process_vm_readv). Returns
 * the bytes read (fewer at the end of a mapping) or -errno.
 */
ssize_t pyproc__read(int pid, uint64_t addr, void *buf, size_t len);

/* The minor version in a file name such as libpython3.12.so.1.0 or python3.10; 0 if none. */
int pyproc__minor_from_name(const char *path);

#endif /* GL_PYPROC_H */
