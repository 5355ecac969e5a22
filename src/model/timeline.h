/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * timeline.h - each process's outstanding bytes per memory class over time,
 * from every record the books apply (--perfetto): exact at every change, kept
 * at a resolution that coarsens (points merge) past a cap on the points kept.
 */
#ifndef GL_TIMELINE_H
#define GL_TIMELINE_H

#include <stdint.h>
#include "model/snapshot.h"

struct books;
struct timeline;

/* Follows b's records from now on (its hooks are chained). NULL with errno on failure. */
struct timeline *timeline__new(struct books *b, uint64_t resolution_ns, uint32_t max_points);
/* Gives b its hooks back. */
void timeline__free(struct timeline *t);
/* The points of process (pid, start_time) into *out (borrowed until the next record). */
void timeline__proc(struct timeline *t, int pid, uint64_t start_time, struct snap_timeline *out);

#endif /* GL_TIMELINE_H */
