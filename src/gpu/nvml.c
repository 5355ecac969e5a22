// SPDX-License-Identifier: BSD-2-Clause
/*
 * nvml.c - NVML through dlopen: symbol lookup with fallbacks to older
 * versions, one checked call per query, the growing buffer of the process
 * queries, and the child process that keeps the library out of gpuleak's own
 * address space.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "util/log.h"
#include "nvml.h"
#include "nvsmi.h"

#define NVML_LIBRARY "libnvidia-ml.so.1"

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

/* What the child process sends before the sample. */
struct reply {
	int32_t err;
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
	*(void **)&api.device_handle = lookup(lib, "nvmlDeviceGetHandleByIndex_v2",
					      "nvmlDeviceGetHandleByIndex");
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

static int64_t ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* Reads len bytes before the deadline: 0, -ETIMEDOUT, -EIO (end of file), -errno. */
static int read_full(int fd, void *buf, size_t len, const struct timespec *deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t done = 0;

	while (done < len) {
		int64_t left = ms_left(deadline);
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		n = read(fd, (char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += n;
	}
	return 0;
}

/*
 * Set once NVML took the process that loaded it down (a static gpuleak cannot
 * load a library built for the host's C library: dlopen may crash rather than
 * fail): the nvidia-smi command answers from then on. A static build starts so.
 */
#ifdef GPULEAK_STATIC
static bool nvml_crashes = true;
#else
static bool nvml_crashes;
#endif

static void __attribute__((noreturn)) run_child(int fd, const char *path, bool smi,
						struct nvml_sample *s)
{
	struct reply r = {};
	struct nvml *n = smi ? NULL : nvml__open(path);

	if (smi) {
		r.err = nvsmi__sample(s);
		if (r.err)
			snprintf(r.error, sizeof(r.error), "nvidia-smi: %s", strerror(-r.err));
	} else if (!n) {
		int err = errno;
		const char *why = err == ENOENT ? dlerror() : NULL;

		/* a static gpuleak may not load the library: the nvidia-smi command may do */
		r.err = path ? -err : nvsmi__sample(s);
		if (r.err)
			snprintf(r.error, sizeof(r.error), "cannot use %s (%s), nor nvidia-smi",
				 path ? path : NVML_LIBRARY, why ? why : strerror(err));
	} else {
		r.err = nvml__sample(n, s);
		memcpy(r.error, n->error, sizeof(r.error));
		nvml__close(n);
	}
	if (write_full(fd, &r, sizeof(r)) == 0 && !r.err)
		write_full(fd, s, sizeof(*s));
	_exit(0);
}

static int sample_in_child(const char *path, bool smi, int timeout_ms, struct nvml_sample *out)
{
	struct timespec deadline;
	struct reply r = {};
	int fds[2] = { -1, -1 }, err;
	pid_t child = -1;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	child = fork();
	if (child < 0) {
		err = -errno;
		goto cleanup;
	}
	if (child == 0) {
		close(fds[0]);
		run_child(fds[1], path, smi, out);
	}
	close(fds[1]);
	fds[1] = -1;
	err = read_full(fds[0], &r, sizeof(r), &deadline);
	if (!err && r.err) {
		r.error[sizeof(r.error) - 1] = '\0';
		log_debug("NVML: %s", r.error);
		err = r.err;
	} else if (!err) {
		err = read_full(fds[0], out, sizeof(*out), &deadline);
	}
	if (err == -ETIMEDOUT)
		log_debug("NVML: no answer within %d ms", timeout_ms);
cleanup:
	if (child > 0) {
		if (err)
			kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return err;
}

int nvml__sample_isolated(const char *path, int timeout_ms, struct nvml_sample *out)
{
	int err;

	if (!path && nvml_crashes)
		return sample_in_child(NULL, true, timeout_ms, out);
	err = sample_in_child(path, false, timeout_ms, out);
	if (err == -EIO && !path) {
		/* the child died before it answered: NVML crashed it */
		log_debug("NVML: the library crashed the process that loaded it; nvidia-smi "
			  "answers instead");
		nvml_crashes = true;
		err = sample_in_child(NULL, true, timeout_ms, out);
	}
	return err;
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
