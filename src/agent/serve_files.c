// SPDX-License-Identifier: BSD-2-Clause
/*
 * serve_files.c - what the agent keeps on disk and serves as files: the
 * state directory (the only place it writes: directories 0700, files 0600,
 * every path opened relative to the state directory's descriptor with
 * O_NOFOLLOW), heap profiles written there with rotation, the pprof
 * endpoint, and the GPUs' identities.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "gpu/sampler.h"
#include "session/session.h"
#include "model/snapshot.h"
#include "report/report.h"
#include "incidents.h"
#include "serve_int.h"
#include "util/clock.h"
#include "util/log.h"

#define PROFILE_PREFIX "gpu_heap-"
#define PROFILE_SUFFIX ".pb.gz"
#define TMP_PREFIX ".tmp-"

/* Opens dir (a directory, not a link) under at, creating it 0700 if absent. */
static int open_dir_at(int at, const char *dir)
{
	int fd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(at, dir, 0700) && errno != EEXIST)
			return -errno;
		fd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	return fd < 0 ? -errno : fd;
}

/* Walks rel (relative, no "..") component by component below at. Returns a fd or -errno. */
static int open_path_at(int at, const char *rel)
{
	char comp[256];
	int fd = dup(at);

	if (fd < 0)
		return -errno;
	while (*rel) {
		const char *slash = strchr(rel, '/');
		size_t n = slash ? (size_t)(slash - rel) : strlen(rel);
		int next;

		if (n >= sizeof(comp)) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, rel, n);
		comp[n] = '\0';
		rel += n + (slash != NULL);
		if (!n || !strcmp(comp, "."))
			continue;
		next = open_dir_at(fd, comp);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
	}
	return fd;
}

int agent__open_state(struct agent *a)
{
	const struct gl_opts *o = a->o;
	char path[PATH_MAX];
	const char *rel;
	size_t n;

	if (!o->state_dir)
		return EXIT_OK;
	a->state_fd = open_dir_at(AT_FDCWD, o->state_dir);
	if (a->state_fd < 0) {
		log_error(
			"cannot open --state-dir %s: %s (create it, owned by the user serve runs as, "
			"or name another)",
			o->state_dir, strerror(-a->state_fd));
		return EXIT_RUNTIME;
	}
	if (snprintf(path, sizeof(path), "%s/incidents", o->state_dir) < (int)sizeof(path)) {
		struct incidents_opts io = { .dir = path,
					     .max_count = o->incident_max,
					     .max_bytes = o->incident_max_bytes };

		a->incidents = incidents__open(&io);
		if (!a->incidents) {
			log_error("cannot keep incidents in %s: %s", path, strerror(errno));
			return EXIT_RUNTIME;
		}
	}
	if (!o->profile_dir)
		return EXIT_OK;
	rel = o->profile_dir;
	if (rel[0] == '/') {
		n = strlen(o->state_dir);
		while (n > 1 && o->state_dir[n - 1] == '/')
			n--;
		rel += n; /* cli.c checked it lies inside */
		while (*rel == '/')
			rel++;
	}
	a->profile_fd = open_path_at(a->state_fd, rel);
	if (a->profile_fd < 0) {
		log_error(
			"cannot open --profile-dir %s: %s (a directory inside --state-dir; create "
			"it or name another)",
			o->profile_dir, strerror(-a->profile_fd));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

void agent__close_state(struct agent *a)
{
	incidents__free(a->incidents);
	a->incidents = NULL;
	if (a->profile_fd >= 0)
		close(a->profile_fd);
	if (a->state_fd >= 0)
		close(a->state_fd);
	a->profile_fd = a->state_fd = -1;
}

/* The outstanding-bytes profile (inuse_space first) of snap, gzipped pprof. 0 or -errno. */
static int write_pprof(FILE *f, const struct snapshot *snap)
{
	struct pprof_opts po = { .default_sample = PPROF_INUSE_SPACE };
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	po.time_ns = rt.tv_sec * 1000000000ULL + rt.tv_nsec;
	return report__pprof(f, snap, &po);
}

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool is_profile(const char *name)
{
	size_t n = strlen(name), ps = sizeof(PROFILE_PREFIX) - 1, ss = sizeof(PROFILE_SUFFIX) - 1;

	return n > ps + ss && !strncmp(name, PROFILE_PREFIX, ps) &&
	       !strcmp(name + n - ss, PROFILE_SUFFIX);
}

/* Removes the oldest profiles beyond --profile-keep, and temporary files left by a crash. */
static void rotate(struct agent *a)
{
	int fd = dup(a->profile_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d); /* the duplicate shares its offset with profile_fd: from the start */
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1)) {
			unlinkat(a->profile_fd, de->d_name, 0);
			continue;
		}
		if (!is_profile(de->d_name))
			continue;
		if (n == cap) {
			char **more = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof(*names));

			if (!more)
				break;
			names = more;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (i + a->o->profile_keep < n && unlinkat(a->profile_fd, names[i], 0))
			log_warn("cannot remove old profile %s: %s", names[i], strerror(errno));
		free(names[i]);
	}
	free(names);
}

