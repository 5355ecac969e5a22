// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_python.c - CPython line tables, layouts and the merge of Python frames
 * into native stacks, without a process or BPF.
 *
 * The line-table vectors are the co_linetable of one function compiled by
 * CPython 3.10.13, 3.11.7, 3.12.1 and 3.13.0, with the line of every code
 * unit as co_lines() gives it (0 where it gives None). The function has a
 * loop (negative deltas), an expression over several lines, an exception
 * handler (code without a line) and a 300-line gap (long forms).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "stacks/python/pyline.h"
#include "stacks/python/pyoffsets.h"
#include "stacks/python/pyproc.h"
#include "stacks/python/python.h"

static const uint8_t table_310[] = {
	4, 1, 12, 1, 8, 1, 10, 1, 2, 2, 2, 1, 2, 1, 2, 255, 6, 255, 2, 3, 12, 1, 12, 1, 8, 1, 2,
	255, 0, 127, 0, 127, 172, 48, 16, 1
};
static const int lines_310[] = {
	3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 8, 9, 10, 9, 8, 8, 8, 11, 12, 12, 12, 12,
	12, 12, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 13, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 316, 316, 316, 316, 316, 316, 316, 316
};
#define FIRST_310 2
static const uint8_t table_311[] = {
	128, 0, 216, 12, 13, 128, 69, 221, 13, 18, 144, 49, 137, 88, 140, 88, 240, 0, 6, 5, 19, 240,
	0, 6, 5, 19, 136, 1, 216, 11, 12, 136, 113, 137, 53, 240, 0, 5, 9, 19, 216, 12, 17, 144, 81,
	137, 74, 136, 69, 136, 69, 224, 12, 17, 216, 16, 17, 216, 16, 17, 241, 3, 1, 17, 18, 241, 3,
	2, 13, 19, 136, 69, 136, 69, 240, 6, 3, 5, 14, 216, 12, 13, 144, 1, 137, 69, 136, 1, 136, 1,
	248, 221, 11, 28, 240, 0, 1, 5, 14, 240, 0, 1, 5, 14, 240, 0, 1, 5, 14, 216, 12, 13, 136, 1,
	136, 1, 136, 1, 240, 3, 1, 5, 14, 248, 248, 248, 240, 92, 9, 0, 9, 106, 2, 136, 21, 240, 0,
	0, 9, 106, 2, 144, 1, 240, 0, 0, 9, 106, 2, 144, 49, 240, 0, 0, 9, 106, 2, 144, 97, 240, 0,
	0, 9, 106, 2, 152, 17, 240, 0, 0, 9, 106, 2, 152, 65, 240, 0, 0, 9, 106, 2, 152, 113, 240,
	0, 0, 9, 106, 2, 160, 33, 240, 0, 0, 9, 106, 2, 160, 81, 240, 0, 0, 9, 106, 2, 168, 1, 240,
	0, 0, 9, 106, 2, 168, 49, 240, 0, 0, 9, 106, 2, 168, 98, 240, 0, 0, 9, 106, 2, 176, 34, 240,
	0, 0, 9, 106, 2, 176, 98, 240, 0, 0, 9, 106, 2, 184, 34, 240, 0, 0, 9, 106, 2, 184, 98, 240,
	0, 0, 9, 106, 2, 192, 34, 240, 0, 0, 9, 106, 2, 192, 98, 240, 0, 0, 9, 106, 2, 200, 34, 240,
	0, 0, 9, 106, 2, 200, 98, 240, 0, 0, 9, 106, 2, 208, 82, 84, 240, 0, 0, 9, 106, 2, 208, 86,
	88, 240, 0, 0, 9, 106, 2, 208, 90, 92, 240, 0, 0, 9, 106, 2, 208, 94, 96, 240, 0, 0, 9, 106,
	2, 208, 98, 100, 240, 0, 0, 9, 106, 2, 208, 102, 104, 240, 0, 0, 9, 106, 2, 208, 106, 108,
	240, 0, 0, 9, 106, 2, 208, 110, 112, 240, 0, 0, 9, 106, 2, 208, 114, 116, 240, 0, 0, 9, 106,
	2, 208, 118, 120, 240, 0, 0, 9, 106, 2, 208, 122, 124, 240, 0, 0, 9, 106, 2, 240, 0, 0, 127,
	1, 65, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 67, 2, 69, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0,
	71, 2, 73, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 75, 2, 77, 2, 240, 0, 0, 9, 106, 2, 240, 0,
	0, 79, 2, 81, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 83, 2, 85, 2, 240, 0, 0, 9, 106, 2, 240,
	0, 0, 87, 2, 89, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 91, 2, 93, 2, 240, 0, 0, 9, 106, 2,
	240, 0, 0, 95, 2, 97, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 99, 2, 101, 2, 240, 0, 0, 9, 106,
	2, 240, 0, 0, 103, 2, 105, 2, 240, 0, 0, 9, 106, 2, 128, 65, 216, 11, 12, 136, 81, 140, 52,
	144, 33, 144, 65, 148, 36, 137, 59, 208, 4, 22
};
static const int lines_311[] = {
	2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6,
	8, 9, 10, 9, 9, 8, 8, 8, 8, 11, 12, 12, 12, 12, 12, 12, 0, 13, 13, 13, 13, 13, 13, 13, 13,
	13, 14, 14, 14, 14, 13, 0, 0, 0, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316,
	316
};
#define FIRST_311 2
static const uint8_t table_312[] = {
	128, 0, 216, 12, 13, 128, 69, 220, 13, 18, 144, 49, 139, 88, 242, 0, 6, 5, 19, 136, 1, 216,
	11, 12, 136, 113, 138, 53, 216, 12, 17, 144, 81, 137, 74, 137, 69, 224, 12, 17, 216, 16, 17,
	216, 16, 17, 241, 3, 1, 17, 18, 241, 3, 2, 13, 19, 137, 69, 240, 9, 6, 5, 19, 240, 14, 3, 5,
	14, 216, 12, 13, 144, 1, 137, 69, 136, 1, 240, 94, 9, 0, 9, 106, 2, 136, 21, 240, 0, 0, 9,
	106, 2, 144, 1, 240, 0, 0, 9, 106, 2, 144, 49, 240, 0, 0, 9, 106, 2, 144, 97, 240, 0, 0, 9,
	106, 2, 152, 17, 240, 0, 0, 9, 106, 2, 152, 65, 240, 0, 0, 9, 106, 2, 152, 113, 240, 0, 0,
	9, 106, 2, 160, 33, 240, 0, 0, 9, 106, 2, 160, 81, 240, 0, 0, 9, 106, 2, 168, 1, 240, 0, 0,
	9, 106, 2, 168, 49, 240, 0, 0, 9, 106, 2, 168, 98, 240, 0, 0, 9, 106, 2, 176, 34, 240, 0, 0,
	9, 106, 2, 176, 98, 240, 0, 0, 9, 106, 2, 184, 34, 240, 0, 0, 9, 106, 2, 184, 98, 240, 0, 0,
	9, 106, 2, 192, 34, 240, 0, 0, 9, 106, 2, 192, 98, 240, 0, 0, 9, 106, 2, 200, 34, 240, 0, 0,
	9, 106, 2, 200, 98, 240, 0, 0, 9, 106, 2, 208, 82, 84, 240, 0, 0, 9, 106, 2, 208, 86, 88,
	240, 0, 0, 9, 106, 2, 208, 90, 92, 240, 0, 0, 9, 106, 2, 208, 94, 96, 240, 0, 0, 9, 106, 2,
	208, 98, 100, 240, 0, 0, 9, 106, 2, 208, 102, 104, 240, 0, 0, 9, 106, 2, 208, 106, 108, 240,
	0, 0, 9, 106, 2, 208, 110, 112, 240, 0, 0, 9, 106, 2, 208, 114, 116, 240, 0, 0, 9, 106, 2,
	208, 118, 120, 240, 0, 0, 9, 106, 2, 208, 122, 124, 240, 0, 0, 9, 106, 2, 240, 0, 0, 127, 1,
	65, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 67, 2, 69, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 71,
	2, 73, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 75, 2, 77, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0,
	79, 2, 81, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 83, 2, 85, 2, 240, 0, 0, 9, 106, 2, 240, 0,
	0, 87, 2, 89, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 91, 2, 93, 2, 240, 0, 0, 9, 106, 2, 240,
	0, 0, 95, 2, 97, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 99, 2, 101, 2, 240, 0, 0, 9, 106, 2,
	240, 0, 0, 103, 2, 105, 2, 240, 0, 0, 9, 106, 2, 128, 65, 216, 11, 12, 136, 81, 137, 52,
	144, 33, 144, 65, 145, 36, 137, 59, 208, 4, 22, 248, 244, 95, 9, 0, 12, 29, 242, 0, 1, 5,
	14, 216, 12, 13, 138, 1, 240, 3, 1, 5, 14, 250
};
static const int lines_312[] = {
	2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 8, 9,
	10, 9, 9, 8, 8, 8, 8, 4, 11, 12, 12, 12, 12, 12, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 316, 0, 13,
	13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 13, 0, 0, 0
};
#define FIRST_312 2
static const uint8_t table_313[] = {
	128, 0, 216, 12, 13, 128, 69, 220, 13, 18, 144, 49, 142, 88, 136, 1, 216, 11, 12, 136, 113,
	143, 53, 216, 12, 17, 137, 74, 138, 69, 224, 12, 17, 216, 16, 17, 216, 16, 17, 241, 3, 1,
	17, 18, 241, 3, 2, 13, 19, 138, 69, 241, 9, 0, 14, 22, 240, 14, 3, 5, 14, 216, 12, 13, 144,
	1, 137, 69, 136, 1, 240, 94, 9, 0, 9, 106, 2, 136, 21, 240, 0, 0, 9, 106, 2, 144, 1, 240, 0,
	0, 9, 106, 2, 144, 49, 240, 0, 0, 9, 106, 2, 144, 97, 240, 0, 0, 9, 106, 2, 152, 17, 240, 0,
	0, 9, 106, 2, 152, 65, 240, 0, 0, 9, 106, 2, 152, 113, 240, 0, 0, 9, 106, 2, 160, 33, 240,
	0, 0, 9, 106, 2, 160, 81, 240, 0, 0, 9, 106, 2, 168, 1, 240, 0, 0, 9, 106, 2, 168, 49, 240,
	0, 0, 9, 106, 2, 168, 98, 240, 0, 0, 9, 106, 2, 176, 34, 240, 0, 0, 9, 106, 2, 176, 98, 240,
	0, 0, 9, 106, 2, 184, 34, 240, 0, 0, 9, 106, 2, 184, 98, 240, 0, 0, 9, 106, 2, 192, 34, 240,
	0, 0, 9, 106, 2, 192, 98, 240, 0, 0, 9, 106, 2, 200, 34, 240, 0, 0, 9, 106, 2, 200, 98, 240,
	0, 0, 9, 106, 2, 208, 82, 84, 240, 0, 0, 9, 106, 2, 208, 86, 88, 240, 0, 0, 9, 106, 2, 208,
	90, 92, 240, 0, 0, 9, 106, 2, 208, 94, 96, 240, 0, 0, 9, 106, 2, 208, 98, 100, 240, 0, 0, 9,
	106, 2, 208, 102, 104, 240, 0, 0, 9, 106, 2, 208, 106, 108, 240, 0, 0, 9, 106, 2, 208, 110,
	112, 240, 0, 0, 9, 106, 2, 208, 114, 116, 240, 0, 0, 9, 106, 2, 208, 118, 120, 240, 0, 0, 9,
	106, 2, 208, 122, 124, 240, 0, 0, 9, 106, 2, 240, 0, 0, 127, 1, 65, 2, 240, 0, 0, 9, 106, 2,
	240, 0, 0, 67, 2, 69, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 71, 2, 73, 2, 240, 0, 0, 9, 106,
	2, 240, 0, 0, 75, 2, 77, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 79, 2, 81, 2, 240, 0, 0, 9,
	106, 2, 240, 0, 0, 83, 2, 85, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 87, 2, 89, 2, 240, 0, 0,
	9, 106, 2, 240, 0, 0, 91, 2, 93, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 95, 2, 97, 2, 240, 0,
	0, 9, 106, 2, 240, 0, 0, 99, 2, 101, 2, 240, 0, 0, 9, 106, 2, 240, 0, 0, 103, 2, 105, 2,
	240, 0, 0, 9, 106, 2, 128, 65, 216, 11, 12, 136, 81, 137, 52, 144, 33, 144, 65, 145, 36,
	137, 59, 208, 4, 22, 248, 244, 95, 9, 0, 12, 29, 243, 0, 1, 5, 14, 216, 12, 13, 138, 1, 240,
	3, 1, 5, 14, 250
};
static const int lines_313[] = {
	2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6,
	6, 6, 8, 9, 10, 9, 9, 8, 8, 8, 8, 8, 4, 4, 11, 12, 12, 12, 12, 12, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315, 315,
	315, 315, 315, 315, 315, 315, 315, 315, 315, 316, 316, 316, 316, 316, 316, 316, 316, 316,
	316, 316, 0, 13, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 13, 0, 0, 0
};
#define FIRST_313 2

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void check_table(int minor, const uint8_t *table, size_t len, int first, const int *lines,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int got = pyline__line(minor, table, len, first, i);

		if (got != lines[i])
			fail_msg("3.%d: code unit %zu: line %d, want %d", minor, i, got, lines[i]);
	}
	/* past the end of the code: no line */
	assert_int_equal(pyline__line(minor, table, len, first, n + 1000), 0);
	/* a frame that has not started: its first line */
	assert_int_equal(pyline__line(minor, table, len, first, GL_PY_LASTI_NONE), first);
}

