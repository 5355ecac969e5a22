// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_census_join.c - the census joined with the books: a census walked for
 * real over the synthetic heap of census_heap.h (two views of one 64-byte
 * storage, held by __main__.h), joined with synthetic books: a block holding
 * the storage, a segment only (tensor windows), none (CPU memory, device
 * memory from before attach), no books at all.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "census/join.h"
#include "../fuzz/census_heap.h"
#include "unit.h"

/* Walks the heap as census_heap_build() left it (and as the caller patched it). */
static void walk(struct census *c)
{
	struct census_mem m = { .read = census_heap_read };
	struct census_caps caps = { .max_objects = 5000, .max_read_bytes = 1 << 20,
				    .max_ns = 2000000000ULL };

	assert_int_equal(census__walk(&m, &census_heap_py, &caps, c), 0);
	assert_true(c->layout_ok);
	assert_int_equal(c->nr_tensors, 2);
}

static void join(const struct census *c, struct census_book *v, size_t n, bool windowed,
		 struct census_joined *j)
{
	struct census_books b = { .traced = true, .blocks_windowed = windowed, .v = v, .n = n };

	census__join_prepare(&b);
	assert_int_equal(census__join(c, &b, j), 0);
}

static void test_block_joins_leak_to_holder(void **state)
{
	/* a segment around the storage, a leaking block holding it, another block apart */
	struct census_book v[] = {
		{ BASE + DATA + 64, 32, true, false, "other (x.py:1)" },
		{ BASE, HEAP, false, false, "grow (alloc.py:3)" },
		{ BASE + DATA, 64, true, true, "step (train.py:12)" },
	};
	struct census c;
	struct census_joined j;

	(void)state;
	census_heap_build();
	walk(&c);
	join(&c, v, 3, false, &j);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(j.tensors[i].kind, CENSUS_JOIN_BLOCK);
		assert_string_equal(j.tensors[i].book->site, "step (train.py:12)");
		assert_null(census__join_why(NULL, &j.tensors[i]));
	}
	assert_int_equal(j.joined_tensors, 2);
	assert_int_equal(j.nr_leaks, 1);
	assert_string_equal(j.leaks[0].site, "step (train.py:12)");
	assert_int_equal(j.leaks[0].tensors, 2);
	assert_int_equal(j.leaks[0].storages, 1); /* views of one storage count once */
	assert_int_equal(j.leaks[0].bytes, 64);
	assert_int_equal(j.leaks[0].nr_holders, 1);
	assert_string_equal(j.leaks[0].holders[0], "__main__.h");
	assert_int_equal(j.pre_attach_tensors, 0);
	census__joined_free(&j);
	census__free(&c);
}

static void test_segment_only_in_windows(void **state)
{
	struct census_book v[] = { { BASE + DATA - 4096, 8192, false, false, "grow (a.py:3)" } };
	struct census c;
	struct census_joined j;

	(void)state;
	census_heap_build();
	walk(&c);
	join(&c, v, 1, true, &j);
	assert_int_equal(j.tensors[0].kind, CENSUS_JOIN_SEGMENT);
	assert_true(j.tensors[0].block_unknown);
	assert_non_null(strstr(census__join_why(NULL, &j.tensors[0]), "none is open"));
	assert_int_equal(j.nr_leaks, 0);
	census__joined_free(&j);
	census__free(&c);
}

static void test_cpu_and_pre_attach(void **state)
{
	struct census_book v[] = { { BASE + DATA + 64, 64, true, true, "elsewhere (b.py:9)" } };
	struct census c;
	struct census_joined j;

	(void)state;
	census_heap_build();
	walk(&c);
	join(&c, v, 1, false, &j); /* a block right after the storage: no match */
	assert_int_equal(j.tensors[0].kind, CENSUS_JOIN_CPU);
	assert_non_null(strstr(census__join_why(NULL, &j.tensors[0]), "CPU memory"));
	assert_int_equal(j.pre_attach_tensors, 0);
	census__joined_free(&j);
	census__free(&c);

	/* the same storage on CUDA device 0: device memory in no allocation seen */
	census_heap_build();
	heap[STORAGE + 48] = 1;
	heap[STORAGE + 49] = 0;
	walk(&c);
	assert_int_equal(c.tensors[0].dev_type, 1);
	join(&c, v, 1, false, &j);
	assert_int_equal(j.tensors[0].kind, CENSUS_JOIN_PRE_ATTACH);
	assert_int_equal(j.tensors[1].kind, CENSUS_JOIN_PRE_ATTACH);
	assert_int_equal(j.pre_attach_tensors, 2);
	assert_int_equal(j.pre_attach_bytes, 64);
	assert_non_null(strstr(census__join_why(NULL, &j.tensors[0]), "predates the attach"));
	census__joined_free(&j);
	census__free(&c);
}

static void test_no_books(void **state)
{
	struct census c;
	struct census_joined j;

	(void)state;
	census_heap_build();
	walk(&c);
	assert_int_equal(census__join(&c, NULL, &j), 0);
	assert_int_equal(j.tensors[0].kind, CENSUS_JOIN_NO_BOOKS);
	assert_string_equal(census__join_name(j.tensors[0].kind), "no_books");
	assert_int_equal(j.joined_tensors, 0);
	census__joined_free(&j);
	census__free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_joins_leak_to_holder),
		cmocka_unit_test(test_segment_only_in_windows),
		cmocka_unit_test(test_cpu_and_pre_attach),
		cmocka_unit_test(test_no_books),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
