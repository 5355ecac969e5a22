// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_analysis.c - the bounded series and its verdicts on synthetic histories:
 * each pattern gpuleak must tell apart (staircase, warm-up, release and
 * re-allocate, held once, slow leak under churn), the boundaries of every
 * threshold, bucket merging and time gaps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "books/analysis.h"

#define MS 1000000ULL
#define SEC 1000000000ULL
#define KIB (1ULL << 10)
#define MIB (1ULL << 20)

/* A series with its running value: what a stack holds while a test drives it. */
struct hist {
	struct series *s;
	uint64_t bytes;
	uint64_t t;
};

static struct hist *hist_new(uint64_t base_ns)
{
	static struct hist h;

	h = (struct hist){ .s = series__new(base_ns) };
	assert_non_null(h.s);
	return &h;
}

static void alloc_at(struct hist *h, uint64_t t, uint64_t size)
{
	h->t = t;
	h->bytes += size;
	series__add(h->s, t, h->bytes);
}

static void free_at(struct hist *h, uint64_t t, uint64_t size)
{
	h->t = t;
	h->bytes -= size;
	series__add(h->s, t, h->bytes);
}

static struct verdict_info classify(struct hist *h, uint64_t now)
{
	struct verdict_info vi;

	series__classify(h->s, now, &vi);
	return vi;
}

static void assert_verdict(const struct verdict_info *vi, enum verdict want, const char *word)
{
	if (vi->verdict != want || (word && !strstr(vi->why, word)))
		fail_msg("verdict %s (%s), want %s with \"%s\"", verdict__name(vi->verdict),
			 vi->why, verdict__name(want), word ? word : "");
}

static void assert_near(double got, double want, double tolerance)
{
	if (got < want * (1 - tolerance) || got > want * (1 + tolerance))
		fail_msg("got %.1f, want %.1f within %.0f%%", got, want, tolerance * 100);
}

/* one more --size buffer every step_ns, from t0, n steps */
static void staircase(struct hist *h, uint64_t t0, uint64_t step_ns, int n, uint64_t size)
{
	for (int i = 0; i < n; i++)
		alloc_at(h, t0 + i * step_ns, size);
}

static void test_no_history(void **state)
{
	struct verdict_info vi;

	(void)state;
	series__classify(NULL, 5 * SEC, &vi);
	assert_verdict(&vi, VERDICT_UNKNOWN, "no history");
	assert_string_equal(verdict__name(VERDICT_LEAK), "leak");
	assert_string_equal(verdict__name(VERDICT_STEADY), "steady");
	assert_string_equal(verdict__name(VERDICT_UNKNOWN), "unknown");
}

/* a loop that keeps one more buffer every iteration */
static void test_staircase_is_leak(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 10 * SEC, 100 * MS, 60, MIB);
	vi = classify(h, 16 * SEC);
	assert_verdict(&vi, VERDICT_LEAK, "no plateau");
	assert_near(vi.growth_bytes_per_s, 10.0 * MIB, 0.05);
	assert_true(vi.steps >= 55);
	assert_near(vi.window_s, 6.0, 0.01);
	assert_non_null(strstr(vi.why, "10.00 MiB/s"));
	series__free(h->s);
}

/* allocator warm-up (its pool grows for a few steps), then reuse: no driver calls */
static void test_warmup_then_reuse_is_steady(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 8, 20 * MIB);
	vi = classify(h, 6 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "plateau at 160.00 MiB");
	assert_true(vi.growth_bytes_per_s == 0);
	assert_int_equal(vi.steps, 7);
	series__free(h->s);
}

/* several growth steps in the newest bucket: the plateau is at the final level */
static void test_warmup_level_is_the_last_value(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 30 * MS, 10, 20 * MIB);
	vi = classify(h, 3 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "plateau at 200.00 MiB");
	series__free(h->s);
}

/* the same, with temporary blocks taken and given back on top of the pool */
static void test_warmup_then_churn_is_steady(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 8, 20 * MIB);
	for (uint64_t t = 1 * SEC; t < 8 * SEC; t += 30 * MS) {
		alloc_at(h, t, 64 * MIB);
		free_at(h, t + 10 * MS, 64 * MIB);
	}
	alloc_at(h, 8 * SEC, 64 * MIB); /* caught holding a temporary block */
	vi = classify(h, 8 * SEC + 5 * MS);
	assert_int_equal(vi.verdict, VERDICT_STEADY);
	assert_true(vi.growth_bytes_per_s == 0);
	series__free(h->s);
}

