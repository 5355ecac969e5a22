/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * symbolize.h - (module, file offset) to function name, offset in the function
 * and, where debug information exists, source file and line.
 *
 * Symbol tables are loaded on the first lookup in a module and kept; results
 * are cached per (module, offset). Lookups happen when reports are built,
 * never on the event path.
 */
#ifndef GL_SYMBOLIZE_H
#define GL_SYMBOLIZE_H

#include <stdint.h>
#include "stacks/modules.h"

struct symbolizer;

struct sym_result {
	const char *function; /* demangled; NULL if unknown (owned by the symbolizer) */
	uint64_t sym_off;     /* offset of the address in the function */
	const char *file;     /* source file, NULL if unknown */
	int line;	      /* 0 if unknown */
};

/* NULL with errno on failure. */
struct symbolizer *symbolizer__new(struct modules *m);
void symbolizer__free(struct symbolizer *s);

/*
 * Looks up file offset off in module mod. Returns 0 with out filled (function
 * may be NULL when no symbol covers the address).
 */
int symbolizer__lookup(struct symbolizer *s, uint32_t mod, uint64_t off, struct sym_result *out);

/* Demangles a C++ symbol; returns a malloc'd string or NULL if not mangled. */
char *demangle(const char *name);

#endif /* GL_SYMBOLIZE_H */
