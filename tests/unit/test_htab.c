// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_htab.c - util/htab.c: insert, lookup, delete (backward shift under
 * collisions and around the end of the table), growth, iteration, clear,
 * and a long random sequence checked against a plain array.
 */
#include "unit.h"
#include "util/htab.h"

/* The slot a key lands in when it is alone in a fresh table (its home). */
static size_t home_slot(uint64_t key)
{
	struct htab *h = htab__new(sizeof(key), sizeof(uint64_t));
	size_t it = 0;

	assert_non_null(h);
	assert_non_null(htab__upsert(h, &key, NULL));
	assert_non_null(htab__next(h, &it, NULL));
	htab__free(h);
	return it - 1;
}

/* Finds n keys >= *from whose home is slot; returns the last key tried + 1 in *from. */
static void keys_with_home(size_t slot, uint64_t *out, int n, uint64_t *from)
{
	uint64_t k = *from;

	for (int i = 0; i < n; k++) {
		assert_true(k < *from + 1000000);
		if (home_slot(k) == slot)
			out[i++] = k;
	}
	*from = k;
}

static uint64_t *put(struct htab *h, uint64_t key, uint64_t val)
{
	bool created = false;
	uint64_t *v = htab__upsert(h, &key, &created);

	assert_non_null(v);
	assert_true(created);
	assert_int_equal(*v, 0);
	*v = val;
	return v;
}

static void expect(struct htab *h, uint64_t key, uint64_t val)
{
	uint64_t *v = htab__lookup(h, &key);

	if (!v)
		fail_msg("key %llu not found", (unsigned long long)key);
	assert_int_equal(*v, val);
}

static void expect_absent(struct htab *h, uint64_t key)
{
	if (htab__lookup(h, &key))
		fail_msg("key %llu found after deletion", (unsigned long long)key);
}

static void test_basic(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	uint64_t k = 42, *v;
	bool created = true;

	assert_non_null(h);
	assert_int_equal(htab__count(h), 0);
	assert_null(htab__lookup(h, &k));
	assert_false(htab__delete(h, &k));
	put(h, 42, 4200);
	assert_int_equal(htab__count(h), 1);
	expect(h, 42, 4200);
	/* upsert of an existing key returns its value untouched */
	v = htab__upsert(h, &k, &created);
	assert_false(created);
	assert_int_equal(*v, 4200);
	assert_int_equal(htab__count(h), 1);
	/* created may be NULL */
	k = 43;
	v = htab__upsert(h, &k, NULL);
	assert_non_null(v);
	assert_int_equal(htab__count(h), 2);
	k = 42;
	assert_true(htab__delete(h, &k));
	assert_false(htab__delete(h, &k));
	expect_absent(h, 42);
	assert_int_equal(htab__count(h), 1);
	htab__free(h);
	htab__free(NULL);
}

/* Keys of odd sizes: every byte counts, padding does not leak in. */
static void test_key_sizes(void **state)
{
	static const size_t sizes[] = { 1, 3, 12, 40 };

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t ks = sizes[s];
		struct htab *h = htab__new(ks, 3);
		unsigned char key[40];
		int n = ks == 1 ? 256 : 2000;

		assert_non_null(h);
		for (int i = 0; i < n; i++) {
			unsigned char *v;

			memset(key, 0xa5, sizeof(key));
			memcpy(key + ks - (ks >= 2 ? 2 : 1), &i, ks >= 2 ? 2 : 1);
			v = htab__upsert(h, key, NULL);
			assert_non_null(v);
			v[0] = (unsigned char)i;
			v[2] = (unsigned char)(i >> 8);
		}
		assert_int_equal(htab__count(h), n);
		for (int i = 0; i < n; i++) {
			unsigned char *v;

			memset(key, 0xa5, sizeof(key));
			memcpy(key + ks - (ks >= 2 ? 2 : 1), &i, ks >= 2 ? 2 : 1);
			v = htab__lookup(h, key);
			assert_non_null(v);
			assert_int_equal(v[0], (unsigned char)i);
			assert_int_equal(v[2], (unsigned char)(i >> 8));
		}
		/* a key differing only in its first byte is another key */
		if (ks > 2) {
			memset(key, 0xa5, sizeof(key));
			memset(key + ks - 2, 0, 2);
			key[0] = 0x5a;
			assert_null(htab__lookup(h, key));
		}
		htab__free(h);
	}
}

/*
 * A cluster that wraps from the last slot to the first: deleting its head
 * must shift every later member that may move back, and only those. Homes
 * are odd slots so that the test holds whatever the hash's low bit.
 */
