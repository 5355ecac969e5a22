/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analysis.h - outstanding bytes over time per (process, stack), in bounded
 * memory, and the leak verdict drawn from it.
 */
#ifndef GL_ANALYSIS_H
#define GL_ANALYSIS_H

#include <stdint.h>

#define SERIES_POINTS 64

enum verdict {
	VERDICT_UNKNOWN = 0,
	VERDICT_STEADY = 1,
	VERDICT_LEAK = 2,
};

/* One bucket of time: outstanding bytes at its end, and their range inside it. */
struct series_point {
	uint64_t t_ns; /* start of the bucket */
	uint64_t last, min, max;
};

struct series {
	uint64_t width_ns; /* bucket width; doubles when the series is full */
	uint32_t n;
	struct series_point pts[SERIES_POINTS];
};

struct verdict_info {
	enum verdict verdict;
	double growth_bytes_per_s; /* over the observation window */
	double window_s;
	uint32_t steps; /* rises of the staircase */
	char why[160];	/* one line for the report */
};

/* NULL with errno on failure. */
struct series *series__new(uint64_t width_ns);
void series__free(struct series *s);
/* Records that outstanding bytes became `bytes` at time ts_ns (monotonic, non-decreasing). */
void series__add(struct series *s, uint64_t ts_ns, uint64_t bytes);

/* Classifies a series observed until now_ns. s may be NULL (unknown). */
void series__classify(const struct series *s, uint64_t now_ns, struct verdict_info *out);

const char *verdict__name(enum verdict v);

#endif /* GL_ANALYSIS_H */
