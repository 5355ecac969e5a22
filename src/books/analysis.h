/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analysis.h - outstanding bytes over time per (process, stack), in bounded
 * memory, and the leak verdict drawn from it.
 */
#ifndef GL_ANALYSIS_H
#define GL_ANALYSIS_H

#include <stdint.h>

#define SERIES_POINTS 64
#define SERIES_STEPS 32

enum verdict {
	VERDICT_UNKNOWN = 0,
	VERDICT_STEADY = 1,
	VERDICT_LEAK = 2,
};

/*
 * One bucket of time, [t_ns, t_ns + width): outstanding bytes at its last
 * change, and their range inside it. Between buckets nothing changed.
 */
struct series_point {
	uint64_t t_ns; /* start of the bucket, a multiple of the width */
	uint64_t last, min, max;
};

/* A rise of the floor at one change: bytes held from t_ns on, none of them given back since. */
struct series_step {
	uint64_t t_ns, bytes;
};

/*
 * Its arrays grow as they fill, up to SERIES_POINTS and SERIES_STEPS: a stack that
 * allocated a few times (most of a short process's) takes ~0.2 KiB, not 2.6.
 */
struct series {
	uint64_t base_ns;  /* the first width: the finest resolution, unit of the thresholds */
	uint64_t width_ns; /* bucket width; doubles (buckets merge) when the series is full */
	uint64_t first_ns; /* first change */
	uint64_t changes;  /* calls to series__add */
	uint32_t n, cap;   /* buckets used, room in pts */
	struct series_point *pts;
	/*
	 * The floor's staircase at the resolution of single changes, the newest
	 * SERIES_STEPS rises (a ring from step0): rising bytes, each still held.
	 * A staircase of many equal steps is a leak before the series has the
	 * history a verdict otherwise needs.
	 */
	uint32_t step0, nsteps, cap_steps; /* a ring once cap_steps is SERIES_STEPS */
	uint64_t stair_ns; /* the base of the staircase: the oldest, before the ring forgot it */
	struct series_step *steps;
};

struct verdict_info {
	enum verdict verdict;
	double growth_bytes_per_s; /* of the floor over the window; 0 when steady */
	double window_s;	   /* from the first change to now */
	uint32_t steps;		   /* rises of the floor (at the series' resolution) */
	char why[160];		   /* one line for the report */
};

/* An empty series whose buckets start width_ns wide (0: 1 s). NULL with errno on failure. */
struct series *series__new(uint64_t width_ns);
void series__free(struct series *s);
/* Forgets the history (exec: the books start over), keeping the base width. s may be NULL. */
void series__reset(struct series *s);
/*
 * Records that outstanding bytes became `bytes` at time ts_ns. Times should not
 * decrease; one earlier than the newest bucket counts in that bucket. s may be NULL.
 */
void series__add(struct series *s, uint64_t ts_ns, uint64_t bytes);

/*
 * Classifies a series observed until now_ns (same clock as series__add; the
 * newest change if later): fills *out. s may be NULL (unknown). O(SERIES_POINTS^2)
 * at most, no allocation.
 */
void series__classify(const struct series *s, uint64_t now_ns, struct verdict_info *out);

/* "leak", "steady" or "unknown". */
const char *verdict__name(enum verdict v);

#endif /* GL_ANALYSIS_H */
