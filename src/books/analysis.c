// SPDX-License-Identifier: BSD-2-Clause
/*
 * analysis.c - bounded time series and leak verdicts.
 *
 * The series keeps at most SERIES_POINTS buckets. When it is full the width
 * doubles and buckets that fall in the same (aligned, twice as wide) slot
 * merge: old history is kept at a lower resolution, a time gap stays a gap,
 * and memory stays constant. Beside it, the newest rises of the floor at the
 * resolution of single changes (series.steps).
 *
 * Verdicts read the floor of the series: F(t), the least value outstanding
 * from t until now (suffix minima of the buckets). F never decreases; it rises
 * where memory was taken and has not been given back since. A leak is a floor
 * that keeps rising: several rises, spread over most of the window, the last
 * one recent. Memory released and re-allocated (caches, empty_cache()) takes
 * the value back to an old low, so F stays flat until the last release; a
 * warm-up leaves F flat after it; an allocation held forever never raises it.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"
#include "util/fmt.h"

/*
 * Thresholds. W is the window (first change to now), B the series' base width
 * (1 s unless --resolution says otherwise). They scale with W, so a pattern
 * gets the same verdict whether it is watched for 10 s or for 10 h.
 */
#define MIN_WINDOW_B 8	  /* no verdict on less than 8 B of history */
#define PLATEAU_MIN_B 3	  /* a plateau lasts at least 3 B ... */
#define PLATEAU_W_DIV 4	  /* ... and W / 4: a floor flat that long at the end is steady */
#define LEAK_MIN_STEPS 4  /* a leak's floor rises at least 4 times ... */
#define LEAK_COVER_PCT 50 /* ... and rises through more than half of W (W minus plateaus) */
/*
 * Before MIN_WINDOW_B, a staircase is judged by its steps: at least EARLY_STEPS
 * rises, three in four within EARLY_SIZE_PCT of the median rise (a leak keeps the
 * same thing every step; a warm-up loads layers of all sizes), spread over more
 * than half of W, the newest less than EARLY_GAP_X median intervals (or B /
 * EARLY_GAP_B_DIV, a busy machine's delay) ago, and at least EARLY_MIN_B of history.
 */
#define EARLY_STEPS 8
#define EARLY_SIZE_PCT 10
#define EARLY_GAP_X 3
#define EARLY_GAP_B_DIV 4
#define EARLY_MIN_B 2

#define DEFAULT_WIDTH_NS 1000000000ULL
#define MAX_WIDTH_NS (1ULL << 62)
#define NS_PER_S 1e9

struct series *series__new(uint64_t width_ns)
{
	struct series *s = calloc(1, sizeof(*s));

	if (s) {
		s->width_ns = width_ns ? width_ns : DEFAULT_WIDTH_NS;
		s->base_ns = s->width_ns;
	}
	return s;
}

void series__free(struct series *s)
{
	if (s) {
		free(s->pts);
		free(s->steps);
	}
	free(s);
}

void series__reset(struct series *s)
{
	if (s)
		*s = (struct series){ .base_ns = s->base_ns,
				      .width_ns = s->base_ns,
				      .cap = s->cap,
				      .pts = s->pts,
				      .cap_steps = s->cap_steps,
				      .steps = s->steps };
}

/* Room for one more element in an array of *cap (doubling up to max); false if it
 * cannot grow (at max, or out of memory). */
static bool grow(void **arr, uint32_t *cap, uint32_t max, size_t size)
{
	uint32_t want = *cap ? *cap * 2 : 2;
	void *p;

	if (*cap >= max)
		return false;
	if (want > max)
		want = max;
	p = realloc(*arr, want * size);
	if (!p)
		return false;
	*arr = p;
	*cap = want;
	return true;
}

static struct series_step *step_at(struct series *s, uint32_t i)
{
	return &s->steps[(s->step0 + i) % s->cap_steps];
}

static const struct series_step *step_of(const struct series *s, uint32_t i)
{
	return &s->steps[(s->step0 + i) % s->cap_steps];
}

/*
 * The floor's staircase after a change to `bytes`: rises above it were given
 * back; a new high is a rise (the oldest forgotten when the ring is full).
 */
static void add_step(struct series *s, uint64_t ts_ns, uint64_t bytes)
{
	while (s->nsteps && step_at(s, s->nsteps - 1)->bytes > bytes)
		s->nsteps--;
	if (!s->nsteps)
		s->stair_ns = ts_ns;
	if (s->nsteps && step_at(s, s->nsteps - 1)->bytes == bytes)
		return;
	if (s->nsteps == s->cap_steps &&
	    !grow((void **)&s->steps, &s->cap_steps, SERIES_STEPS, sizeof(*s->steps))) {
		if (!s->cap_steps)
			return; /* out of memory before the first: no staircase */
		if (s->cap_steps <
		    SERIES_STEPS) /* out of memory: the oldest goes (not a ring yet) */
			memmove(s->steps, s->steps + 1, --s->nsteps * sizeof(*s->steps));
		else {
			s->step0 = (s->step0 + 1) % SERIES_STEPS;
			s->nsteps--;
		}
	}
	*step_at(s, s->nsteps++) = (struct series_step){ ts_ns, bytes };
}

