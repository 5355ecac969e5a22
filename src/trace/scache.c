// SPDX-License-Identifier: BSD-2-Clause
/*
 * scache.c - writing the stack_cache map (see scache.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <bpf/bpf.h>
#include "gpuleak_abi.h"
#include "loader.h"
#include "scache.h"

static int put(void *ctx, const struct gl_scache_key *k, const struct gl_scache_val *v)
{
	int fd = tracer__map_fd(ctx, "stack_cache");

	if (fd < 0)
		return fd;
	return bpf_map_update_elem(fd, k, v, BPF_ANY) ? -errno : 0;
}

/* Deletes pid's entries: the keys are collected first, as deleting moves the iteration. */
static void drop(void *ctx, int pid)
{
	int fd = tracer__map_fd(ctx, "stack_cache");
	struct gl_scache_key k, next, *mine = NULL;
	size_t nr = 0, cap = 0;
	void *prev = NULL;

	if (fd < 0)
		return;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		if ((int)next.tgid != pid)
			continue;
		if (nr == cap) {
			size_t c = cap ? 2 * cap : 64;
			struct gl_scache_key *m = realloc(mine, c * sizeof(*m));

			if (!m)
				break;
			mine = m;
			cap = c;
		}
		mine[nr++] = next;
	}
	for (size_t i = 0; i < nr; i++)
		bpf_map_delete_elem(fd, &mine[i]);
	free(mine);
}

struct scache_publisher scache__publisher(struct tracer *t)
{
	return (struct scache_publisher){ .put = put, .drop = drop, .ctx = t };
}
