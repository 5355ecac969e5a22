// SPDX-License-Identifier: BSD-2-Clause
/*
 * nvml.c - NVML through dlopen: symbol lookup with fallbacks to older
 * versions, one checked call per query, the growing buffer of the process
 * queries, and the child process that keeps the library out of gpuleak's own
 * address space.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvml.h"
#include "util/log.h"

/* nvmlReturn_t values used here */
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};

#define PROCS_ATTEMPTS 3 /* processes may start between NVML's count and its list */
#define PROCS_SLACK 8
#define QUERY_MISSING (-1) /* the library has no process query */
#define QUERY_NOMEM (-2)

struct nvml {
	void *lib; /* NULL when opened over the caller's functions */
	struct nvml_api api;
	char error[160];
};

static int failed(struct nvml *n, const char *call, int rc)
{
	const char *why = n->api.error_string ? n->api.error_string(rc) : NULL;
	int len;

	len = snprintf(n->error, sizeof(n->error), "%s: %s (%d)", call, why ? why : "error", rc);
	if (len < 0 || (size_t)len >= sizeof(n->error))
		snprintf(n->error, sizeof(n->error), "%s failed (%d)", call, rc);
	return -EIO;
}

const char *nvml__error(const struct nvml *n)
{
	return n ? n->error : "";
}

static struct nvml *open_with(const struct nvml_api *api, void *lib)
{
	struct nvml *n;
	int rc;

	if (!api->init || !api->shutdown || !api->device_count || !api->device_handle ||
	    !api->device_memory || !api->device_uuid) {
		errno = ENOSYS;
		return NULL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->api = *api;
	n->lib = lib;
	rc = api->init();
	if (rc != NVML_SUCCESS) {
		failed(n, "nvmlInit", rc);
		log_debug("NVML: %s", n->error);
		free(n);
		errno = EIO;
		return NULL;
	}
	return n;
}

struct nvml *nvml__open_api(const struct nvml_api *api)
{
	return open_with(api, NULL);
}

/* The newest of the names the library exports, or NULL. */
static void *lookup(void *lib, const char *name, const char *older)
{
	void *p = dlsym(lib, name);

	return p || !older ? p : dlsym(lib, older);
}

struct nvml *nvml__open(const char *path)
{
	struct nvml_api api = {};
	struct nvml *n;
	void *lib;
	int err;