static void merge_into(struct series_point *a, const struct series_point *b)
{
	a->last = b->last;
	if (b->min < a->min)
		a->min = b->min;
	if (b->max > a->max)
		a->max = b->max;
}

/* Doubles the width until a bucket is free; buckets sharing a slot merge. */
static void coarsen(struct series *s)
{
	while (s->n >= SERIES_POINTS && s->width_ns < MAX_WIDTH_NS) {
		uint32_t j = 0;

		s->width_ns *= 2;
		for (uint32_t i = 0; i < s->n; i++) {
			struct series_point p = s->pts[i];

			p.t_ns -= p.t_ns % s->width_ns;
			if (j && s->pts[j - 1].t_ns == p.t_ns)
				merge_into(&s->pts[j - 1], &p);
			else
				s->pts[j++] = p;
		}
		s->n = j;
	}
}

void series__add(struct series *s, uint64_t ts_ns, uint64_t bytes)
{
	struct series_point *p, one = { .last = bytes, .min = bytes, .max = bytes };

	if (!s)
		return;
	if (!s->changes++)
		s->first_ns = ts_ns;
	if (s->n && ts_ns < s->pts[s->n - 1].t_ns)
		ts_ns = s->pts[s->n - 1].t_ns;
	add_step(s, ts_ns, bytes);
	if (s->n == SERIES_POINTS && ts_ns >= s->pts[s->n - 1].t_ns + s->width_ns)
		coarsen(s);
	if (s->n) {
		p = &s->pts[s->n - 1];
		if (ts_ns < p->t_ns + s->width_ns || s->n == SERIES_POINTS ||
		    (s->n == s->cap &&
		     !grow((void **)&s->pts, &s->cap, SERIES_POINTS, sizeof(*s->pts)))) {
			merge_into(p, &one); /* (out of memory: a coarser last bucket) */
			return;
		}
	} else if (!s->cap && !grow((void **)&s->pts, &s->cap, SERIES_POINTS, sizeof(*s->pts))) {
		return; /* out of memory: no history, the verdict stays unknown */
	}
	/* buckets start on multiples of the width, so merged buckets line up */
	one.t_ns = ts_ns - ts_ns % s->width_ns;
	s->pts[s->n++] = one;
}

const char *verdict__name(enum verdict v)
{
	switch (v) {
	case VERDICT_LEAK: return "leak";
	case VERDICT_STEADY: return "steady";
	default: return "unknown";
	}
}

/* What the floor did over the window. */
struct floor_scan {
	uint32_t rises;
	uint64_t last_rise;	/* time of the last rise; the first change if none */
	uint64_t plateau_ns;	/* time spent in plateaus (floor flat >= P) before last_rise */
	uint64_t plateau_end;	/* end of the latest such plateau */
	uint64_t plateau_level; /* the floor during it */
	uint64_t peak_before;	/* the highest value before it ended */
	uint64_t peak;		/* the highest value of all */
	uint64_t floor_first, floor_now;
};

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static void scan_floor(const struct series *s, uint64_t now, uint64_t plateau_min,
		       struct floor_scan *fs)
{
	uint64_t floor[SERIES_POINTS + 1], prev = s->first_ns, peak = 0;
	struct series_point pts[SERIES_POINTS + 1];
	uint32_t n = s->n;

	memset(fs, 0, sizeof(*fs));
	memcpy(pts, s->pts, n * sizeof(pts[0]));
	/* since the newest bucket ended the value has been its last one */
	if (now >= pts[n - 1].t_ns + s->width_ns) {
		uint64_t v = pts[n - 1].last;

		pts[n] = (struct series_point){ pts[n - 1].t_ns + s->width_ns, v, v, v };
		n++;
	}
	floor[n - 1] = pts[n - 1].min;
	for (uint32_t i = n - 1; i-- > 0;)
		floor[i] = min_u64(pts[i].min, floor[i + 1]);
	for (uint32_t i = 1; i < n; i++) {
		const struct series_point *before = &pts[i - 1];
		uint64_t t;

		peak = max_u64(peak, before->max);
		if (floor[i] <= floor[i - 1])
			continue;
		/* risen by the end of bucket i-1 if it ended above the new floor, else in i */
		t = before->last >= floor[i] ? before->t_ns + s->width_ns : pts[i].t_ns;
		t = t < prev ? prev : t > now ? now : t;
		if (t - prev >= plateau_min) {
			fs->plateau_ns += t - prev;
			fs->plateau_end = t;
			fs->plateau_level = floor[i - 1];
			fs->peak_before = peak;
		}
		fs->rises++;
		prev = t;
	}
	fs->peak = max_u64(peak, pts[n - 1].max);
	fs->last_rise = prev;
	fs->floor_first = floor[0];
	fs->floor_now = floor[n - 1];
}

