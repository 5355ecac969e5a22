// SPDX-License-Identifier: BSD-2-Clause
/*
 * extent.c - free extents of segments minus blocks (interval arithmetic).
 */
#include <stdlib.h>
#include <string.h>
#include "extent.h"

static int cmp_start(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

static uint64_t end_of(const struct extent *e)
{
	return e->len > UINT64_MAX - e->start ? UINT64_MAX : e->start + e->len;
}

/* Merges overlapping (not merely adjacent) sorted extents in place; drops empty ones. */
static size_t merge(struct extent *e, size_t n, int adjacent)
{
	size_t out = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end;

		if (!e[i].len)
			continue;
		if (out) {
			struct extent *last = &e[out - 1];

			end = end_of(last);
			if (e[i].start < end || (adjacent && e[i].start == end)) {
				if (end_of(&e[i]) > end)
					last->len = end_of(&e[i]) - last->start;
				continue;
			}
		}
		e[out++] = e[i];
	}
	return out;
}

static void add_free(struct extent_stats *st, uint64_t len)
{
	if (!len)
		return;
	st->free_bytes += len;
	st->nr_free++;
	if (len > st->largest_free)
		st->largest_free = len;
}

void extents__subtract(struct extent *segs, size_t nsegs, struct extent *blocks, size_t nblocks,
		       struct extent_stats *st)
{
	size_t j = 0;

	memset(st, 0, sizeof(*st));
	if (nsegs)
		qsort(segs, nsegs, sizeof(*segs), cmp_start);
	if (nblocks)
		qsort(blocks, nblocks, sizeof(*blocks), cmp_start);
	nsegs = merge(segs, nsegs, 0);
	nblocks = merge(blocks, nblocks, 1);
	for (size_t i = 0; i < nsegs; i++) {
		uint64_t pos = segs[i].start, end = end_of(&segs[i]);

		st->segment_bytes += end - pos;
		/* blocks (or their parts) before this segment lie in no segment */
		for (; j < nblocks && end_of(&blocks[j]) <= pos; j++)
			st->outside_bytes += blocks[j].len;
		if (j < nblocks && blocks[j].start < pos) {
			st->outside_bytes += pos - blocks[j].start;
			blocks[j].len = end_of(&blocks[j]) - pos;
			blocks[j].start = pos;
		}
		for (; j < nblocks && blocks[j].start < end; j++) {
			uint64_t b_end = end_of(&blocks[j]);

			add_free(st, blocks[j].start - pos);
			if (b_end > end) { /* runs past the segment: the rest is for the next one */
				st->used_bytes += end - blocks[j].start;
				blocks[j].len = b_end - end;
				blocks[j].start = end;
				pos = end;
				break;
			}
			st->used_bytes += blocks[j].len;
			pos = b_end;
		}
		add_free(st, end - pos);
	}
	for (; j < nblocks; j++)
		st->outside_bytes += blocks[j].len;
}

double extents__fragmentation(const struct extent_stats *st)
{
	if (!st->free_bytes)
		return 0;
	return 1.0 - (double)st->largest_free / (double)st->free_bytes;
}