static void test_line_310(void **state)
{
	check_table(10, table_310, N(table_310), FIRST_310, lines_310, N(lines_310));
}

static void test_line_311(void **state)
{
	check_table(11, table_311, N(table_311), FIRST_311, lines_311, N(lines_311));
}

static void test_line_312(void **state)
{
	check_table(12, table_312, N(table_312), FIRST_312, lines_312, N(lines_312));
}

static void test_line_313(void **state)
{
	check_table(13, table_313, N(table_313), FIRST_313, lines_313, N(lines_313));
}

/* Every prefix of a table (a truncated read) and garbage: no crash, no read past the end. */
static void test_line_truncated_and_garbage(void **state)
{
	uint8_t junk[64];

	for (size_t len = 0; len < N(table_313); len++)
		for (uint32_t i = 0; i < N(lines_313) + 2; i++)
			assert_true(pyline__line(13, table_313, len, FIRST_313, i) >= 0);
	for (size_t len = 0; len < N(table_310); len++)
		for (uint32_t i = 0; i < N(lines_310) + 2; i++)
			assert_true(pyline__line(10, table_310, len, FIRST_310, i) >= 0);
	/* a varint that never ends */
	memset(junk, 0xff, sizeof(junk));
	junk[0] = 0x80 | (14 << 3);
	for (uint32_t i = 0; i < 40; i++)
		assert_true(pyline__line(12, junk, sizeof(junk), 1, i) >= 0);
	/* an entry byte without its start bit */
	junk[0] = 0x05;
	assert_int_equal(pyline__line(12, junk, sizeof(junk), 1, 0), 0);
	assert_int_equal(pyline__line(12, NULL, 0, 7, 3), 0);
}

