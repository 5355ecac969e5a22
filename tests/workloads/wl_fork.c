// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_fork.c - a process that forks a child which allocates its own memory.
 *
 * The parent allocates two --size buffers at fork_site_parent, forks, waits for
 * the child, then allocates a quarter buffer at fork_site_parent_after. The
 * child owns none of its parent's device memory (the driver's memory is not
 * inherited): it calls cuInit again, marks, allocates three half buffers at
 * fork_site_child, frees one and writes its own truth to FILE.child. With
 * --exec the child first execs this program again (--child), so the child's
 * allocations come from a new image.
 *
 * Options: --size BYTES (default 1 MiB), --exec.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl.h"

enum { S_PARENT, S_PARENT_AFTER, S_CHILD };

static struct wl_site sites[] = {
	[S_PARENT] = { "fork_site_parent", FAKECUDA_DEVICE, 0, 0 },
	[S_PARENT_AFTER] = { "fork_site_parent_after", FAKECUDA_DEVICE, 0, 0 },
	[S_CHILD] = { "fork_site_child", FAKECUDA_DEVICE, 0, 0 },
};

static inline __attribute__((always_inline)) CUdeviceptr alloc_at(int site, size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[site], size);
	return p;
}

WL_SITE CUdeviceptr fork_site_parent(size_t size)
{
	return alloc_at(S_PARENT, size);
}

WL_SITE CUdeviceptr fork_site_parent_after(size_t size)
{
	return alloc_at(S_PARENT_AFTER, size);
}

WL_SITE CUdeviceptr fork_site_child(size_t size)
{
	return alloc_at(S_CHILD, size);
}

/* The child's whole life after fork (or exec): returns its exit status. */
WL_FRAME static int child_main(size_t size, const char *truth)
{
	wl_reset(sites, WL_NSITES(sites));
	wl_cuda_start(0);
	fakecuda_mark();
	fork_site_child(size / 2);
	fork_site_child(size / 2);
	wl_check(cuMemFree_v2(fork_site_child(size / 2)), "cuMemFree_v2");
	wl_site_free(&sites[S_CHILD], size / 2);
	if (truth)
		wl_write_truth(truth, fakecuda_truth_json, sites, WL_NSITES(sites),
			       "\"role\":\"child\"");
	return 0;
}

static void exec_child(const struct wl_opts *o, const char *truth)
{
	char size[32];
	char *args[8];
	int n;

	n = snprintf(size, sizeof(size), "%llu", o->size);
	if (n < 0 || (size_t)n >= sizeof(size))
		wl_die("size too long");
	n = 0;
	args[n++] = (char *)wl_prog;
	args[n++] = "--child";
	args[n++] = "--size";
	args[n++] = size;
	if (truth) {
		args[n++] = "--truth";
		args[n++] = (char *)truth;
	}
	args[n] = NULL;
	execv("/proc/self/exe", args);
	wl_die("execv /proc/self/exe: %s", strerror(errno));
}

WL_FRAME static void run_child(const struct wl_opts *o, const char *truth)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		wl_die("fork: %s", strerror(errno));
	if (!pid) {
		if (o->exec)
			exec_child(o, truth);
		_exit(child_main(o->size, truth));
	}
	if (waitpid(pid, &status, 0) != pid)
		wl_die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		wl_die("child %d failed (status 0x%x)", (int)pid, status);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };
	char child_truth[4096];
	int n;

	wl_parse(&o, argc, argv, WL_OPT_SIZE | WL_OPT_EXEC);
	if (o.size < 8)
		wl_die("--size must be at least 8");
	if (o.child)
		return child_main(o.size, o.truth);
	if (o.truth) {
		n = snprintf(child_truth, sizeof(child_truth), "%s.child", o.truth);
		if (n < 0 || (size_t)n >= sizeof(child_truth))
			wl_die("truth path too long: %s", o.truth);
	}
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	fork_site_parent(o.size);
	fork_site_parent(o.size);
	run_child(&o, o.truth ? child_truth : NULL);
	fork_site_parent_after(o.size / 4);
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), "\"role\":\"parent\"");
	return 0;
}
