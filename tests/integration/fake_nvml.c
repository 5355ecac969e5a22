// SPDX-License-Identifier: BSD-2-Clause
/*
 * fake_nvml.c - a stand-in libnvidia-ml.so.1 for test_verdicts.py, which
 * compiles it. nvmlInit_v2 reads the file named by $FAKE_NVML_FILE:
 *   device TOTAL FREE UUID      one line per device, in index order
 *   proc DEVICE PID USED        a process using USED bytes of device DEVICE
 * Only the functions gpuleak calls exist; their signatures are NVML's. With
 * $FAKE_NVML_CRASH set, nvmlInit_v2 kills its process instead.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX 16

struct dev {
	unsigned long long total, free;
	char uuid[96];
	unsigned int nprocs;
	struct {
		unsigned int pid;
		unsigned long long used;
		unsigned int gi, ci;
	} procs[MAX];
};

static struct dev devs[MAX];
static unsigned int ndevs;

__attribute__((visibility("default"))) int nvmlInit_v2(void)
{
	const char *path = getenv("FAKE_NVML_FILE");
	unsigned long long a, b;
	unsigned int d, pid;
	char line[256], uuid[96];
	FILE *f;

	if (getenv("FAKE_NVML_CRASH"))
		kill(getpid(), SIGKILL); /* a library that takes its process down */
	f = path ? fopen(path, "r") : NULL;
	if (!f)
		return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
	ndevs = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "device %llu %llu %95s", &a, &b, uuid) == 3 && ndevs < MAX) {
			devs[ndevs] = (struct dev){ .total = a, .free = b };
			memcpy(devs[ndevs].uuid, uuid, sizeof(uuid));
			ndevs++;
		} else if (sscanf(line, "proc %u %u %llu", &d, &pid, &a) == 3 && d < ndevs &&
			   devs[d].nprocs < MAX) {
			devs[d].procs[devs[d].nprocs].pid = pid;
			devs[d].procs[devs[d].nprocs++].used = a;
		}
	}
	fclose(f);
	return 0;
}

__attribute__((visibility("default"))) int nvmlShutdown(void)
{
	return 0;
}

__attribute__((visibility("default"))) const char *nvmlErrorString(int rc)
{
	return rc ? "Fake NVML error" : "Success";
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int *count)
{
	*count = ndevs;
	return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int i,
									  void **dev)
{
	if (i >= ndevs)
		return 2;
	*dev = &devs[i];
	return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void *dev,
								    unsigned long long *mem)
{
	struct dev *d = dev;

	mem[0] = d->total;
	mem[1] = d->free;
	mem[2] = d->total - d->free;
	return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void *dev, char *uuid,
							      unsigned int len)
{
	snprintf(uuid, len, "%s", ((struct dev *)dev)->uuid);
	return 0;
}

__attribute__((visibility("default"))) int
nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, void *infos)
{
	struct dev *d = dev;

	if (*count < d->nprocs) {
		*count = d->nprocs;
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	}
	memcpy(infos, d->procs, d->nprocs * sizeof(d->procs[0]));
	*count = d->nprocs;
	return 0;
}
