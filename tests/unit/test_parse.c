// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_parse.c - util/parse.c: every parser's bounds, suffixes, overflow,
 * signs, trailing garbage and empty input, and that a failure leaves the
 * output untouched.
 */
#include "unit.h"
#include "util/parse.h"

#define SENTINEL 0xdeadbeefcafef00dULL

/* Expects err from parse_u64(s) and an untouched output. */
static void u64_err(const char *s, uint64_t min, uint64_t max, int err)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_u64(s, min, max, &v), err);
	assert_int_equal(v, SENTINEL);
}

static void u64_ok(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_u64(s, min, max, &v), 0);
	assert_int_equal(v, want);
}

static void test_u64_values(void **state)
{
	u64_ok("0", 0, UINT64_MAX, 0);
	u64_ok("1", 0, UINT64_MAX, 1);
	u64_ok("007", 0, UINT64_MAX, 7);
	u64_ok("4294967296", 0, UINT64_MAX, 4294967296ULL);
	u64_ok("18446744073709551615", 0, UINT64_MAX, UINT64_MAX);
}

static void test_u64_bounds(void **state)
{
	u64_ok("10", 10, 20, 10);
	u64_ok("20", 10, 20, 20);
	u64_err("9", 10, 20, -ERANGE);
	u64_err("21", 10, 20, -ERANGE);
	u64_err("0", 1, 5, -ERANGE);
	u64_ok("5", 5, 5, 5);
	u64_err("6", 5, 5, -ERANGE);
}

static void test_u64_overflow(void **state)
{
	u64_err("18446744073709551616", 0, UINT64_MAX, -ERANGE);
	u64_err("99999999999999999999999999", 0, UINT64_MAX, -ERANGE);
}

static void test_u64_rejects_garbage(void **state)
{
	static const char *const bad[] = {
		"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1.5", "1e3",
		"abc", "--1", "-0", "\t1", "1\n", "one", "1k", "-", "+",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		u64_err(bad[i], 0, UINT64_MAX, -EINVAL);
	u64_err(NULL, 0, UINT64_MAX, -EINVAL);
	/* a negative number that strtoull would wrap around */
	u64_err("-18446744073709551615", 0, UINT64_MAX, -EINVAL);
}

static void test_u32(void **state)
{
	uint32_t v = 77;

	assert_int_equal(parse_u32("4294967295", 0, UINT32_MAX, &v), 0);
	assert_int_equal(v, UINT32_MAX);
	v = 77;
	assert_int_equal(parse_u32("4294967296", 0, UINT32_MAX, &v), -ERANGE);
	assert_int_equal(v, 77);
	assert_int_equal(parse_u32("18446744073709551617", 0, UINT32_MAX, &v), -ERANGE);
	assert_int_equal(parse_u32("3", 4, 8, &v), -ERANGE);
	assert_int_equal(parse_u32("9", 4, 8, &v), -ERANGE);
	assert_int_equal(parse_u32("-1", 0, UINT32_MAX, &v), -EINVAL);
	assert_int_equal(parse_u32("", 0, UINT32_MAX, &v), -EINVAL);
	assert_int_equal(parse_u32("12abc", 0, UINT32_MAX, &v), -EINVAL);
	assert_int_equal(v, 77);
	assert_int_equal(parse_u32("8", 4, 8, &v), 0);
	assert_int_equal(v, 8);
}

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_size(s, 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, want);
}

static void size_err(const char *s, uint64_t min, uint64_t max, int err)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_size(s, min, max, &v), err);
	assert_int_equal(v, SENTINEL);
}