/* every 10 steps everything is released, then re-allocated a block a step (a sawtooth) */
static void test_release_and_reallocate_is_steady(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;
	uint64_t t = 0;

	(void)state;
	for (int cycle = 0; cycle < 6; cycle++) {
		for (int step = 0; step < 10; step++, t += 100 * MS)
			alloc_at(h, t, 8 * MIB);
		free_at(h, t - 50 * MS, h->bytes);
	}
	staircase(h, t, 100 * MS, 7, 8 * MIB); /* caught re-growing */
	vi = classify(h, t + 700 * MS);
	assert_verdict(&vi, VERDICT_STEADY, "returns to 0 B");
	assert_true(vi.growth_bytes_per_s == 0);
	series__free(h->s);
}

/* the same, the working set coming back at once (empty_cache() then the next step) */
static void test_release_and_reallocate_at_once_is_steady(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;
	uint64_t t = 0;

	(void)state;
	alloc_at(h, 0, 2 * MIB); /* held throughout */
	for (int i = 0; i < 12; i++, t += 7 * SEC) {
		alloc_at(h, t + 100 * MS, 300 * MIB);
		free_at(h, t + 6 * SEC, 300 * MIB);
	}
	alloc_at(h, t + 100 * MS, 300 * MIB);
	vi = classify(h, t + 2 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "returns to 2.00 MiB");
	series__free(h->s);
}

/* an allocation made once and held forever */
static void test_held_once_is_steady(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	alloc_at(h, 3 * SEC, 64 * MIB);
	vi = classify(h, 3 * SEC + 7999 * MS);
	assert_verdict(&vi, VERDICT_UNKNOWN, "needs 8.0 s");
	vi = classify(h, 3 * SEC + 8 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "allocated once");
	/* an idle process: an hour without a single call changes nothing */
	vi = classify(h, 3600 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "held for 60.0 min");
	assert_int_equal(vi.steps, 0);
	series__free(h->s);
}

/* every 20 ms: 8 x 4 MiB taken and given back, and 64 KiB kept, at the same stack */
static void churn_leak(struct hist *h, uint64_t t0, uint64_t t1, uint64_t kept)
{
	for (uint64_t t = t0; t < t1; t += 20 * MS) {
		for (int i = 0; i < 8; i++)
			alloc_at(h, t + i * MS, 4 * MIB);
		if (kept)
			alloc_at(h, t + 9 * MS, kept);
		for (int i = 0; i < 8; i++)
			free_at(h, t + 10 * MS + i * MS, 4 * MIB);
	}
}

static void test_slow_leak_under_churn_is_leak(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	churn_leak(h, 0, 5 * SEC, 64 * KIB);
	vi = classify(h, 5 * SEC);
	assert_verdict(&vi, VERDICT_LEAK, "no plateau");
	assert_near(vi.growth_bytes_per_s, 64.0 * KIB / 0.020, 0.05);
	series__free(h->s);
}

static void test_churn_without_leak_is_steady(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	alloc_at(h, 0, MIB);
	churn_leak(h, 1 * MS, 5 * SEC, 0);
	alloc_at(h, 5 * SEC, 4 * MIB); /* caught mid-step */
	vi = classify(h, 5 * SEC + 1 * MS);
	assert_verdict(&vi, VERDICT_STEADY, NULL);
	assert_true(vi.growth_bytes_per_s == 0);
	series__free(h->s);
}

/* a verdict needs 8 base widths of history, unless a staircase of many equal steps shows it */
static void test_min_window_boundary(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 190 * MS, 5, MIB); /* 4 rises: too few to judge early */
	vi = classify(h, 799 * MS);
	assert_verdict(&vi, VERDICT_UNKNOWN, "a verdict needs 0.8 s");
	vi = classify(h, 800 * MS);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	series__free(h->s);
}

