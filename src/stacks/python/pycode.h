/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pycode.h - a CPython code object read out of another process: its
 * qualified name, file, first line and line table, each read with a bounded
 * size and its type checked where the type's address is known.
 */
#ifndef GL_PYCODE_H
#define GL_PYCODE_H

#include <stddef.h>
#include <stdint.h>
#include "pyoffsets.h"
#include "pyproc.h"

#define PY_MAX_STR 1024	       /* characters of a name or file kept */
#define PY_MAX_LINETABLE 65536 /* bytes of a line table read */

struct py_code {
	char *function; /* co_qualname (co_name for 3.10), UTF-8, malloc'd */
	char *file;	/* co_filename, UTF-8, malloc'd */
	uint8_t *table; /* co_linetable, malloc'd; NULL if unreadable */
	size_t len;
	int firstlineno;
};

/*
 * Reads the code object at addr in pid. Returns 0 and fills *c (the caller
 * frees with pycode__clear()); -EINVAL if addr does not hold a code object;
 * another -errno if it could not be read.
 */
int pycode__read(int pid, const struct py_layout *l, const struct py_target *t, uint64_t addr,
		 struct py_code *c);
void pycode__clear(struct py_code *c);

/*
 * Reads the str object at addr as UTF-8 (at most PY_MAX_STR characters).
 * Returns a malloc'd string, or NULL with errno set.
 */
char *pycode__read_str(int pid, const struct py_layout *l, const struct py_target *t,
		       uint64_t addr);

#endif /* GL_PYCODE_H */