static void test_delete_wraparound(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	uint64_t at15[4], at1[2], at3[1], at5[1], from = 1;

	assert_non_null(h);
	keys_with_home(15, at15, 4, &from);
	keys_with_home(1, at1, 2, &from);
	keys_with_home(3, at3, 1, &from);
	keys_with_home(5, at5, 1, &from);
	/* 15:a 0:b 1:c 2:d (home 15) 3:e 4:f (home 1) 5:g (home 3) 6:h (home 5) */
	for (int i = 0; i < 4; i++)
		put(h, at15[i], 100 + i);
	for (int i = 0; i < 2; i++)
		put(h, at1[i], 200 + i);
	put(h, at3[0], 300);
	put(h, at5[0], 400);
	assert_int_equal(htab__count(h), 8);

	/* delete the head at slot 15: everything shifts back around the end */
	assert_true(htab__delete(h, &at15[0]));
	expect_absent(h, at15[0]);
	for (int i = 1; i < 4; i++)
		expect(h, at15[i], 100 + i);
	for (int i = 0; i < 2; i++)
		expect(h, at1[i], 200 + i);
	expect(h, at3[0], 300);
	expect(h, at5[0], 400);

	/* delete from the middle, then the tail, then re-insert */
	assert_true(htab__delete(h, &at1[0]));
	expect(h, at1[1], 201);
	expect(h, at3[0], 300);
	expect(h, at5[0], 400);
	assert_true(htab__delete(h, &at5[0]));
	expect(h, at3[0], 300);
	put(h, at5[0], 401);
	put(h, at15[0], 102);
	for (int i = 0; i < 4; i++)
		expect(h, at15[i], i == 0 ? 102 : 100 + i);
	expect(h, at1[1], 201);
	expect(h, at3[0], 300);
	expect(h, at5[0], 401);
	assert_int_equal(htab__count(h), 7);

	/* delete every member in insertion order, checking the rest each time */
	{
		uint64_t all[7] = { at15[1], at15[2], at15[3], at1[1], at3[0], at5[0], at15[0] };

		for (int i = 0; i < 7; i++) {
			assert_true(htab__delete(h, &all[i]));
			for (int j = i + 1; j < 7; j++)
				assert_non_null(htab__lookup(h, &all[j]));
			for (int j = 0; j <= i; j++)
				expect_absent(h, all[j]);
		}
	}
	assert_int_equal(htab__count(h), 0);
	htab__free(h);
}

/* An entry whose home is after the hole must not move into it. */
static void test_delete_keeps_entries_at_home(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	uint64_t a[2], b[2], from = 1;

	assert_non_null(h);
	keys_with_home(5, a, 2, &from);
	keys_with_home(7, b, 2, &from);
	/* 5:a0 6:a1 7:b0 8:b1 - b0 is at home, b1 one past it */
	put(h, a[0], 1);
	put(h, a[1], 2);
	put(h, b[0], 3);
	put(h, b[1], 4);
	assert_true(htab__delete(h, &a[0]));
	expect(h, a[1], 2);
	expect(h, b[0], 3);
	expect(h, b[1], 4);
	assert_true(htab__delete(h, &a[1]));
	expect(h, b[0], 3);
	expect(h, b[1], 4);
	assert_true(htab__delete(h, &b[0]));
	expect(h, b[1], 4);
	htab__free(h);
}

static void test_growth(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	size_t mem0 = htab__mem(h), mem;
	const uint64_t n = 100000;

	assert_non_null(h);
	for (uint64_t i = 0; i < n; i++)
		put(h, i * 7919, i);
	assert_int_equal(htab__count(h), n);
	mem = htab__mem(h);
	/* at most 80% full, each slot at least key + value */
	assert_true(mem > mem0);
	assert_true(mem >= n * 16 * 5 / 4);
	for (uint64_t i = 0; i < n; i++)
		expect(h, i * 7919, i);
	expect_absent(h, 1);
	for (uint64_t i = 0; i < n; i += 2)
		assert_true(htab__delete(h, &(uint64_t){ i * 7919 }));
	assert_int_equal(htab__count(h), n / 2);
	for (uint64_t i = 0; i < n; i++) {
		if (i % 2)
			expect(h, i * 7919, i);
		else
			expect_absent(h, i * 7919);
	}
	htab__free(h);
}

static void test_iteration(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	const uint64_t n = 1000;
	unsigned char seen[1000] = { 0 };
	const void *key;
	uint64_t *v;
	size_t it = 0, count = 0;

	assert_non_null(h);
	it = 0;
	assert_null(htab__next(h, &it, &key));
	for (uint64_t i = 0; i < n; i++)
		put(h, i, i + 1);
	it = 0;
	while ((v = htab__next(h, &it, &key))) {
		uint64_t k;

		memcpy(&k, key, sizeof(k));
		assert_true(k < n);
		assert_int_equal(*v, k + 1);
		assert_int_equal(seen[k], 0);
		seen[k] = 1;
		count++;
	}
	assert_int_equal(count, n);
	/* iteration is done: it stays done */
	assert_null(htab__next(h, &it, &key));
	/* key may be NULL */
	it = 0;
	assert_non_null(htab__next(h, &it, NULL));
	htab__free(h);
}