static void put_word(uint8_t *b, int i, uint64_t v)
{
	memcpy(b + 8 * i, &v, sizeof(v));
}

/* _Py_DebugOffsets of CPython 3.13.0 (x86-64, release), word by word. */
static void fill_debug_313(uint8_t *b)
{
	static const struct {
		int word;
		uint64_t v;
	} w[] = {
		{ 1, 0x030d00f0 }, { 2, 0 }, { 3, 1200 }, { 5, 632 }, { 6, 8000 }, { 8, 7264 },
		{ 9, 7344 }, { 19, 4000 }, { 21, 8 }, { 22, 16 }, { 23, 72 }, { 24, 152 },
		{ 25, 160 }, { 28, 80 }, { 29, 8 }, { 30, 0 }, { 31, 56 }, { 33, 70 },
		{ 34, 208 }, { 35, 112 }, { 36, 120 }, { 37, 128 }, { 38, 136 }, { 39, 68 },
		{ 43, 200 }, { 64, 40 }, { 65, 16 }, { 66, 32 }, { 67, 64 }, { 68, 32 },
		{ 69, 16 }, { 70, 40 },
	};

	memset(b, 0, PY_DEBUG_OFFSETS_BYTES);
	memcpy(b, "xdebugpy", 8);
	for (size_t i = 0; i < N(w); i++)
		put_word(b, w[i].word, w[i].v);
}

