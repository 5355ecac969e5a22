/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * report.h - reporters: pure functions from a snapshot to a stream.
 *
 * Each returns 0, or -EIO if writing failed.
 */
#ifndef GL_REPORT_H
#define GL_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include "snapshot.h"

struct text_opts {
	uint32_t max_stacks;  /* per process; 0 = all in the snapshot */
	uint32_t max_frames;  /* per stack; 0 = all */
	bool summary;	      /* one line per process, no stacks */
};

int report__text(FILE *f, const struct snapshot *s, const struct text_opts *o);
int report__json(FILE *f, const struct snapshot *s);
/* Whether a class appears in reports' stack lists (memory, not address space). */
bool report__is_memory_class(uint8_t cls);

#endif /* GL_REPORT_H */