void agent__write_profile(struct agent *a)
{
	char name[96], tmp[128];
	struct snapshot *snap;
	struct timespec rt;
	FILE *f = NULL;
	int fd, err;

	clock_gettime(CLOCK_REALTIME, &rt);
	/* names sort by time: seconds since the epoch, zero-padded, then a sequence */
	snprintf(name, sizeof(name), PROFILE_PREFIX "%012llu-%06llu" PROFILE_SUFFIX,
		 (unsigned long long)rt.tv_sec, (unsigned long long)(a->profile_seq++ % 1000000));
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", name);
	snap = session__snapshot(a->s, 0, true);
	fd = snap ? openat(a->profile_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			   0600) :
		    -1;
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		err = snap ? -errno : -ENOMEM;
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	err = write_pprof(f, snap);
	if (fflush(f) || fsync(fileno(f)))
		err = err ?: -errno;
	if (fclose(f))
		err = err ?: -EIO;
	if (!err && renameat(a->profile_fd, tmp, a->profile_fd, name))
		err = -errno;
	if (err) {
		unlinkat(a->profile_fd, tmp, 0);
		goto fail;
	}
	snapshot__free(snap);
	a->h.profiles_written++;
	rotate(a);
	return;
fail:
	snapshot__free(snap);
	if (!a->h.profile_errors++)
		log_warn("cannot write a heap profile in %s: %s (profiles stop until it is "
			 "writable; free space or lower --profile-keep)",
			 a->o->profile_dir, strerror(-err));
}

int agent__reply_profile(struct agent *a, struct http_reply *rep)
{
	struct snapshot *snap;
	FILE *f;
	int err;

	snap = session__snapshot(a->s, 0, true);
	if (!snap)
		return 0;
	f = open_memstream(&rep->body, &rep->len);
	if (f) {
		err = write_pprof(f, snap);
		if (fclose(f))
			err = err ?: -EIO;
		if (!err) {
			rep->status = 200;
			rep->content_type = "application/octet-stream";
		}
	}
	snapshot__free(snap);
	return 0;
}

void agent__gpus_init(struct agent *a)
{
	if (!gpu_sampler__get(session__gpus(a->s)))
		log_debug("no NVML here: metrics carry GPU ordinals without UUIDs");
}

/*
 * The GPU a process uses, when that is certain: the process holds device
 * memory on one CUDA ordinal and NVML lists it on exactly one device, whose
 * position in the sample is its NVML index. CUDA ordinals are not NVML indices
 * (CUDA_VISIBLE_DEVICES, device order), so the ordinal alone never names a GPU.
 */
static struct metrics_gpu gpu_of(const struct nvml_sample *ns, const struct snap_proc *sp)
{
	struct metrics_gpu g = { .index = -1 };
	int ordinals = 0;

	for (int d = 0; d < 16; d++)
		ordinals += sp->dev_bytes[d] != 0;
	if (ordinals != 1)
		return g;
	for (uint32_t i = 0; i < ns->ndevices; i++) {
		for (uint32_t j = 0; j < ns->devs[i].nprocs; j++) {
			if (ns->devs[i].procs[j].pid != (uint32_t)sp->pid)
				continue;
			if (g.index >= 0)
				return (struct metrics_gpu){ .index = -1 };
			g.index = i;
			g.uuid = ns->devs[i].uuid;
		}
	}
	if (!g.uuid || !g.uuid[0])
		return (struct metrics_gpu){ .index = -1 };
	return g;
}

struct metrics_gpu *agent__gpus(struct agent *a, const struct snapshot *snap)
{
	const struct nvml_sample *ns = gpu_sampler__get(session__gpus(a->s));
	struct metrics_gpu *gpus;

	if (!ns)
		return NULL;
	gpus = calloc(snap->nprocs ? snap->nprocs : 1, sizeof(*gpus));
	for (uint32_t i = 0; gpus && i < snap->nprocs; i++)
		gpus[i] = gpu_of(ns, &snap->procs[i]);
	return gpus;
}