static void test_debug_offsets_313(void **state)
{
	uint8_t b[PY_DEBUG_OFFSETS_BYTES];
	struct py_layout l;

	fill_debug_313(b);
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), 0);
	assert_int_equal(l.minor, 13);
	assert_int_equal(l.hexversion, 0x030d00f0);
	assert_int_equal(l.walk.version, 0x030d);
	assert_int_equal(l.walk.rt_interp_head, 632);
	assert_int_equal(l.walk.is_next, 7264);
	assert_int_equal(l.walk.is_threads_head, 7344);
	assert_int_equal(l.walk.ts_next, 8);
	assert_int_equal(l.walk.ts_frame, 72);
	assert_int_equal(l.walk.ts_thread_id, 152);
	assert_int_equal(l.walk.ts_native_tid, 160);
	assert_int_equal(l.walk.fr_previous, 8);
	assert_int_equal(l.walk.fr_code, 0);
	assert_int_equal(l.walk.fr_instr, 56);
	assert_int_equal(l.walk.fr_owner, 70);
	assert_int_equal(l.walk.owner_shim, 3);
	assert_int_equal(l.walk.co_code, 200);
	assert_int_equal(l.walk.win_ts, 168);
	assert_int_equal(l.walk.win_fr, 71);
	assert_int_equal(l.walk.flags, GL_PY_F_NATIVE_TID);
	assert_int_equal(l.co_qualname, 128);
	assert_int_equal(l.co_filename, 112);
	assert_int_equal(l.co_linetable, 136);
	assert_int_equal(l.co_firstlineno, 68);
	assert_int_equal(l.str_ascii_data, 40);
	assert_int_equal(l.str_compact_data, 56);
	assert_int_equal(l.bytes_size, 16);
	assert_int_equal(l.bytes_data, 32);
	assert_int_equal(l.ts_interp, 16);
}

