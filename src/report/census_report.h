/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_report.h - writing a census (census/census.h) joined with the books
 * (census/join.h): `gpuleak census`, attach --census, serve's /census and the
 * incident bundles' census.txt and census.json.
 */
#ifndef GL_REPORT_CENSUS_H
#define GL_REPORT_CENSUS_H

#include <stdbool.h>
#include <stdio.h>
#include "census/census.h"
#include "census/join.h"
#include "census/pause.h"

/* One census as it is written. */
struct census_report {
	int pid;
	bool pause;
	struct census_caps caps;
	const struct census_books *books; /* NULL: gpuleak did not trace the process */
	struct census_joined joined;
};

/* The census as text into f: the head, the join with the books, each group and tensor. */
void report__census_text(FILE *f, const struct census_report *o, const struct census *c,
			 const struct census_pause *p);
/* The same as one JSON object (docs/census.md). */
void report__census_json(FILE *f, const struct census_report *o, const struct census *c,
			 const struct census_pause *p);

#endif /* GL_REPORT_CENSUS_H */