	lib = dlopen(path ? path : NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		errno = ENOENT;
		return NULL;
	}
	*(void **)&api.init = lookup(lib, "nvmlInit_v2", "nvmlInit");
	*(void **)&api.shutdown = lookup(lib, "nvmlShutdown", NULL);
	*(void **)&api.error_string = lookup(lib, "nvmlErrorString", NULL);
	*(void **)&api.device_count = lookup(lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
	*(void **)&api.device_handle =
		lookup(lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	*(void **)&api.device_memory = lookup(lib, "nvmlDeviceGetMemoryInfo", NULL);
	*(void **)&api.device_uuid = lookup(lib, "nvmlDeviceGetUUID", NULL);
	*(void **)&api.procs_v3 = lookup(lib, "nvmlDeviceGetComputeRunningProcesses_v3", NULL);
	*(void **)&api.procs_v2 = lookup(lib, "nvmlDeviceGetComputeRunningProcesses_v2", NULL);
	*(void **)&api.procs_v1 = lookup(lib, "nvmlDeviceGetComputeRunningProcesses", NULL);
	n = open_with(&api, lib);
	if (!n) {
		err = errno;
		dlclose(lib);
		errno = err;
	}
	return n;
}

void nvml__close(struct nvml *n)
{
	if (!n)
		return;
	n->api.shutdown();
	if (n->lib)
		dlclose(n->lib);
	free(n);
}

int nvml__device_count(struct nvml *n, uint32_t *count)
{
	unsigned int c = 0;
	int rc = n->api.device_count(&c);

	if (rc != NVML_SUCCESS)
		return failed(n, "nvmlDeviceGetCount", rc);
	*count = c;
	return 0;
}

static int device(struct nvml *n, uint32_t idx, void **dev)
{
	int rc = n->api.device_handle(idx, dev);

	if (rc == NVML_ERROR_INVALID_ARGUMENT) {
		failed(n, "nvmlDeviceGetHandleByIndex", rc);
		return -ENOENT;
	}
	return rc == NVML_SUCCESS ? 0 : failed(n, "nvmlDeviceGetHandleByIndex", rc);
}

int nvml__device_memory(struct nvml *n, uint32_t idx, uint64_t *total, uint64_t *free)
{
	struct nvml_memory mem = {};
	void *dev;
	int err = device(n, idx, &dev), rc;

	if (err)
		return err;
	rc = n->api.device_memory(dev, &mem);
	if (rc != NVML_SUCCESS)
		return failed(n, "nvmlDeviceGetMemoryInfo", rc);
	*total = mem.total;
	*free = mem.free;
	return 0;
}

int nvml__device_uuid(struct nvml *n, uint32_t idx, char *buf, size_t len)
{
	char uuid[96] = "";
	void *dev;
	int err = device(n, idx, &dev), rc;

	if (err)
		return err;
	rc = n->api.device_uuid(dev, uuid, sizeof(uuid));
	if (rc != NVML_SUCCESS)
		return failed(n, "nvmlDeviceGetUUID", rc);
	uuid[sizeof(uuid) - 1] = '\0';
	if (strlen(uuid) >= len)
		return -ENOSPC;
	memcpy(buf, uuid, strlen(uuid) + 1);
	return 0;
}

static bool version_missing(int rc)
{
	return rc == NVML_ERROR_FUNCTION_NOT_FOUND || rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

/*
 * One process query with the newest function that works (a version the
 * driver refuses is not tried again). NVML's result, QUERY_MISSING or QUERY_NOMEM.
 */
static int query_procs(struct nvml *n, void *dev, unsigned int *count,
		       struct nvml_process_info *infos)
{
	unsigned int cap = *count;
	struct nvml_process_info_v1 *v1;
	int rc;

	if (n->api.procs_v3) {
		rc = n->api.procs_v3(dev, count, infos);
		if (!version_missing(rc))
			return rc;
		n->api.procs_v3 = NULL;
		*count = cap;
	}
	if (n->api.procs_v2) {
		rc = n->api.procs_v2(dev, count, infos);
		if (!version_missing(rc))
			return rc;
		n->api.procs_v2 = NULL;
		*count = cap;
	}
	if (!n->api.procs_v1)
		return QUERY_MISSING;
	v1 = calloc(cap, sizeof(*v1));
	if (!v1)
		return QUERY_NOMEM;
	rc = n->api.procs_v1(dev, count, v1);
	for (unsigned int i = 0; rc == NVML_SUCCESS && i < *count && i < cap; i++)
		infos[i] = (struct nvml_process_info){ v1[i].pid, v1[i].used_gpu_memory, 0, 0 };
	free(v1);
	return rc;
}

int nvml__device_procs(struct nvml *n, uint32_t idx, struct nvml_proc *procs, uint32_t max,
		       uint32_t *count, bool *truncated)
{
	struct nvml_process_info *infos = NULL;
	unsigned int cap = max ? max : 1, got = 0;
	int err, rc = NVML_ERROR_INSUFFICIENT_SIZE;
	void *dev;

	*count = 0;
	if (truncated)
		*truncated = false;
	err = device(n, idx, &dev);
	if (err)
		return err;
	for (int attempt = 0; attempt < PROCS_ATTEMPTS && rc == NVML_ERROR_INSUFFICIENT_SIZE;
	     attempt++) {
		free(infos);
		infos = calloc(cap, sizeof(*infos));
		if (!infos) {
			err = -ENOMEM;
			goto cleanup;
		}
		got = cap;
		rc = query_procs(n, dev, &got, infos);
		if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
			cap = (got > cap ? got : cap) + PROCS_SLACK;
	}
	if (rc == QUERY_MISSING) {
		snprintf(n->error, sizeof(n->error), "no nvmlDeviceGetComputeRunningProcesses");
		err = -ENOSYS;
	} else if (rc == QUERY_NOMEM) {
		err = -ENOMEM;
	} else if (rc != NVML_SUCCESS) {
		err = failed(n, "nvmlDeviceGetComputeRunningProcesses", rc);
	} else {
		if (got > cap)
			got = cap;
		for (unsigned int i = 0; i < got && i < max; i++)
			procs[i] = (struct nvml_proc){ infos[i].pid, infos[i].used_gpu_memory };
		*count = got < max ? got : max;
		if (truncated)
			*truncated = got > max;
	}
cleanup:
	free(infos);
	return err;
}

int nvml__sample(struct nvml *n, struct nvml_sample *out)
{
	uint32_t count = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = nvml__device_count(n, &count);
	if (err)
		return err;
	if (count > NVML_MAX_DEVICES)
		count = NVML_MAX_DEVICES;
	for (uint32_t i = 0; i < count; i++) {
		struct nvml_device *d = &out->devs[i];

		if (nvml__device_memory(n, i, &d->total, &d->free))
			d->total = d->free = NVML_UNKNOWN;
		if (nvml__device_uuid(n, i, d->uuid, sizeof(d->uuid)))
			d->uuid[0] = '\0';
		d->procs_err = nvml__device_procs(n, i, d->procs, NVML_MAX_PROCS, &d->nprocs,
						  &d->procs_truncated);
		out->ndevices++;
	}
	return 0;
}

void nvml_sample__proc(const struct nvml_sample *s, int pid, uint64_t *used, uint64_t *headroom)
{
	uint64_t sum = 0, room = 0;
	bool listed = false, used_known = true, room_known = true;

	for (uint32_t i = 0; i < s->ndevices && i < NVML_MAX_DEVICES; i++) {
		const struct nvml_device *d = &s->devs[i];

		for (uint32_t j = 0; j < d->nprocs && j < NVML_MAX_PROCS; j++) {
			if (d->procs[j].pid != (uint32_t)pid)
				continue;
			listed = true;
			if (d->procs[j].used == NVML_UNKNOWN)
				used_known = false;
			else
				sum += d->procs[j].used;
			if (d->free == NVML_UNKNOWN)
				room_known = false;
			else
				room += d->free;
			break;
		}
	}
	if (!listed) {
		room_known = s->ndevices == 1 && s->devs[0].free != NVML_UNKNOWN;
		room = room_known ? s->devs[0].free : 0;
	}
	*used = listed && used_known ? sum : NVML_UNKNOWN;
	*headroom = room_known ? room : NVML_UNKNOWN;
}

bool nvml_sample__proc_on(const struct nvml_sample *s, int pid, uint32_t dev, uint64_t *used,
			  uint64_t *others)
{
	const struct nvml_device *d;

	*used = NVML_UNKNOWN;
	*others = 0;
	if (dev >= s->ndevices || dev >= NVML_MAX_DEVICES)
		return false;
	d = &s->devs[dev];
	for (uint32_t j = 0; j < d->nprocs && j < NVML_MAX_PROCS; j++) {
		if (d->procs[j].pid == (uint32_t)pid)
			*used = d->procs[j].used;
		else if (d->procs[j].used != NVML_UNKNOWN)
			*others += d->procs[j].used;
	}
	return true;
}