static void test_debug_offsets_rejected(void **state)
{
	uint8_t b[PY_DEBUG_OFFSETS_BYTES];
	struct py_layout l;

	fill_debug_313(b);
	b[0] = 'y';
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), -ENOENT);
	fill_debug_313(b);
	put_word(b, 2, 1); /* free-threaded */
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), -ENOTSUP);
	fill_debug_313(b);
	put_word(b, 1, 0x030c00f0); /* 3.12 does not publish offsets */
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), -ENOTSUP);
	fill_debug_313(b);
	put_word(b, 24, 5000); /* thread_id outside the thread state */
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), -EINVAL);
	fill_debug_313(b);
	put_word(b, 24, 1000); /* inside it, but beyond what BPF reads at once */
	put_word(b, 19, 4000);
	assert_int_equal(pyoffsets__from_debug(b, sizeof(b), &l), -EINVAL);
	fill_debug_313(b);
	assert_int_equal(pyoffsets__from_debug(b, 64, &l), -ENOENT);
}

static void test_tables(void **state)
{
	struct py_layout l;

	for (int minor = 10; minor <= 12; minor++) {
		assert_int_equal(pyoffsets__table(minor, 0, &l), 0);
		assert_int_equal(l.walk.version, 0x0300 | minor);
		assert_true(l.walk.win_ts <= GL_PY_WINDOW && l.walk.win_fr <= GL_PY_WINDOW);
		assert_true(l.walk.ts_thread_id + 8 <= l.walk.win_ts);
		assert_true(l.walk.ts_next + 8 <= l.walk.win_ts);
		assert_true(l.walk.ts_frame + 8 <= l.walk.win_ts);
		assert_true(l.walk.fr_previous + 8 <= l.walk.win_fr);
		assert_true(l.walk.fr_code + 8 <= l.walk.win_fr);
		assert_true(l.walk.fr_instr + 4 <= l.walk.win_fr);
		assert_true(l.co_size <= 512 && l.co_linetable + 8 <= l.co_size);
	}
	assert_int_equal(pyoffsets__table(10, 0, &l), 0);
	assert_int_equal(l.walk.flags, GL_PY_F_LASTI_INT | GL_PY_F_ALL_ENTRY);
	assert_int_equal(pyoffsets__table(11, 0, &l), 0);
	assert_true(l.walk.flags & GL_PY_F_IS_ENTRY);
	assert_int_equal(l.walk.fr_is_entry, 68);
	assert_int_equal(pyoffsets__table(12, 0, &l), 0);
	assert_int_equal(l.walk.owner_shim, 3);
	assert_int_equal(l.walk.is_threads_head, 72);
	assert_int_equal(pyoffsets__table(9, 0, &l), -ENOTSUP);
	assert_int_equal(pyoffsets__table(13, 0, &l), -ENOTSUP);
}