static void test_size_suffixes(void **state)
{
	size_ok("0", 0);
	size_ok("4096", 4096);
	size_ok("1k", 1024);
	size_ok("1K", 1024);
	size_ok("64k", 65536);
	size_ok("2KiB", 2048);
	size_ok("2kb", 2048);
	size_ok("2KB", 2048);
	size_ok("2Ki", 2048);
	size_ok("16M", 16ULL << 20);
	size_ok("16m", 16ULL << 20);
	size_ok("16MiB", 16ULL << 20);
	size_ok("1G", 1ULL << 30);
	size_ok("3GB", 3ULL << 30);
	size_ok("1T", 1ULL << 40);
	size_ok("1tib", 1ULL << 40);
	size_ok("0k", 0);
	/* a fraction with a unit, as long as the result is whole bytes */
	size_ok("1.5G", 3ULL << 29);
	size_ok("1.5M", 3ULL << 19);
	size_ok("0.5k", 512);
	size_ok("2.25k", 2304);
	size_ok("1.0", 1);
	size_ok("16.000k", 16384);
}

static void test_size_rejects(void **state)
{
	static const char *const bad[] = {
		"", "k", "-1k", "+1k", "1 k", "1k ", "1kk", "1x", "1P", "1E", "1kiB2",
		"1b", "1B", "1i", "1ib", "1kbi", "1.5", "1e3", " 1k", "0x10", "1M\n", "1.k",
		".5k", "1..5k", "1.5.k", "0.0000000001G", "1,5G",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = SENTINEL;

		if (parse_size(bad[i], 0, UINT64_MAX, &v) != -EINVAL)
			fail_msg("parse_size(\"%s\") accepted or gave the wrong error", bad[i]);
		assert_int_equal(v, SENTINEL);
	}
	size_err(NULL, 0, UINT64_MAX, -EINVAL);
}

static void test_size_overflow_and_bounds(void **state)
{
	/* 2^54 k = 2^64: one past the top */
	size_err("18014398509481984k", 0, UINT64_MAX, -ERANGE);
	size_err("16777216T", 0, UINT64_MAX, -ERANGE);
	size_err("99999999999999999999", 0, UINT64_MAX, -ERANGE);
	size_ok("18014398509481983k", 18014398509481983ULL * 1024);
	size_ok("16777215T", 16777215ULL << 40);
	size_err("4095", 4096, 1ULL << 31, -ERANGE);
	size_err("3k", 4096, 1ULL << 31, -ERANGE);
	size_err("3G", 4096, 1ULL << 31, -ERANGE);
	{
		uint64_t v = 0;

		assert_int_equal(parse_size("4k", 4096, 1ULL << 31, &v), 0);
		assert_int_equal(v, 4096);
		assert_int_equal(parse_size("2G", 4096, 1ULL << 31, &v), 0);
		assert_int_equal(v, 1ULL << 31);
	}
}

static void dur_ok(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_duration_ms(s, 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, want);
}

static void dur_err(const char *s, uint64_t min, uint64_t max, int err)
{
	uint64_t v = SENTINEL;

	assert_int_equal(parse_duration_ms(s, min, max, &v), err);
	assert_int_equal(v, SENTINEL);
}

static void test_duration(void **state)
{
	dur_ok("0", 0);
	dur_ok("10", 10000);
	dur_ok("10s", 10000);
	dur_ok("250ms", 250);
	dur_ok("0ms", 0);
	dur_ok("2m", 120000);
	dur_ok("1h", 3600000);
	dur_ok("24h", 86400000);
	/* as people write them */
	dur_ok("1.5s", 1500);
	dur_ok("0.5s", 500);
	dur_ok("90s", 90000);
	dur_ok("1m30s", 90000);
	dur_ok("2h", 7200000);
	dur_ok("1h30m", 5400000);
	dur_ok("1h0m5s", 3605000);
	dur_ok("2s500ms", 2500);
	dur_ok("1m0.5s", 60500);
	dur_ok("1.5", 1500);
	dur_ok("0.001", 1);
	dur_ok("1.5m", 90000);
}

