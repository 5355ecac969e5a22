// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_winlog.c - the tensor windows' log (model/winlog.c) that a live session
 * and a recording's replay share: coverage and armed time in each phase, the
 * last SNAP_MAX_WINDOWS windows kept of more, windows only in windowed mode,
 * and events in an order a damaged recording can give.
 */
#include "unit.h"
#include "model/winlog.h"

#define S 1000000000ULL
#define T0 (100 * S)

static void test_windows_in_turn(void **state)
{
	struct snap_tensors v;
	struct winlog w;

	winlog__init(&w, "windowed", 0, T0);
	assert_int_equal(winlog__phase(&w), WINLOG_IDLE);
	winlog__open(&w, T0, TIER_WHY_START);
	winlog__view(&w, T0 + 2 * S, &v);
	assert_string_equal(v.mode, "windowed");
	assert_string_equal(v.coverage, "complete"); /* the first window, open from the start */
	assert_true(v.armed);
	assert_int_equal(v.until_ns, 0);
	assert_true(v.armed_s == 2.0);
	assert_true(v.windows[0].end_s < 0);
	winlog__tail(&w);
	winlog__view(&w, T0 + 3 * S, &v);
	assert_string_equal(v.coverage, "windowed"); /* its tail: frees only */
	assert_true(v.armed);
	winlog__close(&w, T0 + 4 * S);
	winlog__view(&w, T0 + 10 * S, &v);
	assert_false(v.armed);
	assert_int_equal(v.until_ns, T0 + 4 * S); /* verdicts as of the window's end */
	assert_true(v.armed_s == 4.0);
	assert_true(v.windows[0].end_s == 4.0);
	winlog__open(&w, T0 + 20 * S, TIER_WHY_GROWTH);
	winlog__view(&w, T0 + 21 * S, &v);
	assert_int_equal(v.windows_total, 2);
	assert_string_equal(v.windows[1].why, "growth");
	assert_true(v.windows[1].start_s == 20.0);
	assert_true(v.armed_s == 5.0);
	winlog__stop(&w);
	winlog__view(&w, T0 + 22 * S, &v);
	assert_string_equal(v.coverage, "none");
	assert_false(v.armed);
}

static void test_the_last_windows_are_kept(void **state)
{
	struct snap_tensors v;
	struct winlog w;

	winlog__init(&w, NULL, 0, T0);
	for (uint64_t i = 0; i < SNAP_MAX_WINDOWS + 3; i++) {
		winlog__open(&w, T0 + i * 10 * S, i ? TIER_WHY_DUTY : TIER_WHY_START);
		winlog__close(&w, T0 + i * 10 * S + S);
	}
	winlog__view(&w, T0 + 1000 * S, &v);
	assert_int_equal(v.windows_total, SNAP_MAX_WINDOWS + 3);
	assert_int_equal(v.nwindows, SNAP_MAX_WINDOWS);
	assert_true(v.windows[0].start_s == 30.0); /* the oldest kept: the fourth */
	assert_true(v.windows[SNAP_MAX_WINDOWS - 1].end_s == (SNAP_MAX_WINDOWS + 2) * 10.0 + 1);
	assert_true(v.armed_s == SNAP_MAX_WINDOWS + 3.0); /* every window's second counts */
}

static void test_modes_without_windows(void **state)
{
	struct snap_tensors v;
	struct winlog w;

	winlog__init(&w, "full", 0, T0);
	winlog__open(&w, T0 + S, TIER_WHY_REQUEST); /* no windows in full mode */
	winlog__view(&w, T0 + 5 * S, &v);
	assert_string_equal(v.mode, "full");
	assert_string_equal(v.coverage, "complete");
	assert_int_equal(v.windows_total, 0);
	assert_true(v.armed_s == 5.0);
	winlog__init(&w, "sampled", 1 << 20, T0);
	winlog__view(&w, T0 + S, &v);
	assert_string_equal(v.coverage, "sampled");
	assert_int_equal(v.sample_bytes, 1 << 20);
	winlog__init(&w, "off", 0, T0);
	winlog__view(&w, T0 + S, &v);
	assert_string_equal(v.coverage, "none");
	assert_false(v.armed);
}

/* What a damaged recording can give: an opening without a close, a close before its start. */
static void test_events_out_of_order(void **state)
{
	struct snap_tensors v;
	enum tier_why why;
	uint64_t start;
	struct winlog w;

	winlog__init(&w, "windowed", 0, T0);
	assert_false(winlog__current(&w, &start, &why));
	winlog__close(&w, T0 + S); /* nothing open: nothing happens */
	winlog__tail(&w);
	assert_int_equal(winlog__phase(&w), WINLOG_IDLE);
	winlog__open(&w, T0 + 5 * S, 9); /* an unknown reason reads as a request */
	assert_true(winlog__current(&w, &start, &why));
	assert_int_equal(start, T0 + 5 * S);
	assert_int_equal(why, TIER_WHY_REQUEST);
	winlog__open(&w, T0 + 7 * S, TIER_WHY_DUTY); /* closes the one open at 7 s */
	winlog__close(&w, T0 + 6 * S);		      /* before its start: ends as it starts */
	winlog__view(&w, T0 + 9 * S, &v);
	assert_int_equal(v.windows_total, 2);
	assert_true(v.windows[0].end_s == 7.0);
	assert_true(v.windows[1].end_s == 7.0);
	assert_true(v.armed_s == 2.0);
	assert_string_equal(winlog__why_name(TIER_NR_WHY), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_in_turn),
		cmocka_unit_test(test_the_last_windows_are_kept),
		cmocka_unit_test(test_modes_without_windows),
		cmocka_unit_test(test_events_out_of_order),
	};

	return cmocka_run_group_tests_name("winlog", tests, NULL, NULL);
}
