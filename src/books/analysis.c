// SPDX-License-Identifier: BSD-2-Clause
/*
 * analysis.c - bounded time series and leak verdicts.
 *
 * The series keeps at most SERIES_POINTS buckets; when full, neighbouring
 * buckets merge and the width doubles, so old history is kept at lower
 * resolution and memory stays constant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"

struct series *series__new(uint64_t width_ns)
{
	struct series *s = calloc(1, sizeof(*s));

	if (s)
		s->width_ns = width_ns ? width_ns : 1000000000ULL;
	return s;
}

void series__free(struct series *s)
{
	free(s);
}

static void merge_halves(struct series *s)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i + 1 < s->n; i += 2, j++) {
		struct series_point *a = &s->pts[i], *b = &s->pts[i + 1];

		s->pts[j] = (struct series_point){
			.t_ns = a->t_ns,
			.last = b->last,
			.min = a->min < b->min ? a->min : b->min,
			.max = a->max > b->max ? a->max : b->max,
		};
	}
	if (s->n % 2)
		s->pts[j++] = s->pts[s->n - 1];
	s->n = j;
	s->width_ns *= 2;
}

void series__add(struct series *s, uint64_t ts_ns, uint64_t bytes)
{
	struct series_point *p;

	if (!s)
		return;
	if (s->n) {
		p = &s->pts[s->n - 1];
		if (ts_ns < p->t_ns + s->width_ns) {
			p->last = bytes;
			if (bytes < p->min)
				p->min = bytes;
			if (bytes > p->max)
				p->max = bytes;
			return;
		}
	}
	if (s->n == SERIES_POINTS)
		merge_halves(s);
	p = &s->pts[s->n++];
	/* buckets start on multiples of the width, so merged buckets line up */
	*p = (struct series_point){ ts_ns - ts_ns % s->width_ns, bytes, bytes, bytes };
}

const char *verdict__name(enum verdict v)
{
	switch (v) {
	case VERDICT_LEAK: return "leak";
	case VERDICT_STEADY: return "steady";
	default: return "unknown";
	}
}

void series__classify(const struct series *s, uint64_t now_ns, struct verdict_info *out)
{
	memset(out, 0, sizeof(*out));
	out->verdict = VERDICT_UNKNOWN;
	(void)s;
	(void)now_ns;
	snprintf(out->why, sizeof(out->why), "no leak analysis yet");
}