static void test_minor_from_name(void **state)
{
	assert_int_equal(pyproc__minor_from_name("/usr/lib/libpython3.12.so.1.0"), 12);
	assert_int_equal(pyproc__minor_from_name("/usr/bin/python3.10"), 10);
	assert_int_equal(pyproc__minor_from_name("/opt/py/bin/python3.13t"), 13);
	assert_int_equal(pyproc__minor_from_name("/usr/bin/python3"), 0);
	assert_int_equal(pyproc__minor_from_name("/usr/bin/python3.x"), 0);
	assert_int_equal(pyproc__minor_from_name("/python3.12/bin/python"), 0);
}

#define NAT(a) ((struct frame){ .addr = (a), .mod = 1, .kind = FRAME_NATIVE })
#define PY(id) ((struct frame){ .addr = 10 + (id), .mod = (id), .kind = FRAME_PYTHON })

static void check_frames(const struct frame *got, int n, const struct frame *want, int nwant)
{
	assert_int_equal(n, nwant);
	for (int i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof(got[i])))
			fail_msg("frame %d: kind %u mod %u addr %llu, want kind %u mod %u addr %llu", i,
				 got[i].kind, got[i].mod, (unsigned long long)got[i].addr,
				 want[i].kind, want[i].mod, (unsigned long long)want[i].addr);
}

/* Native stack reaching two eval-loop calls: each is replaced by its own run of frames. */
static void test_merge_at_eval_frames(void **state)
{
	const struct frame native[] = { NAT(1), NAT(2), NAT(100), NAT(3), NAT(101), NAT(4) };
	const bool is_eval[] = { false, false, true, false, true, false };
	const struct frame pyf[] = { PY(1), PY(2), PY(3), PY(4) };
	const uint32_t flags[] = { 0, GL_PY_ENTRY, 0, GL_PY_ENTRY };
	const struct frame want[] = { NAT(1), NAT(2), PY(1), PY(2), NAT(3), PY(3), PY(4), NAT(4) };
	struct frame out[16];
	int n = python__merge_frames(native, is_eval, N(native), pyf, flags, N(pyf), out, 16);

	check_frames(out, n, want, N(want));
}

