// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_pickle.c - util/pickle.c: each value's opcode and bytes as Python's
 * pickle reads them (integers at every width, both signs, past 2^63),
 * nesting, and the errors pickle__finish() reports.
 */
#include <string.h>
#include "unit.h"
#include "util/pickle.h"

/* The bytes one value is written as, between PROTO 2 and STOP. */
static void expect_bytes(void (*write)(struct pickle *p, const void *arg), const void *arg,
			 const char *want, size_t want_len)
{
	struct unit_mem m;
	struct pickle p;
	char *out;

	pickle__start(&p, unit_mem_open(&m));
	write(&p, arg);
	assert_int_equal(pickle__finish(&p), 0);
	out = unit_mem_close(&m);
	assert_int_equal(m.len, want_len + 3);
	assert_memory_equal(out, "\x80\x02", 2);
	assert_memory_equal(out + 2, want, want_len);
	assert_int_equal(out[want_len + 2], '.');
	free(out);
}

static void w_int(struct pickle *p, const void *a)
{
	pickle__int(p, *(const int64_t *)a);
}

static void w_uint(struct pickle *p, const void *a)
{
	pickle__uint(p, *(const uint64_t *)a);
}

static void w_str(struct pickle *p, const void *a)
{
	pickle__str(p, a);
}

#define INT(v, bytes) expect_bytes(w_int, &(int64_t){ v }, bytes, sizeof(bytes) - 1)
#define UINT(v, bytes) expect_bytes(w_uint, &(uint64_t){ v }, bytes, sizeof(bytes) - 1)

static void test_integers(void **state)
{
	INT(0, "K\x00");
	INT(255, "K\xff");
	INT(256, "M\x00\x01");
	INT(65535, "M\xff\xff");
	INT(65536, "J\x00\x00\x01\x00");
	INT(-1, "J\xff\xff\xff\xff");
	INT(INT32_MAX, "J\xff\xff\xff\x7f");
	INT(INT32_MIN, "J\x00\x00\x00\x80");
	/* LONG1: the fewest bytes of two's complement, least significant first */
	INT((int64_t)1 << 31, "\x8a\x05\x00\x00\x00\x80\x00");
	INT((int64_t)1 << 40, "\x8a\x06\x00\x00\x00\x00\x00\x01");
	INT(-((int64_t)1 << 40), "\x8a\x06\x00\x00\x00\x00\x00\xff");
	INT(INT64_MIN, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80");
	/* a GPU address, and unsigned values past 2^63 (a ninth byte keeps them positive) */
	UINT(0x7f12345678ULL, "\x8a\x05\x78\x56\x34\x12\x7f");
	UINT(UINT64_MAX, "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00");
	UINT(1ULL << 63, "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00");
}

static void test_strings(void **state)
{
	expect_bytes(w_str, "", "X\x00\x00\x00\x00", 5);
	expect_bytes(w_str, "h\xc3\xa9", "X\x03\x00\x00\x00h\xc3\xa9", 8);
	expect_bytes(w_str, NULL, "N", 1);
}

static void test_nesting(void **state)
{
	struct unit_mem m;
	struct pickle p;
	char *out;
	/* {'a': [True, False, None, 1.5, (0, 0)], 'b': {}} */
	static const char want[] = "\x80\x02}(X\x01\x00\x00\x00" "a](\x88\x89NG\x3f\xf8\x00\x00"
				   "\x00\x00\x00\x00K\x00K\x00\x86" "eX\x01\x00\x00\x00" "b}(uu.";

	pickle__start(&p, unit_mem_open(&m));
	pickle__dict(&p);
	pickle__str(&p, "a");
	pickle__list(&p);
	pickle__bool(&p, true);
	pickle__bool(&p, false);
	pickle__none(&p);
	pickle__float(&p, 1.5);
	pickle__pair(&p, 0, 0);
	pickle__end_list(&p);
	pickle__str(&p, "b");
	pickle__dict(&p);
	pickle__end_dict(&p);
	pickle__end_dict(&p);
	assert_int_equal(pickle__finish(&p), 0);
	out = unit_mem_close(&m);
	assert_int_equal(m.len, sizeof(want) - 1);
	assert_memory_equal(out, want, sizeof(want) - 1);
	free(out);
}

static void test_memo(void **state)
{
	struct unit_mem m;
	struct pickle p;
	char *out;
	/* [['a'], ['a']]: the second the same list, from the memo */
	static const char want[] = "\x80\x02](](X\x01\x00\x00\x00" "aer\x00\x00\x00\x00"
				   "j\x00\x00\x00\x00" "e.";

	pickle__start(&p, unit_mem_open(&m));
	pickle__list(&p);
	pickle__list(&p);
	pickle__str(&p, "a");
	pickle__end_list(&p);
	assert_int_equal(pickle__keep(&p), 0);
	pickle__get(&p, 0);
	pickle__end_list(&p);
	assert_int_equal(pickle__finish(&p), 0);
	out = unit_mem_close(&m);
	assert_int_equal(m.len, sizeof(want) - 1);
	assert_memory_equal(out, want, sizeof(want) - 1);
	free(out);
}

static void test_errors(void **state)
{
	struct unit_mem m;
	struct pickle p;
	FILE *f;

	pickle__start(&p, unit_mem_open(&m));
	pickle__list(&p);
	assert_int_equal(pickle__finish(&p), -EINVAL); /* a list left open */
	free(unit_mem_close(&m));
	f = fopen("/dev/full", "w");
	assert_non_null(f);
	setvbuf(f, NULL, _IONBF, 0);
	pickle__start(&p, f);
	pickle__str(&p, "x");
	assert_int_equal(pickle__finish(&p), -EIO);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_integers),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_memo),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests_name("pickle", tests, NULL, NULL);
}
