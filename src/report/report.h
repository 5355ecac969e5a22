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

struct top_opts {
	bool sort_bytes;     /* stacks by outstanding bytes, else by growth */
	uint32_t max_stacks; /* 0 = all */
};

/* The live view's screen (without the escape sequences that clear it). */
int report__top(FILE *f, const struct snapshot *s, const struct top_opts *o);
/* The most telling frame of a stack: the first Python frame, else the first native
 * frame outside the CUDA stack's own libraries; NULL for an empty stack. */
const struct snap_frame *report__site_frame(const struct snap_stack *st);
/* That frame as one short line ("train.py:42 forward", "leak_site (app)"). */
void report__site(const struct snap_stack *st, char *buf, size_t len);
int report__json(FILE *f, const struct snapshot *s);
/* Whether a class appears in reports' stack lists (memory, not address space). */
bool report__is_memory_class(uint8_t cls);

#endif /* GL_REPORT_H */