/* a dozen identical steps in a short window: a leak at once, at its rate */
static void test_early_staircase_is_leak(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 250 * MS, 13, 4 * MIB); /* 12 rises by 3 s */
	vi = classify(h, 3 * SEC + 100 * MS);
	assert_verdict(&vi, VERDICT_LEAK, "12 equal rises of 4.00 MiB");
	/* a snapshot whose clock was read before its last changes were drained */
	series__free(h->s);
	h = hist_new(1 * SEC);
	staircase(h, 100 * MS, 250 * MS, 13, 4 * MIB); /* the last at 3.1 s */
	vi = classify(h, 3050 * MS);
	assert_verdict(&vi, VERDICT_LEAK, "12 equal rises of 4.00 MiB");
	assert_near(vi.growth_bytes_per_s, 4.0 * MIB / 0.250, 0.01);
	assert_int_equal(vi.steps, 12);
	/* 7 rises are not yet enough */
	series__free(h->s);
	h = hist_new(1 * SEC);
	staircase(h, 0, 250 * MS, 8, 4 * MIB);
	vi = classify(h, 2 * SEC);
	assert_verdict(&vi, VERDICT_UNKNOWN, "needs 8.0 s");
	/* nor under 2 base widths of history */
	series__free(h->s);
	h = hist_new(1 * SEC);
	staircase(h, 0, 100 * MS, 19, 4 * MIB);
	vi = classify(h, 1999 * MS);
	assert_verdict(&vi, VERDICT_UNKNOWN, "needs 8.0 s");
	vi = classify(h, 2 * SEC);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	series__free(h->s);
}

/* the false positives an early verdict must not make */
static void test_early_warmup_is_not_leak(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	/* weights loaded layer by layer: a dozen rises of all sizes */
	for (int i = 0; i < 12; i++)
		alloc_at(h, i * 100 * MS, (uint64_t)(i % 4 + 1) * 3 * MIB + i * 257 * KIB);
	vi = classify(h, 1200 * MS + 50 * MS);
	assert_int_not_equal(vi.verdict, VERDICT_LEAK);
	series__free(h->s);
	/* equal steps that stopped: no verdict yet, not a leak */
	h = hist_new(500 * MS);
	staircase(h, 0, 100 * MS, 13, MIB);
	vi = classify(h, 1200 * MS + 250 * MS);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	vi = classify(h, 1200 * MS + 300 * MS);
	assert_verdict(&vi, VERDICT_UNKNOWN, "needs 4.0 s");
	series__free(h->s);
	/* heavy churn that gives everything back, early */
	h = hist_new(1 * SEC);
	alloc_at(h, 0, MIB);
	churn_leak(h, 1 * MS, 3 * SEC, 0);
	vi = classify(h, 3 * SEC);
	assert_int_not_equal(vi.verdict, VERDICT_LEAK);
	series__free(h->s);
	/* steps at the start, then a long stretch of nothing inside a short window */
	h = hist_new(1 * SEC);
	staircase(h, 0, 20 * MS, 20, MIB);
	vi = classify(h, 3 * SEC);
	assert_int_not_equal(vi.verdict, VERDICT_LEAK);
	series__free(h->s);
}

/* a slow leak under churn, seen early: the floor's rises are equal */
static void test_early_churn_leak(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	churn_leak(h, 0, 3 * SEC, 64 * KIB);
	vi = classify(h, 3 * SEC);
	assert_verdict(&vi, VERDICT_LEAK, "equal rises of 64.00 KiB");
	assert_near(vi.growth_bytes_per_s, 64.0 * KIB / 0.020, 0.05);
	series__free(h->s);
}

/*
 * Steps every 100 ms from 0 to 5.9 s, then nothing. The floor is flat since
 * 5.9 s: steady once that lasts a quarter of the window (now >= 7.8667 s).
 */
static void test_plateau_boundary(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 60, MIB);
	vi = classify(h, 7866 * MS);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	vi = classify(h, 7867 * MS);
	assert_verdict(&vi, VERDICT_STEADY, "plateau at 60.00 MiB for the last 2.0 s");
	series__free(h->s);
}

/* and a plateau lasts at least 3 base widths, however short the window */
static void test_plateau_minimum(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 1 * SEC, 9, MIB); /* rises up to 8 s */
	vi = classify(h, 10999 * MS);	  /* flat 2.999 s: more than W / 4 but under 3 s */
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	vi = classify(h, 11 * SEC);
	assert_int_equal(vi.verdict, VERDICT_STEADY);
	series__free(h->s);
}

