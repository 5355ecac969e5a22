// SPDX-License-Identifier: BSD-2-Clause
/*
 * scache.c - writing the stack_cache map (see scache.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "gpuleak_abi.h"
#include "loader.h"
#include "scache.h"

static int put(struct tracer *t, const char *map, const void *k, const void *v)
{
	int fd = tracer__map_fd(t, map);

	if (fd < 0)
		return fd;
	return bpf_map_update_elem(fd, k, v, BPF_ANY) ? -errno : 0;
}

static int put_shape(void *ctx, const struct gl_scache_key *k, const struct gl_scache_shape *s)
{
	return put(ctx, "stack_shapes", k, s);
}

static int put_stack(void *ctx, const struct gl_scache_vkey *k, const struct gl_scache_val *v)
{
	return put(ctx, "stack_cache", k, v);
}

static void del_stack(void *ctx, const struct gl_scache_vkey *k)
{
	int fd = tracer__map_fd(ctx, "stack_cache");

	if (fd >= 0)
		bpf_map_delete_elem(fd, k);
}

/*
 * Deletes pid's entries of map name, whose keys (key_size bytes) start with the
 * tgid: the keys are collected first, as deleting moves the iteration.
 */
static void drop_map(struct tracer *t, const char *name, size_t key_size, int pid)
{
	int fd = tracer__map_fd(t, name);
	unsigned char k[sizeof(struct gl_scache_key)], next[sizeof(k)], *mine = NULL;
	size_t nr = 0, cap = 0;
	void *prev = NULL;
	uint32_t tgid;

	if (fd < 0 || key_size > sizeof(k))
		return;
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(k, next, key_size);
		prev = k;
		memcpy(&tgid, next, sizeof(tgid));
		if ((int)tgid != pid)
			continue;
		if (nr == cap) {
			size_t c = cap ? 2 * cap : 64;
			unsigned char *m = realloc(mine, c * key_size);

			if (!m)
				break;
			mine = m;
			cap = c;
		}
		memcpy(mine + nr++ * key_size, next, key_size);
	}
	for (size_t i = 0; i < nr; i++)
		bpf_map_delete_elem(fd, mine + i * key_size);
	free(mine);
}

/* Deletes pid's entries: its shapes first, so that BPF stops finding its stacks. */
static void drop(void *ctx, int pid)
{
	drop_map(ctx, "stack_shapes", sizeof(struct gl_scache_key), pid);
	drop_map(ctx, "stack_cache", sizeof(struct gl_scache_vkey), pid);
}

struct scache_publisher scache__publisher(struct tracer *t)
{
	return (struct scache_publisher){ .put_shape = put_shape,
					  .put_stack = put_stack,
					  .del_stack = del_stack,
					  .drop = drop,
					  .ctx = t };
}
