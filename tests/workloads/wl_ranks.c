// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_ranks.c - a 2-rank data-parallel job as torchrun starts one: a launcher
 * that uses no CUDA execs --nranks children with RANK, LOCAL_RANK and
 * WORLD_SIZE in their environment. Rank r runs on device r % 2, creates a
 * communicator with the NCCL stand-in (libnccl.so.2: cuMemCreate + cuMemMap
 * under ncclCommInitRank, called from ddp_setup) that it keeps, and a second one
 * that it destroys (NCCL's Retain -> Release -> Unmap -> Release), then runs
 * --iters steps that allocate and free at ddp_site_step; rank 1 also keeps a
 * --size buffer per step at ddp_site_leak (the marked line). Each rank writes
 * its truth to FILE.rankR (with "rank" and "nccl_bytes", what the kept
 * communicator holds) and waits for FILE.release; the launcher writes FILE
 * once both have, then honours --hold, then creates FILE.release.
 *
 * Options: --size BYTES (default 8 MiB), --iters N (8), --nranks N (2).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl.h"

typedef struct {
	char internal[128];
} ncclUniqueId;
typedef struct ncclComm *ncclComm_t;
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(ncclComm_t comm);
size_t nccl_standin_comm_bytes(void);

extern char **environ;

enum { S_STEP, S_LEAK, S_NCCL };

static struct wl_site sites[] = {
	[S_STEP] = { "ddp_site_step", FAKECUDA_DEVICE, 0, 0 },
	[S_LEAK] = { "ddp_site_leak", FAKECUDA_DEVICE, 0, 0 },
	[S_NCCL] = { "ncclCommInitRank", FAKECUDA_DEVICE, 0, 0 },
};

static inline __attribute__((always_inline)) CUdeviceptr alloc_at(int site, size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[site], size);
	return p;
}

WL_SITE CUdeviceptr ddp_site_step(size_t size)
{
	return alloc_at(S_STEP, size);
}

WL_SITE CUdeviceptr ddp_site_leak(size_t size)
{
	return alloc_at(S_LEAK, size); /* LEAK: rank 1 keeps a buffer per step */
}

/* init_process_group + the first collective: the communicator's creation stack. */
WL_FRAME static ncclComm_t ddp_setup(int nranks, int rank)
{
	ncclUniqueId id;
	ncclComm_t c = NULL;
	pid_t launcher = getppid();

	memset(&id, 0, sizeof(id));
	memcpy(id.internal, &launcher, sizeof(launcher));
	if (ncclCommInitRank(&c, nranks, id, rank))
		wl_die("ncclCommInitRank failed");
	return c;
}

static void wait_file(const char *path)
{
	for (int i = 0; i < 60000 && access(path, F_OK); i++)
		usleep(1000);
	if (access(path, F_OK))
		wl_die("%s did not appear within 60 s", path);
}

static void path_of(char *buf, size_t len, const char *truth, const char *suffix)
{
	int n = snprintf(buf, len, "%s.%s", truth, suffix);

	if (n < 0 || (size_t)n >= len)
		wl_die("path too long: %s", truth);
}

WL_FRAME static int rank_main(const struct wl_opts *o, int rank, int nranks)
{
	char path[4096], extra[128], suffix[16];
	ncclComm_t kept, gone;
	size_t comm = nccl_standin_comm_bytes();

	wl_cuda_start(rank % 2);
	fakecuda_mark();
	kept = ddp_setup(nranks, rank);
	wl_site_alloc(&sites[S_NCCL], comm);
	gone = ddp_setup(nranks, rank);
	wl_site_alloc(&sites[S_NCCL], comm);
	if (ncclCommDestroy(gone))
		wl_die("ncclCommDestroy failed");
	wl_site_free(&sites[S_NCCL], comm);
	for (unsigned long long i = 0; i < o->iters; i++) {
		CUdeviceptr p = ddp_site_step(o->size / 2);

		if (rank == 1)
			ddp_site_leak(o->size);
		wl_check(cuMemFree_v2(p), "cuMemFree_v2");
		wl_site_free(&sites[S_STEP], o->size / 2);
	}
	if (o->truth) {
		snprintf(extra, sizeof(extra), "\"rank\":%d,\"nccl_bytes\":%zu", rank, comm);
		snprintf(suffix, sizeof(suffix), "rank%d", rank);
		path_of(path, sizeof(path), o->truth, suffix);
		wl_write_truth(path, fakecuda_truth_json, sites, WL_NSITES(sites), extra);
		path_of(path, sizeof(path), o->truth, "release");
		wait_file(path);
	}
	(void)kept; /* held until exit, as a job's communicator is */
	return 0;
}