/* 3 rises are too few for a leak; 4 are enough */
static void test_min_steps_boundary(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 200 * MS, 4, MIB);
	vi = classify(h, 880 * MS);
	assert_verdict(&vi, VERDICT_UNKNOWN, "3 rises in 0.9 s: too few");
	assert_int_equal(vi.steps, 3);
	alloc_at(h, 800 * MS, MIB);
	vi = classify(h, 1000 * MS);
	assert_verdict(&vi, VERDICT_LEAK, "rose 4 times");
	series__free(h->s);
}

/*
 * A leak with an idle stretch in the middle (an evaluation phase): still a leak
 * while the floor rises through more than half of the window.
 */
static void test_idle_gap_in_a_leak(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 30, MIB);	   /* 0 .. 2.9 s */
	staircase(h, 6 * SEC, 100 * MS, 30, MIB); /* idle 3.1 s, then 6 .. 8.9 s */
	vi = classify(h, 9 * SEC);		   /* 3.1 of 9 s flat: 66% rising */
	assert_verdict(&vi, VERDICT_LEAK, "no plateau");
	assert_true(vi.growth_bytes_per_s > 5.0 * MIB);
	series__free(h->s);

	h = hist_new(100 * MS);
	staircase(h, 0, 100 * MS, 20, MIB);	    /* 0 .. 1.9 s */
	staircase(h, 7 * SEC, 100 * MS, 20, MIB); /* idle 5.1 s, then 7 .. 8.9 s */
	vi = classify(h, 9 * SEC);		    /* 5.1 of 9 s flat: 43% rising */
	assert_verdict(&vi, VERDICT_UNKNOWN, "rising for the last 2.0 s");
	series__free(h->s);
}

/* a leak that stopped (the process went idle) is a plateau, not a leak */
static void test_leak_then_idle_is_steady(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 30, MIB);
	vi = classify(h, 3 * SEC);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	vi = classify(h, 60 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "plateau at 30.00 MiB");
	series__free(h->s);
}

/* a pool that warmed up long ago and grew once more just now: not yet a verdict */
static void test_late_growth_after_plateau(void **state)
{
	struct hist *h = hist_new(1 * SEC);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 1 * SEC, 5, 20 * MIB);
	alloc_at(h, 100 * SEC, 20 * MIB);
	vi = classify(h, 101 * SEC);
	assert_verdict(&vi, VERDICT_UNKNOWN, "after 96.0 s flat at 100.00 MiB");
	vi = classify(h, 140 * SEC);
	assert_verdict(&vi, VERDICT_STEADY, "plateau at 120.00 MiB");
	series__free(h->s);
}

static void assert_invariants(const struct series *s, uint64_t min, uint64_t max, uint64_t last)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	assert_true(s->n >= 1 && s->n <= SERIES_POINTS);
	for (uint32_t i = 0; i < s->n; i++) {
		assert_int_equal(s->pts[i].t_ns % s->width_ns, 0);
		if (i)
			assert_true(s->pts[i].t_ns >= s->pts[i - 1].t_ns + s->width_ns);
		assert_true(s->pts[i].min <= s->pts[i].last && s->pts[i].last <= s->pts[i].max);
		lo = s->pts[i].min < lo ? s->pts[i].min : lo;
		hi = s->pts[i].max > hi ? s->pts[i].max : hi;
	}
	assert_int_equal(lo, min);
	assert_int_equal(hi, max);
	assert_int_equal(s->pts[s->n - 1].last, last);
}

/* hours of history in 64 buckets: the verdicts hold as the history gets coarser */
static void test_merging_keeps_verdicts(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 36000, 4 * KIB); /* an hour, 40 KiB/s */
	assert_invariants(h->s, 4 * KIB, 36000 * 4 * KIB, 36000 * 4 * KIB);
	assert_true(h->s->width_ns >= 3600 * SEC / SERIES_POINTS);
	assert_true(h->s->width_ns <= 2 * 3600 * SEC / (SERIES_POINTS / 2));
	vi = classify(h, 3600 * SEC);
	assert_verdict(&vi, VERDICT_LEAK, "no plateau");
	assert_near(vi.growth_bytes_per_s, 40.0 * KIB, 0.05);
	assert_int_equal(h->s->changes, 36000);
	series__free(h->s);

	h = hist_new(100 * MS);
	churn_leak(h, 0, 1200 * SEC, 0); /* 20 minutes of churn around a level */
	assert_invariants(h->s, 0, 32 * MIB, 0);
	vi = classify(h, 1200 * SEC);
	assert_int_equal(vi.verdict, VERDICT_STEADY);
	series__free(h->s);
}

