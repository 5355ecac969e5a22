/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * extent.h - interval arithmetic over address ranges: what is left of a set of
 * segments once the blocks inside them are taken out (free extents), per
 * segment: a free extent never spans two segments, since no block can.
 */
#ifndef GL_EXTENT_H
#define GL_EXTENT_H

#include <stddef.h>
#include <stdint.h>

struct extent {
	uint64_t start, len;
};

struct extent_stats {
	uint64_t segment_bytes; /* the segments' union */
	uint64_t used_bytes;	/* the blocks' union inside segments */
	uint64_t free_bytes;	/* segments minus blocks: the sum of the free extents */
	uint64_t largest_free;	/* the largest free extent */
	uint64_t nr_free;	/* free extents */
	uint64_t outside_bytes; /* block bytes in no segment (segments not seen) */
};

/*
 * Takes the blocks out of the segments. Both arrays are sorted in place (by
 * start); overlapping segments are merged, overlapping blocks counted once,
 * zero-length entries ignored. Fills *st. Allocates nothing; never fails.
 */
void extents__subtract(struct extent *segs, size_t nsegs, struct extent *blocks, size_t nblocks,
		       struct extent_stats *st);

/*
 * Fragmentation of free space: 1 - largest / free (0 when nothing is free):
 * 0 when the free space is one extent, near 1 when it is split into many.
 */
double extents__fragmentation(const struct extent_stats *st);

#endif /* GL_EXTENT_H */
