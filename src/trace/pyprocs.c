// SPDX-License-Identifier: BSD-2-Clause
/*
 * pyprocs.c - writing the py_procs map (see pyprocs.h).
 */
#include <errno.h>
#include <bpf/bpf.h>
#include "gpuleak_abi.h"
#include "loader.h"
#include "pyprocs.h"

static int set(void *ctx, int pid, const struct gl_py_proc *walk)
{
	int fd = tracer__map_fd(ctx, "py_procs");
	int32_t key = pid;

	if (fd < 0)
		return fd;
	return bpf_map_update_elem(fd, &key, walk, BPF_ANY) ? -errno : 0;
}

static void clear(void *ctx, int pid)
{
	int fd = tracer__map_fd(ctx, "py_procs");
	int32_t key = pid;

	if (fd >= 0)
		bpf_map_delete_elem(fd, &key);
}

struct py_publisher pyprocs__publisher(struct tracer *t)
{
	return (struct py_publisher){ .set = set, .clear = clear, .ctx = t };
}