/* sparse changes far apart: coarsening keeps gaps as gaps and times in order */
static void test_sparse_history_and_gaps(void **state)
{
	struct hist *h = hist_new(10 * MS);
	uint64_t t = 0;

	(void)state;
	for (int i = 0; i < 200; i++) {
		t += (i % 7 + 1) * 997 * MS;
		alloc_at(h, t, MIB);
		free_at(h, t + 3 * MS, MIB);
	}
	assert_invariants(h->s, 0, MIB, 0);
	assert_true(h->s->first_ns == 997 * MS);
	series__free(h->s);
}

/* times that go backwards count in the newest bucket; now before the newest change is ignored */
static void test_out_of_order_times(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 30, MIB);
	alloc_at(h, 1 * SEC, MIB);
	assert_int_equal(h->s->n, 30);
	assert_int_equal(h->s->pts[29].last, 31 * MIB);
	vi = classify(h, 1 * SEC);
	assert_int_equal(vi.verdict, VERDICT_LEAK);
	assert_near(vi.window_s, 2.9, 0.01);
	series__free(h->s);
}

/* exec: the books start over, the resolution stays */
static void test_reset(void **state)
{
	struct hist *h = hist_new(100 * MS);
	struct verdict_info vi;

	(void)state;
	staircase(h, 0, 100 * MS, 3000, MIB);
	assert_true(h->s->width_ns > 100 * MS);
	series__reset(h->s);
	assert_int_equal(h->s->n, 0);
	assert_int_equal(h->s->changes, 0);
	assert_int_equal(h->s->width_ns, 100 * MS);
	assert_int_equal(h->s->base_ns, 100 * MS);
	series__classify(h->s, 400 * SEC, &vi);
	assert_verdict(&vi, VERDICT_UNKNOWN, "no history");
	alloc_at(h, 400 * SEC, MIB);
	assert_int_equal(h->s->first_ns, 400 * SEC);
	series__reset(NULL);
	series__free(h->s);
}

/* the default width is 1 s */
static void test_default_width(void **state)
{
	struct series *s = series__new(0);

	(void)state;
	assert_non_null(s);
	assert_int_equal(s->width_ns, SEC);
	assert_int_equal(s->base_ns, SEC);
	series__add(NULL, 0, 1);
	series__free(s);
	series__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_history),
		cmocka_unit_test(test_staircase_is_leak),
		cmocka_unit_test(test_warmup_then_reuse_is_steady),
		cmocka_unit_test(test_warmup_level_is_the_last_value),
		cmocka_unit_test(test_warmup_then_churn_is_steady),
		cmocka_unit_test(test_release_and_reallocate_is_steady),
		cmocka_unit_test(test_release_and_reallocate_at_once_is_steady),
		cmocka_unit_test(test_held_once_is_steady),
		cmocka_unit_test(test_slow_leak_under_churn_is_leak),
		cmocka_unit_test(test_churn_without_leak_is_steady),
		cmocka_unit_test(test_min_window_boundary),
		cmocka_unit_test(test_early_staircase_is_leak),
		cmocka_unit_test(test_early_warmup_is_not_leak),
		cmocka_unit_test(test_early_churn_leak),
		cmocka_unit_test(test_plateau_boundary),
		cmocka_unit_test(test_plateau_minimum),
		cmocka_unit_test(test_min_steps_boundary),
		cmocka_unit_test(test_idle_gap_in_a_leak),
		cmocka_unit_test(test_leak_then_idle_is_steady),
		cmocka_unit_test(test_late_growth_after_plateau),
		cmocka_unit_test(test_merging_keeps_verdicts),
		cmocka_unit_test(test_sparse_history_and_gaps),
		cmocka_unit_test(test_out_of_order_times),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_default_width),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