/* The k-th smallest of a[0..n) (reorders a). */
static double kth_smallest(double *a, int n, int k)
{
	int lo = 0, hi = n - 1;

	while (lo < hi) {
		double pivot = a[lo + (hi - lo) / 2], tmp;
		int i = lo, j = hi;

		do {
			while (a[i] < pivot)
				i++;
			while (pivot < a[j])
				j--;
			if (i <= j) {
				tmp = a[i];
				a[i++] = a[j];
				a[j--] = tmp;
			}
		} while (i <= j);
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			break;
	}
	return a[k];
}

/* Theil-Sen slope of the bucket minima, bytes per second: robust to churn and outliers. */
static double floor_slope(const struct series *s)
{
	double slopes[SERIES_POINTS * (SERIES_POINTS - 1) / 2];
	int m = 0;

	for (uint32_t i = 0; i < s->n; i++) {
		for (uint32_t j = i + 1; j < s->n; j++) {
			double dt = (double)(s->pts[j].t_ns - s->pts[i].t_ns) / NS_PER_S;

			slopes[m++] = ((double)s->pts[j].min - (double)s->pts[i].min) / dt;
		}
	}
	return m ? kth_smallest(slopes, m, m / 2) : 0;
}

static const char *fmt_secs(double s, char *buf, size_t len)
{
	if (s < 100)
		snprintf(buf, len, "%.1f s", s);
	else if (s < 6000)
		snprintf(buf, len, "%.1f min", s / 60);
	else
		snprintf(buf, len, "%.1f h", s / 3600);
	return buf;
}

static void say(struct verdict_info *out, enum verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct verdict_info *out, enum verdict v, const char *fmt, ...)
{
	va_list ap;
	int n;

	out->verdict = v;
	va_start(ap, fmt);
	n = vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
	if (n < 0)
		out->why[0] = '\0';
	else if ((size_t)n >= sizeof(out->why))
		memcpy(out->why + sizeof(out->why) - 4, "...", 4);
}

