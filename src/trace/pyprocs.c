// SPDX-License-Identifier: BSD-2-Clause
/*
 * pyprocs.c - writing the py_procs map (see pyprocs.h).
 */
#include <errno.h>
#include <bpf/bpf.h>
#include "gpuleak_abi.h"
#include "loader.h"
#include "pyprocs.h"
#include "util/log.h"

static int set(void *ctx, int pid, const struct gl_py_proc *walk)
{
	int fd = tracer__map_fd(ctx, "py_procs");
	int32_t key = pid;

	if (fd < 0)
		return fd;
	if (!bpf_map_update_elem(fd, &key, walk, BPF_ANY))
		return 0;
	if (errno == E2BIG && tracer__note_py_refused(ctx) == 1)
		log_warn("the table of Python processes is full (%u, processes that use CUDA): PID "
			 "%d and the next ones get native stacks only, until processes exit; "
			 "counted in gpuleak_cap_hits_total{cap=\"python_procs\"}",
			 tracer__max_py_procs(ctx), pid);
	return -errno;
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