/* A truncated native stack: the Python frames go after it, all of them, in order. */
static void test_merge_truncated_native(void **state)
{
	const struct frame native[] = { NAT(1), NAT(2) };
	const bool is_eval[] = { false, false };
	const struct frame pyf[] = { PY(1), PY(2), PY(3) };
	const uint32_t flags[] = { GL_PY_ENTRY, 0, GL_PY_ENTRY };
	const struct frame want[] = { NAT(1), NAT(2), PY(1), PY(2), PY(3) };
	struct frame out[16];
	int n = python__merge_frames(native, is_eval, N(native), pyf, flags, N(pyf), out, 16);

	check_frames(out, n, want, N(want));
}

/* The native stack reaches the first eval-loop call only: the rest go at the end. */
static void test_merge_partly_truncated(void **state)
{
	const struct frame native[] = { NAT(1), NAT(100), NAT(2) };
	const bool is_eval[] = { false, true, false };
	const struct frame pyf[] = { PY(1), PY(2), PY(3) };
	const uint32_t flags[] = { GL_PY_ENTRY, GL_PY_ENTRY, GL_PY_ENTRY }; /* 3.10 */
	const struct frame want[] = { NAT(1), PY(1), NAT(2), PY(2), PY(3) };
	struct frame out[16];
	int n = python__merge_frames(native, is_eval, N(native), pyf, flags, N(pyf), out, 16);

	check_frames(out, n, want, N(want));
}

/* More eval-loop frames than runs (a Python walk cut short): the extra ones stay native. */
static void test_merge_more_eval_than_runs(void **state)
{
	const struct frame native[] = { NAT(1), NAT(100), NAT(101), NAT(2) };
	const bool is_eval[] = { false, true, true, false };
	const struct frame pyf[] = { PY(1), PY(2) };
	const uint32_t flags[] = { 0, 0 }; /* no entry flag seen: one run */
	const struct frame want[] = { NAT(1), PY(1), PY(2), NAT(101), NAT(2) };
	struct frame out[16];
	int n = python__merge_frames(native, is_eval, N(native), pyf, flags, N(pyf), out, 16);

	check_frames(out, n, want, N(want));
}

static void test_merge_bounded(void **state)
{
	const struct frame native[] = { NAT(1), NAT(100), NAT(2) };
	const bool is_eval[] = { false, true, false };
	const struct frame pyf[] = { PY(1), PY(2), PY(3) };
	const uint32_t flags[] = { 0, 0, GL_PY_ENTRY };
	const struct frame want[] = { NAT(1), PY(1), PY(2) };
	struct frame out[3];
	int n = python__merge_frames(native, is_eval, N(native), pyf, flags, N(pyf), out, 3);

	check_frames(out, n, want, N(want));
	n = python__merge_frames(native, is_eval, N(native), pyf, flags, 0, out, 3);
	check_frames(out, n, native, N(native));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_310),
		cmocka_unit_test(test_line_311),
		cmocka_unit_test(test_line_312),
		cmocka_unit_test(test_line_313),
		cmocka_unit_test(test_line_truncated_and_garbage),
		cmocka_unit_test(test_debug_offsets_313),
		cmocka_unit_test(test_debug_offsets_rejected),
		cmocka_unit_test(test_tables),
		cmocka_unit_test(test_minor_from_name),
		cmocka_unit_test(test_merge_at_eval_frames),
		cmocka_unit_test(test_merge_truncated_native),
		cmocka_unit_test(test_merge_partly_truncated),
		cmocka_unit_test(test_merge_more_eval_than_runs),
		cmocka_unit_test(test_merge_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