/* Steady: the floor has been flat for the last P or more. */
static void say_flat(const struct series *s, const struct floor_scan *fs, uint64_t now,
		     uint64_t window, struct verdict_info *out)
{
	char b1[32], b2[32], t1[32], t2[32];

	fmt_secs((now - fs->last_rise) / NS_PER_S, t1, sizeof(t1));
	fmt_secs(window / NS_PER_S, t2, sizeof(t2));
	fmt_bytes(fs->floor_now, b1, sizeof(b1));
	if (fs->rises)
		say(out, VERDICT_STEADY, "plateau at %s for the last %s (of %s)", b1, t1, t2);
	else if (s->changes == 1)
		say(out, VERDICT_STEADY, "allocated once, held for %s", t2);
	else if (fs->peak > fs->floor_now)
		say(out, VERDICT_STEADY, "floor flat at %s for %s, up to %s above it", b1, t2,
		    fmt_bytes(fs->peak - fs->floor_now, b2, sizeof(b2)));
	else
		say(out, VERDICT_STEADY, "flat at %s for %s", b1, t2);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Before the history a verdict needs: a leak if the floor climbed in many
 * equal, recent steps (EARLY_*). Returns true when it said so in *out.
 */
static bool early_staircase(const struct series *s, uint64_t now, uint64_t window,
			    struct verdict_info *out)
{
	uint64_t rise[SERIES_STEPS], gap[SERIES_STEPS], med_rise, med_gap, first, last;
	uint32_t k = s->nsteps ? s->nsteps - 1 : 0, equal = 0;
	char b1[32], b2[32], t1[32];

	if (k < EARLY_STEPS || window < EARLY_MIN_B * s->base_ns)
		return false;
	for (uint32_t i = 0; i < k; i++) {
		rise[i] = step_of(s, i + 1)->bytes - step_of(s, i)->bytes;
		gap[i] = step_of(s, i + 1)->t_ns - step_of(s, i)->t_ns;
	}
	first = step_of(s, 1)->t_ns;
	last = step_of(s, k)->t_ns;
	/* a change recorded after the snapshot's clock was read counts as now */
	if (last > now)
		now = last;
	qsort(rise, k, sizeof(rise[0]), cmp_u64);
	qsort(gap, k, sizeof(gap[0]), cmp_u64);
	med_rise = rise[k / 2];
	med_gap = gap[k / 2];
	for (uint32_t i = 0; i < k; i++)
		equal += rise[i] * 100 >= med_rise * (100 - EARLY_SIZE_PCT) &&
			 rise[i] * 100 <= med_rise * (100 + EARLY_SIZE_PCT);
	if (first > s->stair_ns)
		first = s->stair_ns;
	if (equal * 4 < k * 3 || (now - first) * 100 <= window * LEAK_COVER_PCT ||
	    now - last >= max_u64(EARLY_GAP_X * med_gap, s->base_ns / EARLY_GAP_B_DIV))
		return false;
	out->steps = k;
	out->growth_bytes_per_s = (double)(step_of(s, k)->bytes - step_of(s, 0)->bytes) /
				  ((double)(last - step_of(s, 0)->t_ns) / NS_PER_S);
	fmt_bytes(u64_of(out->growth_bytes_per_s + 0.5), b1, sizeof(b1));
	say(out, VERDICT_LEAK, "+%s/s: %u equal rises of %s in %s, no plateau", b1, k,
	    fmt_bytes(med_rise, b2, sizeof(b2)), fmt_secs(out->window_s, t1, sizeof(t1)));
	return true;
}

void series__classify(const struct series *s, uint64_t now_ns, struct verdict_info *out)
{
	char b1[32], b2[32], t1[32], t2[32], t3[32];
	uint64_t window, plateau_min, covered;
	struct floor_scan fs;

	memset(out, 0, sizeof(*out));
	if (!s || !s->n) {
		say(out, VERDICT_UNKNOWN, "no history");
		return;
	}
	if (now_ns < s->pts[s->n - 1].t_ns)
		now_ns = s->pts[s->n - 1].t_ns;
	window = now_ns > s->first_ns ? now_ns - s->first_ns : 0;
	out->window_s = window / NS_PER_S;
	if (window < MIN_WINDOW_B * s->base_ns) {
		if (early_staircase(s, now_ns, window, out))
			return;
		say(out, VERDICT_UNKNOWN, "seen for %s; a verdict needs %s",
		    fmt_secs(out->window_s, t1, sizeof(t1)),
		    fmt_secs(MIN_WINDOW_B * s->base_ns / NS_PER_S, t2, sizeof(t2)));
		return;
	}
	plateau_min = max_u64(window / PLATEAU_W_DIV, PLATEAU_MIN_B * s->base_ns);
	scan_floor(s, now_ns, plateau_min, &fs);
	out->steps = fs.rises;
	if (now_ns - fs.last_rise >= plateau_min) {
		say_flat(s, &fs, now_ns, window, out);
		return;
	}
	covered = window - fs.plateau_ns;
	if (fs.rises >= LEAK_MIN_STEPS && covered * 100 > window * LEAK_COVER_PCT) {
		out->growth_bytes_per_s = floor_slope(s);
		if (out->growth_bytes_per_s <= 0)
			out->growth_bytes_per_s = (fs.floor_now - fs.floor_first) / out->window_s;
		fmt_bytes(u64_of(out->growth_bytes_per_s + 0.5), b1, sizeof(b1));
		say(out, VERDICT_LEAK, "+%s/s over %s, rose %u times, no plateau", b1,
		    fmt_secs(out->window_s, t1, sizeof(t1)), fs.rises);
		return;
	}
	fmt_bytes(fs.plateau_level, b1, sizeof(b1));
	if (fs.plateau_ns && fs.floor_now <= fs.peak_before) {
		say(out, VERDICT_STEADY,
		    "returns to %s and grows back to at most %s "
		    "(floor flat %s of %s)",
		    b1, fmt_bytes(fs.peak_before, b2, sizeof(b2)),
		    fmt_secs(fs.plateau_ns / NS_PER_S, t1, sizeof(t1)),
		    fmt_secs(out->window_s, t2, sizeof(t2)));
		return;
	}
	out->growth_bytes_per_s = floor_slope(s);
	if (fs.plateau_ns) {
		say(out, VERDICT_UNKNOWN, "rising for the last %s, after %s flat at %s",
		    fmt_secs((now_ns - fs.plateau_end) / NS_PER_S, t1, sizeof(t1)),
		    fmt_secs(fs.plateau_ns / NS_PER_S, t2, sizeof(t2)), b1);
	} else {
		say(out, VERDICT_UNKNOWN, "%u rise%s in %s: too few to tell", fs.rises,
		    fs.rises == 1 ? "" : "s", fmt_secs(out->window_s, t3, sizeof(t3)));
	}
}