static void test_clear(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	size_t mem, it = 0;

	assert_non_null(h);
	for (uint64_t i = 0; i < 500; i++)
		put(h, i, i);
	mem = htab__mem(h);
	htab__clear(h);
	assert_int_equal(htab__count(h), 0);
	assert_int_equal(htab__mem(h), mem);
	assert_null(htab__next(h, &it, NULL));
	for (uint64_t i = 0; i < 500; i++)
		expect_absent(h, i);
	for (uint64_t i = 0; i < 500; i++)
		put(h, i, i * 3);
	for (uint64_t i = 0; i < 500; i++)
		expect(h, i, i * 3);
	assert_int_equal(htab__mem(h), mem);
	htab__free(h);
}

static void test_hash_bytes(void **state)
{
	unsigned char buf[24] = { 0 };
	uint64_t base = hash_bytes(buf, sizeof(buf), 0);

	assert_int_equal(hash_bytes(buf, sizeof(buf), 0), base);
	assert_int_not_equal(hash_bytes(buf, sizeof(buf), 1), base);
	/* every byte and every length matters */
	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = 1;
		assert_int_not_equal(hash_bytes(buf, sizeof(buf), 0), base);
		buf[i] = 0;
	}
	for (size_t len = 0; len < sizeof(buf); len++)
		assert_int_not_equal(hash_bytes(buf, len, 0), hash_bytes(buf, len + 1, 0));
}

/* A tiny xorshift generator: the same sequence on every machine. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#define MODEL_KEYS 300

struct model {
	bool present[MODEL_KEYS];
	uint64_t val[MODEL_KEYS];
	size_t count;
};

static void check_model(struct htab *h, const struct model *m)
{
	size_t it = 0, seen = 0;
	const void *key;
	uint64_t *v;

	assert_int_equal(htab__count(h), m->count);
	for (uint64_t k = 0; k < MODEL_KEYS; k++) {
		v = htab__lookup(h, &k);
		if (m->present[k]) {
			if (!v)
				fail_msg("key %llu lost", (unsigned long long)k);
			assert_int_equal(*v, m->val[k]);
		} else if (v) {
			fail_msg("key %llu present after deletion", (unsigned long long)k);
		}
	}
	while ((v = htab__next(h, &it, &key))) {
		uint64_t k;

		memcpy(&k, key, sizeof(k));
		assert_true(k < MODEL_KEYS);
		assert_true(m->present[k]);
		seen++;
	}
	assert_int_equal(seen, m->count);
}

/*
 * Random inserts, updates and deletes over a small key space, so that the
 * table keeps growing and shrinking clusters near its load limit.
 */
static void test_random_against_model(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t));
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(h);
	assert_non_null(m);
	rng_state = 0x9e3779b97f4a7c15ULL;
	for (int op = 0; op < 200000; op++) {
		/* grow the live set early on, then churn around it */
		uint64_t range = op < 2000 ? 16 + op / 8 : MODEL_KEYS;
		uint64_t k = rng() % range, r = rng() % 100;
		bool created;

		if (r < 55) {
			uint64_t *v = htab__upsert(h, &k, &created);

			assert_non_null(v);
			assert_int_equal(created, !m->present[k]);
			if (created) {
				assert_int_equal(*v, 0);
				m->present[k] = true;
				m->count++;
			} else {
				assert_int_equal(*v, m->val[k]);
			}
			*v = m->val[k] = rng();
		} else if (r < 95) {
			assert_int_equal(htab__delete(h, &k), m->present[k]);
			if (m->present[k])
				m->count--;
			m->present[k] = false;
		} else {
			uint64_t *v = htab__lookup(h, &k);

			assert_int_equal(v != NULL, m->present[k]);
		}
		if (op % 97 == 0)
			check_model(h, m);
		if (op == 150000) {
			htab__clear(h);
			memset(m, 0, sizeof(*m));
		}
	}
	check_model(h, m);
	htab__free(h);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_key_sizes),
		cmocka_unit_test(test_delete_wraparound),
		cmocka_unit_test(test_delete_keeps_entries_at_home),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_iteration),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_hash_bytes),
		cmocka_unit_test(test_random_against_model),
	};

	return cmocka_run_group_tests_name("htab", tests, NULL, NULL);
}
