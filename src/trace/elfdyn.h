/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * elfdyn.h - the exported functions of a 64-bit ELF shared object read the way
 * the dynamic loader reads them: program headers, the dynamic segment, its
 * DT_SYMTAB and DT_STRTAB, counted through DT_HASH or DT_GNU_HASH. For files
 * whose section headers are missing or damaged but which load all the same.
 */
#ifndef GL_ELFDYN_H
#define GL_ELFDYN_H

#include <stddef.h>
#include <stdint.h>

/* Called for each defined function symbol: its name and file offset. Return 0 to go on. */
typedef int (*elfdyn_fn)(const char *name, uint64_t file_off, void *ctx);

/*
 * Walks the dynamic symbols of the file image base[0..size). Returns the
 * number of functions passed to fn (>= 0), or -ENOEXEC with *why set to a
 * static sentence saying what is wrong with the file.
 */
int elfdyn__for_each_func(const void *base, size_t size, elfdyn_fn fn, void *ctx, const char **why);

#endif /* GL_ELFDYN_H */
