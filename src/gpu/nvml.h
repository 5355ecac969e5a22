/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * nvml.h - NVIDIA's management library (NVML), loaded at run time with dlopen
 * when the machine has it (no build dependency): each device's memory and
 * UUID, and the device memory NVML says each process uses.
 *
 * Functions returning int return 0 or -errno: -ENOENT (no library, no such
 * device or process), -ENOSYS (the library lacks a function that is needed),
 * -EIO (an NVML call failed: nvml__error() names the call and NVML's reason),
 * -ETIMEDOUT, -ENOMEM.
 */
#ifndef GL_NVML_H
#define GL_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVML_MAX_DEVICES 32
#define NVML_MAX_PROCS 128 /* per device */
#define NVML_LIBRARY "libnvidia-ml.so.1"
#define NVML_UNKNOWN UINT64_MAX /* NVML could not tell (NVML_VALUE_NOT_AVAILABLE) */

struct nvml;

struct nvml_proc {
	uint32_t pid;
	uint64_t used; /* device memory in bytes, or NVML_UNKNOWN */
};

/* One device as NVML sees it. */
struct nvml_device {
	uint64_t total, free; /* bytes */
	char uuid[96];
	int procs_err;	      /* 0, or why procs is empty (-errno) */
	bool procs_truncated; /* more processes than NVML_MAX_PROCS */
	uint32_t nprocs;
	struct nvml_proc procs[NVML_MAX_PROCS];
};

/* Every device at one moment: a plain value (it crosses a pipe). */
struct nvml_sample {
	uint32_t ndevices;
	struct nvml_device devs[NVML_MAX_DEVICES];
};

/* NVML's structures, from its documented C ABI (nvmlMemory_t, nvmlProcessInfo_t). */
struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_process_info { /* the _v2 and _v3 process queries */
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id, compute_instance_id;
};

struct nvml_process_info_v1 { /* the unversioned process query */
	unsigned int pid;
	unsigned long long used_gpu_memory;
};

/*
 * The NVML functions used, with NVML's signatures (results are nvmlReturn_t,
 * devices nvmlDevice_t). nvml__open() fills it from the library, preferring
 * the newest version of each; the process queries and error_string may be NULL.
 */
struct nvml_api {
	int (*init)(void);					     /* nvmlInit_v2 */
	int (*shutdown)(void);					     /* nvmlShutdown */
	const char *(*error_string)(int result);		     /* nvmlErrorString */
	int (*device_count)(unsigned int *count);		     /* nvmlDeviceGetCount_v2 */
	int (*device_handle)(unsigned int index, void **device);     /* ...GetHandleByIndex_v2 */
	int (*device_memory)(void *device, struct nvml_memory *mem); /* ...GetMemoryInfo */
	int (*device_uuid)(void *device, char *uuid, unsigned int length); /* ...GetUUID */
	int (*procs_v3)(void *device, unsigned int *count, struct nvml_process_info *infos);
	int (*procs_v2)(void *device, unsigned int *count, struct nvml_process_info *infos);
	int (*procs_v1)(void *device, unsigned int *count, struct nvml_process_info_v1 *infos);
};

/*
 * Loads path (NULL: libnvidia-ml.so.1) and initializes NVML. NULL with errno:
 * ENOENT (no library), ENOSYS (a required function is missing), EIO (nvmlInit
 * failed). The caller owns the result (nvml__close).
 */
struct nvml *nvml__open(const char *path);
/* The same over functions the caller provides (tests); api is copied. */
struct nvml *nvml__open_api(const struct nvml_api *api);
/* Shuts NVML down and unloads the library. n may be NULL. */
void nvml__close(struct nvml *n);
/* The last NVML failure ("nvmlDeviceGetUUID: Not Supported"), "" if none; owned by n. */
const char *nvml__error(const struct nvml *n);

int nvml__device_count(struct nvml *n, uint32_t *count);
int nvml__device_memory(struct nvml *n, uint32_t idx, uint64_t *total, uint64_t *free);
/* The UUID ("GPU-...") into buf; -ENOSPC if it does not fit. */
int nvml__device_uuid(struct nvml *n, uint32_t idx, char *buf, size_t len);
/*
 * The processes running compute work on device idx: up to max into procs,
 * *count set to how many were stored; *truncated (may be NULL) says whether
 * there were more. Uses the newest process query the library has.
 */
int nvml__device_procs(struct nvml *n, uint32_t idx, struct nvml_proc *procs, uint32_t max,
		       uint32_t *count, bool *truncated);
/* Every device (up to NVML_MAX_DEVICES) into *out. */
int nvml__sample(struct nvml *n, struct nvml_sample *out);

/*
 * What a sample says about a process: *used, the device memory NVML counts
 * for pid over all devices (NVML_UNKNOWN if NVML does not list it or cannot
 * tell), and *headroom, the free memory of the devices it uses (of the only
 * device if it is not listed; NVML_UNKNOWN if that does not say).
 */
void nvml_sample__proc(const struct nvml_sample *s, int pid, uint64_t *used, uint64_t *headroom);
/*
 * One device (NVML's index) of a sample: what pid uses on it (NVML_UNKNOWN when
 * not listed or not told), and what the other processes listed on it use
 * (those NVML could not tell left out). Returns false if there is no such device.
 */
bool nvml_sample__proc_on(const struct nvml_sample *s, int pid, uint32_t dev, uint64_t *used,
			  uint64_t *others);

#endif /* GL_NVML_H */
