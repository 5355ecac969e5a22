/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pyline.h - the line of an instruction in a CPython code object, from the
 * code object's line table (co_linetable): the 3.10 format of (bytes, lines)
 * delta pairs, or the location table of 3.11 and later.
 */
#ifndef GL_PYLINE_H
#define GL_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The line of the instruction at index lasti (in 2-byte code units) of a
 * code object of CPython 3.minor whose line table is table[0..len) and whose
 * first line is firstlineno. Returns the line (>= 1), firstlineno when lasti
 * is GL_PY_LASTI_NONE, or 0 when the table has no line for it (or is
 * malformed). Never reads outside the table.
 */
int pyline__line(int minor, const uint8_t *table, size_t len, int firstlineno, uint32_t lasti);

#endif /* GL_PYLINE_H */
