// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_stacks.c - stacks/stacks.c: interning gives equal stacks one id and
 * different stacks different ids, frames come back as given, STACK_NONE and
 * unknown ids have no frames, and the table grows without losing anything.
 */
#include "unit.h"
#include "stacks/stacks.h"

static void expect_frames(struct stacks *s, uint32_t id, const struct frame *f, uint32_t n)
{
	uint32_t got_n = 12345;
	const struct frame *got = stacks__get(s, id, &got_n);

	assert_int_equal(got_n, n);
	if (n) {
		assert_non_null(got);
		assert_memory_equal(got, f, n * sizeof(*f));
	}
}

static void test_empty_table(void **state)
{
	struct stacks *s = stacks__new();
	uint32_t n = 99;

	assert_non_null(s);
	assert_int_equal(stacks__count(s), 0);
	assert_null(stacks__get(s, STACK_NONE, &n));
	assert_int_equal(n, 0);
	n = 99;
	assert_null(stacks__get(s, 1, &n));
	assert_int_equal(n, 0);
	assert_true(stacks__mem(s) > 0);
	stacks__free(s);
	stacks__free(NULL);
}

static void test_intern_same_and_different(void **state)
{
	struct stacks *s = stacks__new();
	struct frame a[3] = {
		{ .addr = 0x1000, .mod = 1, .kind = FRAME_NATIVE },
		{ .addr = 0x2000, .mod = 2, .kind = FRAME_NATIVE },
		{ .addr = 7, .mod = 3, .kind = FRAME_PYTHON },
	};
	struct frame b[3];
	uint32_t ida, id, n = 0;

	assert_non_null(s);
	ida = stacks__intern(s, a, 3);
	assert_int_not_equal(ida, STACK_NONE);
	assert_int_equal(stacks__count(s), 1);
	/* equal content from another buffer: the same id */
	memcpy(b, a, sizeof(a));
	assert_int_equal(stacks__intern(s, b, 3), ida);
	assert_int_equal(stacks__count(s), 1);
	expect_frames(s, ida, a, 3);

	/* any field of any frame, or the length, makes another stack */
	b[2].addr = 8;
	id = stacks__intern(s, b, 3);
	assert_int_not_equal(id, ida);
	memcpy(b, a, sizeof(a));
	b[0].mod = 9;
	assert_int_not_equal(stacks__intern(s, b, 3), ida);
	memcpy(b, a, sizeof(a));
	b[1].kind = FRAME_UNKNOWN;
	assert_int_not_equal(stacks__intern(s, b, 3), ida);
	assert_int_not_equal(stacks__intern(s, a, 2), ida);
	assert_int_not_equal(stacks__intern(s, a, 1), stacks__intern(s, a, 2));
	/* the reversed stack is another stack */
	b[0] = a[2], b[1] = a[1], b[2] = a[0];
	assert_int_not_equal(stacks__intern(s, b, 3), ida);
	assert_int_equal(stacks__count(s), 7);

	/* every id is stable and keeps its frames */
	assert_int_equal(stacks__intern(s, a, 3), ida);
	assert_int_equal(stacks__intern(s, a, 2), stacks__intern(s, a, 2));
	expect_frames(s, ida, a, 3);
	expect_frames(s, stacks__intern(s, a, 1), a, 1);
	assert_null(stacks__get(s, stacks__count(s) + 1, &n));
	assert_int_equal(n, 0);
	stacks__free(s);
}

/* The API frame alone is what books use when no stack came. */
static void test_single_api_frame(void **state)
{
	struct stacks *s = stacks__new();
	struct frame f1 = { .mod = 1, .kind = FRAME_API }, f2 = { .mod = 2, .kind = FRAME_API };
	uint32_t id1, id2;

	assert_non_null(s);
	id1 = stacks__intern(s, &f1, 1);
	id2 = stacks__intern(s, &f2, 1);
	assert_int_not_equal(id1, STACK_NONE);
	assert_int_not_equal(id2, STACK_NONE);
	assert_int_not_equal(id1, id2);
	assert_int_equal(stacks__intern(s, &f1, 1), id1);
	expect_frames(s, id2, &f2, 1);
	stacks__free(s);
}

static void test_empty_stack(void **state)
{
	struct stacks *s = stacks__new();
	struct frame f = { .addr = 1 };
	uint32_t id, n = 5;

	assert_non_null(s);
	/* as the first stack of a table, before any frame storage exists */
	id = stacks__intern(s, &f, 0);
	assert_int_not_equal(id, STACK_NONE);
	assert_int_equal(stacks__intern(s, &f, 0), id);
	stacks__get(s, id, &n);
	assert_int_equal(n, 0);
	assert_int_not_equal(stacks__intern(s, &f, 1), id);
	assert_int_equal(stacks__intern(s, &f, 0), id);
	stacks__free(s);
}

/* Thousands of stacks of many lengths: arrays grow, nothing moves under an id. */
static void test_growth(void **state)
{
	struct stacks *s = stacks__new();
	enum { N = 5000 };
	static uint32_t ids[N];
	struct frame f[200];
	size_t mem0;

	assert_non_null(s);
	mem0 = stacks__mem(s);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t n = 1 + i % 200;

		for (uint32_t j = 0; j < n; j++)
			f[j] = (struct frame){ .addr = i * 1000ULL + j, .mod = j,
					       .kind = FRAME_NATIVE };
		ids[i] = stacks__intern(s, f, n);
		assert_int_equal(ids[i], i + 1);
	}
	assert_int_equal(stacks__count(s), N);
	assert_true(stacks__mem(s) > mem0);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t n = 1 + i % 200;

		for (uint32_t j = 0; j < n; j++)
			f[j] = (struct frame){ .addr = i * 1000ULL + j, .mod = j,
					       .kind = FRAME_NATIVE };
		expect_frames(s, ids[i], f, n);
		assert_int_equal(stacks__intern(s, f, n), ids[i]);
	}
	assert_int_equal(stacks__count(s), N);
	stacks__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_table),
		cmocka_unit_test(test_intern_same_and_different),
		cmocka_unit_test(test_single_api_frame),
		cmocka_unit_test(test_empty_stack),
		cmocka_unit_test(test_growth),
	};

	return cmocka_run_group_tests_name("stacks", tests, NULL, NULL);
}
