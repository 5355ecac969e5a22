// SPDX-License-Identifier: BSD-2-Clause
/*
 * nvsmi.c - NVML's figures through the nvidia-smi command, for when the NVML
 * library cannot be loaded (a static gpuleak cannot dlopen a library built
 * for another C library). Parses its CSV query output: devices (index, UUID,
 * total and free memory) and compute processes (GPU UUID, PID, memory used).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "nvml.h"
#include "nvsmi.h"
#include "util/parse.h"

static const char *const nvsmi_paths[] = {
	"/usr/bin/nvidia-smi",
	"/usr/local/nvidia/bin/nvidia-smi",
	"/usr/local/bin/nvidia-smi",
	"/bin/nvidia-smi",
};

static const char *find_nvsmi(void)
{
	const char *env = getenv("GPULEAK_NVIDIA_SMI");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(nvsmi_paths) / sizeof(nvsmi_paths[0]); i++)
		if (access(nvsmi_paths[i], X_OK) == 0)
			return nvsmi_paths[i];
	return NULL;
}

/* Splits a CSV line into at most max fields, trimming spaces; returns the count. */
static int split(char *line, char **fields, int max)
{
	int n = 0;
	char *p = line, *save = NULL, *tok;

	line[strcspn(line, "\r\n")] = '\0';
	for (tok = strtok_r(p, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		for (char *e = tok + strlen(tok); e > tok && e[-1] == ' '; e--)
			e[-1] = '\0';
		fields[n++] = tok;
	}
	return n;
}

int nvsmi__parse_gpus(FILE *f, struct nvml_sample *s)
{
	char line[512], *fld[4];
	uint64_t idx, total, free_mib;

	s->ndevices = 0;
	while (fgets(line, sizeof(line), f)) {
		if (split(line, fld, 4) != 4 || parse_u64(fld[0], 0, NVML_MAX_DEVICES - 1, &idx) ||
		    parse_u64(fld[2], 0, UINT64_MAX >> 20, &total) ||
		    parse_u64(fld[3], 0, UINT64_MAX >> 20, &free_mib))
			continue;
		if (idx >= s->ndevices)
			s->ndevices = idx + 1;
		s->devs[idx].total = total << 20;
		s->devs[idx].free = free_mib << 20;
		snprintf(s->devs[idx].uuid, sizeof(s->devs[idx].uuid), "%s", fld[1]);
	}
	return s->ndevices ? 0 : -ENOENT;
}

int nvsmi__parse_apps(FILE *f, struct nvml_sample *s)
{
	char line[512], *fld[3];
	uint64_t pid, used;

	while (fgets(line, sizeof(line), f)) {
		if (split(line, fld, 3) != 3 || parse_u64(fld[1], 1, UINT32_MAX, &pid))
			continue;
		if (parse_u64(fld[2], 0, UINT64_MAX >> 20, &used))
			used = NVML_UNKNOWN; /* "[N/A]" */
		else
			used <<= 20;
		for (uint32_t d = 0; d < s->ndevices; d++) {
			struct nvml_device *dev = &s->devs[d];

			if (strcmp(dev->uuid, fld[0]))
				continue;
			if (dev->nprocs == NVML_MAX_PROCS) {
				dev->procs_truncated = true;
				break;
			}
			dev->procs[dev->nprocs++] = (struct nvml_proc){ (uint32_t)pid, used };
			break;
		}
	}
	return 0;
}

/* Runs nvidia-smi with a query (no shell between); parses its output with fn. */
static int query(const char *bin, const char *q, int (*fn)(FILE *, struct nvml_sample *),
		 struct nvml_sample *s)
{
	char *const argv[] = { (char *)bin, (char *)q, "--format=csv,noheader,nounits", NULL };
	int fds[2], status = 0, err;
	pid_t pid;
	FILE *f;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (dup2(fds[1], STDOUT_FILENO) < 0 || null < 0 || dup2(null, STDERR_FILENO) < 0 ||
		    dup2(null, STDIN_FILENO) < 0)
			_exit(127);
		execv(bin, argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f) {
		err = -errno;
		close(fds[0]);
		waitpid(pid, NULL, 0);
		return err;
	}
	err = fn(f, s);
	fclose(f);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		err = err ? err : -EIO;
	return err;
}

int nvsmi__sample(struct nvml_sample *s)
{
	const char *bin = find_nvsmi();
	int err;

	memset(s, 0, sizeof(*s));
	if (!bin)
		return -ENOENT;
	err = query(bin, "--query-gpu=index,uuid,memory.total,memory.free", nvsmi__parse_gpus, s);
	if (err)
		return err;
	err = query(bin, "--query-compute-apps=gpu_uuid,pid,used_memory", nvsmi__parse_apps, s);
	for (uint32_t d = 0; err && d < s->ndevices; d++)
		s->devs[d].procs_err = err;
	return 0;
}
