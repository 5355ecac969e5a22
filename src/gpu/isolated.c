// SPDX-License-Identifier: BSD-2-Clause
/*
 * isolated.c - an NVML sample taken in a child process (see isolated.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "isolated.h"
#include "nvsmi.h"
#include "util/log.h"

/* What the child process sends before the sample. */
struct reply {
	int32_t err;
	char error[160];
};

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

static void __attribute__((noreturn))
run_child(int fd, const char *path, bool smi, struct nvml_sample *s)
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
		snprintf(r.error, sizeof(r.error), "%s", nvml__error(n));
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