static void test_duration_rejects(void **state)
{
	static const char *const bad[] = {
		"", "s", "ms", "-1", "-1s", "+1s", "1 s", "1s ", "1d", "1S", "1MS",
		"1H", "1sec", "1mss", "1us", "1ns", "1e3", " 1", "1m30", "30s1m", "1s1s",
		"1.5m30s", "1.s", ".5s", "1.5ms", "0.0001", "1..5s", "1s ", "1m 30s", "1ms5s",
		"1.0000000001s",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = SENTINEL;

		if (parse_duration_ms(bad[i], 0, UINT64_MAX, &v) != -EINVAL)
			fail_msg("parse_duration_ms(\"%s\") accepted or gave the wrong error",
				 bad[i]);
		assert_int_equal(v, SENTINEL);
	}
	dur_err(NULL, 0, UINT64_MAX, -EINVAL);
}

static void test_duration_overflow_and_bounds(void **state)
{
	/* UINT64_MAX / 1000 + 1 seconds overflows the milliseconds */
	dur_err("18446744073709552", 0, UINT64_MAX, -ERANGE);
	dur_ok("18446744073709551", 18446744073709551000ULL);
	dur_err("5124095576030432h", 0, UINT64_MAX, -ERANGE);
	dur_err("18446744073709551616ms", 0, UINT64_MAX, -ERANGE);
	/* parts that each fit but whose sum does not */
	dur_err("5124095576030431h18446744073709551s", 0, UINT64_MAX, -ERANGE);
	dur_err("1.5s", 1, 1000, -ERANGE);
	dur_err("0", 1, 1000, -ERANGE);
	dur_err("0s", 1, 1000, -ERANGE);
	dur_err("2s", 1, 1000, -ERANGE);
	dur_err("1001ms", 1, 1000, -ERANGE);
	{
		uint64_t v = 0;

		assert_int_equal(parse_duration_ms("1s", 1, 1000, &v), 0);
		assert_int_equal(v, 1000);
		assert_int_equal(parse_duration_ms("1ms", 1, 1000, &v), 0);
		assert_int_equal(v, 1);
	}
}

static void test_pid(void **state)
{
	int pid = -5;

	assert_int_equal(parse_pid("1", &pid), 0);
	assert_int_equal(pid, 1);
	assert_int_equal(parse_pid("4242", &pid), 0);
	assert_int_equal(pid, 4242);
	assert_int_equal(parse_pid("4194303", &pid), 0);
	assert_int_equal(pid, 4194303);
	pid = -5;
	assert_int_equal(parse_pid("4194304", &pid), -ERANGE); /* PID_MAX_LIMIT itself */
	assert_int_equal(pid, -5);
	assert_int_equal(parse_pid("0", &pid), -ERANGE);
	assert_int_equal(parse_pid("2147483648", &pid), -ERANGE);
	assert_int_equal(parse_pid("4294967297", &pid), -ERANGE);
	assert_int_equal(parse_pid("99999999999999999999", &pid), -ERANGE);
	assert_int_equal(parse_pid("-1", &pid), -EINVAL);
	assert_int_equal(parse_pid("+1", &pid), -EINVAL);
	assert_int_equal(parse_pid("", &pid), -EINVAL);
	assert_int_equal(parse_pid("12a", &pid), -EINVAL);
	assert_int_equal(parse_pid("1k", &pid), -EINVAL);
	assert_int_equal(parse_pid(" 12", &pid), -EINVAL);
	assert_int_equal(parse_pid(NULL, &pid), -EINVAL);
	assert_int_equal(pid, -5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64_values),
		cmocka_unit_test(test_u64_bounds),
		cmocka_unit_test(test_u64_overflow),
		cmocka_unit_test(test_u64_rejects_garbage),
		cmocka_unit_test(test_u32),
		cmocka_unit_test(test_size_suffixes),
		cmocka_unit_test(test_size_rejects),
		cmocka_unit_test(test_size_overflow_and_bounds),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_duration_rejects),
		cmocka_unit_test(test_duration_overflow_and_bounds),
		cmocka_unit_test(test_pid),
	};

	return cmocka_run_group_tests_name("parse", tests, NULL, NULL);
}
