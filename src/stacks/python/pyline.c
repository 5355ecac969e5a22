// SPDX-License-Identifier: BSD-2-Clause
/*
 * pyline.c - CPython line tables decoded as the interpreter's own
 * PyCode_Addr2Line() does, with every byte read checked against the end of
 * the table (it comes from another process's memory).
 */
#include <limits.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "pyline.h"

enum {
	LOC_ONE_LINE0 = 10,
	LOC_ONE_LINE1 = 11,
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

/* 3.10: (bytecode bytes, line delta) pairs; a delta of -128 means "no line". */
static int line_310(const uint8_t *t, size_t len, int firstlineno, uint64_t addr)
{
	uint64_t start, end = 0;
	int64_t line = firstlineno, ar_line = -1;

	for (size_t i = 0; i + 1 < len; i += 2) {
		int8_t ldelta = (int8_t)t[i + 1];

		start = end;
		end += t[i];
		if (ldelta == -128) {
			ar_line = -1;
		} else {
			line += ldelta;
			if (line > INT_MAX || line < INT_MIN)
				return 0;
			ar_line = line;
		}
		if (start <= addr && addr < end)
			return ar_line > 0 ? ar_line : 0;
	}
	return 0;
}

/* A varint of 6-bit groups, low first, bit 6 = more; *p advanced. -1 past the end. */
static int64_t varint(const uint8_t *t, size_t len, size_t *p)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*p >= len || shift > 42)
			return -1;
		b = t[(*p)++];
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int line_delta(const uint8_t *t, size_t len, size_t at, int64_t *delta)
{
	int code = (t[at] >> 3) & 15;
	size_t p = at + 1;
	int64_t v;

	switch (code) {
	case LOC_NO_COLUMNS:
	case LOC_LONG:
		v = varint(t, len, &p);
		if (v < 0)
			return -1;
		*delta = (v & 1) ? -(v >> 1) : v >> 1;
		return 0;
	case LOC_ONE_LINE1: *delta = 1; return 0;
	case LOC_ONE_LINE2: *delta = 2; return 0;
	default: *delta = 0; return 0;
	}
}

/* 3.11+: entries start with a byte with bit 7 set: code (4 bits), length - 1 (3 bits). */
static int line_311(const uint8_t *t, size_t len, int firstlineno, uint64_t addr)
{
	uint64_t start, end = 0;
	int64_t line = firstlineno, ar_line, delta;
	size_t i = 0;

	while (i < len) {
		if (!(t[i] & 128) || line_delta(t, len, i, &delta))
			return 0;
		line += delta;
		if (line > INT_MAX || line < INT_MIN)
			return 0;
		ar_line = (t[i] >> 3) == 0x1f ? -1 : line;
		start = end;
		end += ((t[i] & 7) + 1) * 2;
		if (start <= addr && addr < end)
			return ar_line > 0 ? ar_line : 0;
		do
			i++;
		while (i < len && !(t[i] & 128));
	}
	return 0;
}

int pyline__line(int minor, const uint8_t *table, size_t len, int firstlineno, uint32_t lasti)
{
	uint64_t addr = (uint64_t)lasti * 2;

	if (lasti == GL_PY_LASTI_NONE || (int32_t)lasti < 0)
		return firstlineno > 0 ? firstlineno : 0;
	if (!table)
		return 0;
	return minor <= 10 ? line_310(table, len, firstlineno, addr) :
			     line_311(table, len, firstlineno, addr);
}
