// SPDX-License-Identifier: BSD-2-Clause
/*
 * read.c - the census's one way to read the target's memory: through the
 * walk's reader callback, within the caps on bytes and time, which it counts
 * and reports in the census (truncated_by) when they bite.
 */
#include <errno.h>
#include "census_int.h"
#include "util/clock.h"

int census__rd(struct census_walk *w, uint64_t addr, void *buf, size_t len)
{
	struct census *c = w->out;
	ssize_t n;

	/* the object cap stops the walk, not the reading of the tensors found */
	if (w->stopped)
		return -E2BIG;
	if (c->bytes_read + len > w->caps->max_read_bytes) {
		c->truncated_by = "bytes read";
		w->stopped = true;
		return -E2BIG;
	}
	if ((++w->reads & 255) == 0 && now_ns() - w->start_ns > w->caps->max_ns) {
		c->truncated_by = "time";
		w->stopped = true;
		return -E2BIG;
	}
	if (!addr || addr + len < addr)
		return -EFAULT;
	c->bytes_read += len;
	n = w->m->read(w->m->ctx, addr, buf, len);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

int census__rd64(struct census_walk *w, uint64_t addr, uint64_t *v)
{
	return census__rd(w, addr, v, sizeof(*v));
}