static char *env_entry(const char *name, int v)
{
	char buf[64];
	char *s;

	snprintf(buf, sizeof(buf), "%s=%d", name, v);
	s = strdup(buf);
	if (!s)
		wl_die("out of memory");
	return s;
}

/* Whether environment entry e sets one of the three names a rank is given. */
static bool rank_entry(const char *e)
{
	static const char *const names[] = { "RANK=", "LOCAL_RANK=", "WORLD_SIZE=" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(e, names[i], strlen(names[i])))
			return true;
	return false;
}

/*
 * fork + exec of rank r with the launcher's environment, RANK, LOCAL_RANK and
 * WORLD_SIZE after the rest of it, then the launcher's own entries of those
 * three names, if any: a name given twice, whose first entry (ours) is the one
 * the rank's getenv() returns.
 */
static pid_t start_rank(const struct wl_opts *o, int r, int nranks)
{
	char rank[16], size[32], iters[32], n[16], *args[16], **envp, self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	size_t ne = 0, own;
	int k = 0, fd;
	pid_t pid;

	if (sl <= 0)
		wl_die("readlink /proc/self/exe: %s", strerror(errno));
	self[sl] = '\0'; /* exec'd by name: the ranks' comm is the program's */

	while (environ[ne])
		ne++;
	envp = calloc(ne + 4, sizeof(*envp));
	if (!envp)
		wl_die("out of memory");
	ne = 0;
	for (char **e = environ; *e; e++)
		if (!rank_entry(*e))
			envp[ne++] = *e;
	own = ne;
	envp[ne++] = env_entry("RANK", r);
	envp[ne++] = env_entry("LOCAL_RANK", r);
	envp[ne++] = env_entry("WORLD_SIZE", nranks);
	for (char **e = environ; *e; e++)
		if (rank_entry(*e))
			envp[ne++] = *e;
	snprintf(rank, sizeof(rank), "%d", r);
	snprintf(n, sizeof(n), "%d", nranks);
	snprintf(size, sizeof(size), "%llu", o->size);
	snprintf(iters, sizeof(iters), "%llu", o->iters);
	args[k++] = (char *)wl_prog;
	args[k++] = "--child";
	args[k++] = "--rank";
	args[k++] = rank;
	args[k++] = "--nranks";
	args[k++] = n;
	args[k++] = "--size";
	args[k++] = size;
	args[k++] = "--iters";
	args[k++] = iters;
	if (o->truth) {
		args[k++] = "--truth";
		args[k++] = (char *)o->truth;
	}
	args[k] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		wl_die("fork: %s", strerror(errno));
	if (!pid) {
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		execve(self, args, envp);
		wl_die("execve %s: %s", self, strerror(errno));
	}
	for (size_t i = own; i < own + 3; i++)
		free(envp[i]);
	free(envp);
	return pid;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 8 * WL_MIB, .iters = 8 };
	int rank = (int)wl_take_num(&argc, argv, "--rank", 63, 0);
	int nranks = (int)wl_take_num(&argc, argv, "--nranks", 64, 2);
	pid_t pids[64];
	char path[4096];

	wl_parse(&o, argc, argv, WL_OPT_SIZE | WL_OPT_ITERS | WL_OPT_EXEC);
	if (nranks < 1)
		wl_die("--nranks must be 1 to 64");
	if (o.child)
		return rank_main(&o, rank, nranks);
	wl_ready(&o);
	for (int r = 0; r < nranks; r++)
		pids[r] = start_rank(&o, r, nranks);
	for (int r = 0; o.truth && r < nranks; r++) {
		char suffix[16];

		snprintf(suffix, sizeof(suffix), "rank%d", r);
		path_of(path, sizeof(path), o.truth, suffix);
		wait_file(path);
	}
	wl_finish(&o, fakecuda_truth_json, NULL, 0, "\"role\":\"launcher\"");
	if (o.truth) {
		int fd;

		path_of(path, sizeof(path), o.truth, "release");
		fd = open(path, O_WRONLY | O_CREAT, 0644);
		if (fd < 0)
			wl_die("%s: %s", path, strerror(errno));
		close(fd);
	}
	for (int r = 0; r < nranks; r++) {
		int status;

		if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			wl_die("rank %d failed (status 0x%x)", r, status);
	}
	return 0;
}
