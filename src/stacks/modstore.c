// SPDX-License-Identifier: BSD-2-Clause
/*
 * modstore.c - the build-id store: copying modules into it in a background
 * thread, and finding a recorded module's file by path or build-id.
 *
 * The store is reached through a directory descriptor and every file in it
 * with *at() calls that follow no symlink, so a store in a shared directory
 * cannot be turned into a write elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "modstore.h"
#include "modules.h"
#include "stacks.h"
#include "util/fmt.h"
#include "util/htab.h"
#include "util/log.h"

#define BID_MAX 64
#define COPY_BUF (1 << 20)

struct job {
	int fd;
	uint64_t size;
	char build_id[BID_MAX + 1];
	char path[256]; /* for messages */
};

struct modstore {
	int dfd;
	char *dir;
	uint64_t max, used;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *jobs; /* queue: [head, nr) */
	size_t head, nr, cap;
	bool closing;
	struct htab *queued; /* build-id hash -> (nothing) */
	uint8_t *seen;	     /* per module id */
	uint32_t nr_seen;
	uint32_t stacks_done;
	uint64_t kept, kept_bytes, failed, skipped_full;
};

/* The path of a build-id in a store: "xx/yyyy" plus suffix; false if it is too short. */
static bool store_name(const char *bid, const char *suffix, char *out, size_t len)
{
	size_t n = strlen(bid);

	if (n < 4 || n > BID_MAX || strspn(bid, "0123456789abcdef") != n)
		return false;
	return snprintf(out, len, "%.2s/%s%s", bid, bid + 2, suffix) < (int)len;
}

static uint64_t dir_usage(int dfd)
{
	uint64_t total = 0;
	struct dirent *de, *se;
	DIR *d = fdopendir(dup(dfd));

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		int sfd;
		DIR *sd;

		if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
			continue;
		sfd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		sd = sfd >= 0 ? fdopendir(sfd) : NULL;
		if (!sd) {
			if (sfd >= 0)
				close(sfd);
			continue;
		}
		while ((se = readdir(sd))) {
			struct stat st;

			if (!fstatat(sfd, se->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
			    S_ISREG(st.st_mode))
				total += st.st_size;
		}
		closedir(sd);
	}
	closedir(d);
	return total;
}

static int copy_data(int in, int out, uint64_t size)
{
	loff_t off = 0;
	char *buf = NULL;
	int err = 0;

	while ((uint64_t)off < size) {
		ssize_t n = copy_file_range(in, &off, out, NULL, size - off, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			continue;
		if (n == 0)
			return -EIO; /* the file shrank */
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		break;
	}
	if ((uint64_t)off >= size)
		return 0;
	buf = malloc(COPY_BUF);
	if (!buf)
		return -ENOMEM;
	while (!err && (uint64_t)off < size) {
		ssize_t n = pread(in, buf, COPY_BUF, off), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		while (!err && w < n) {
			ssize_t m = write(out, buf + w, n - w);

			if (m < 0 && errno != EINTR)
				err = -errno;
			else if (m > 0)
				w += m;
		}
		off += n;
	}
	free(buf);
	return err;
}

/* Copies one module into the store: DIR/xx/.yyyy.tmpPID, then renamed to DIR/xx/yyyy. */
static int copy_one(struct modstore *k, const struct job *j)
{
	char sub[3] = { j->build_id[0], j->build_id[1], 0 }, tmp[BID_MAX + 32];
	const char *name = j->build_id + 2;
	int sfd, out = -1, err = 0;

	if (mkdirat(k->dfd, sub, 0700) && errno != EEXIST)
		return -errno;
	sfd = openat(k->dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	if (snprintf(tmp, sizeof(tmp), ".%s.tmp%d", name, (int)getpid()) >= (int)sizeof(tmp)) {
		err = -ENAMETOOLONG;
		goto cleanup;
	}
	unlinkat(sfd, tmp, 0);
	out = openat(sfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		err = -errno;
		goto cleanup;
	}
	err = copy_data(j->fd, out, j->size);
	if (!err && close(out))
		err = -errno;
	out = -1;
	if (!err && renameat(sfd, tmp, sfd, name))
		err = -errno;
	if (err)
		unlinkat(sfd, tmp, 0);
cleanup:
	if (out >= 0)
		close(out);
	close(sfd);
	return err;
}

static void *copier(void *arg)
{
	struct modstore *k = arg;
	struct job j;
	int err;

	pthread_mutex_lock(&k->lock);
	for (;;) {
		while (k->head == k->nr && !k->closing)
			pthread_cond_wait(&k->cond, &k->lock);
		if (k->head == k->nr)
			break;
		j = k->jobs[k->head++];
		pthread_mutex_unlock(&k->lock);
		err = copy_one(k, &j);
		close(j.fd);
		if (err)
			log_warn(
				"could not keep %s in %s: %s (its frames in this recording will be "
				"symbolized from the host's copy, while one with the same build-id is there)",
				j.path, k->dir, strerror(-err));
		else
			log_debug("kept %s (build-id %s) in %s", j.path, j.build_id, k->dir);
		pthread_mutex_lock(&k->lock);
		if (err) {
			k->failed++;
			k->used -= j.size;
		} else {
			k->kept++;
			k->kept_bytes += j.size;
		}
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

struct modstore *modstore__new(const char *dir, uint64_t max_bytes)
{
	struct modstore *k = calloc(1, sizeof(*k));
	int err = -ENOMEM;

	if (!k)
		return NULL;
	k->dfd = -1;
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	k->dir = strdup(dir);
	k->queued = htab__new(sizeof(uint64_t), 1);
	if (!k->dir || !k->queued)
		goto fail;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	k->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->dfd < 0) {
		err = -errno;
		goto fail;
	}
	k->max = max_bytes;
	k->used = dir_usage(k->dfd);
	err = -pthread_create(&k->thread, NULL, copier, k);
	if (err)
		goto fail;
	k->thread_started = true;
	return k;
fail:
	modstore__free(k);
	errno = -err;
	return NULL;
}

void modstore__free(struct modstore *k)
{
	char b[32];

	if (!k)
		return;
	if (k->thread_started) {
		pthread_mutex_lock(&k->lock);
		k->closing = true;
		if (k->head < k->nr)
			log_info("keeping modules: copying %zu more into %s", k->nr - k->head,
				 k->dir);
		pthread_cond_signal(&k->cond);
		pthread_mutex_unlock(&k->lock);
		pthread_join(k->thread, NULL);
		if (k->kept)
			log_info("kept %llu module files (%s) in %s", (unsigned long long)k->kept,
				 fmt_bytes(k->kept_bytes, b, sizeof(b)), k->dir);
	}
	for (size_t i = k->head; i < k->nr; i++)
		close(k->jobs[i].fd);
	if (k->dfd >= 0)
		close(k->dfd);
	pthread_mutex_destroy(&k->lock);
	pthread_cond_destroy(&k->cond);
	htab__free(k->queued);
	free(k->jobs);
	free(k->seen);
	free(k->dir);
	free(k);
}

static bool mark_seen(struct modstore *k, uint32_t id)
{
	if (id >= k->nr_seen) {
		uint32_t n = id + 64;
		uint8_t *seen = realloc(k->seen, n);

		if (!seen)
			return false;
		memset(seen + k->nr_seen, 0, n - k->nr_seen);
		k->seen = seen;
		k->nr_seen = n;
	}
	if (k->seen[id])
		return false;
	k->seen[id] = 1;
	return true;
}

static int grow_queue(struct modstore *k)
{
	size_t cap = k->cap ? 2 * k->cap : 16;
	struct job *jobs = realloc(k->jobs, cap * sizeof(*jobs));

	if (!jobs)
		return -ENOMEM;
	k->jobs = jobs;
	k->cap = cap;
	return 0;
}

static void enqueue(struct modstore *k, const struct module_info *mi, uint64_t size)
{
	struct job j = { .size = size };
	char b1[32], b2[32];
	bool full;

	pthread_mutex_lock(&k->lock);
	full = k->used + size > k->max;
	if (full && !k->skipped_full++)
		log_warn(
			"the module store %s would pass --keep-modules-max (%s, %s used): %s "
			"and modules after it are not kept (raise --keep-modules-max, or report on this "
			"host while the libraries are still installed)",
			k->dir, fmt_bytes(k->max, b1, sizeof(b1)),
			fmt_bytes(k->used, b2, sizeof(b2)), mi->path);
	if (full || (k->nr == k->cap && grow_queue(k)))
		goto cleanup;
	j.fd = fcntl(mi->fd, F_DUPFD_CLOEXEC, 0);
	if (j.fd < 0)
		goto cleanup;
	snprintf(j.build_id, sizeof(j.build_id), "%s", mi->build_id);
	snprintf(j.path, sizeof(j.path), "%s", mi->path);
	k->jobs[k->nr++] = j;
	k->used += size;
	pthread_cond_signal(&k->cond);
cleanup:
	pthread_mutex_unlock(&k->lock);
}

static void consider(struct modstore *k, struct modules *m, uint32_t id)
{
	const struct module_info *mi;
	char name[BID_MAX + 16];
	struct stat st;
	uint64_t h;
	bool created;

	if (!mark_seen(k, id))
		return;
	mi = modules__info(m, id);
	if (!mi || mi->fd < 0)
		return;
	if (!store_name(mi->build_id, "", name, sizeof(name))) {
		log_debug("%s has no build-id: not kept", mi->path);
		return;
	}
	if (!fstatat(k->dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return; /* kept already */
	h = hash_bytes(mi->build_id, strlen(mi->build_id), 0);
	if (!htab__upsert(k->queued, &h, &created) || !created)
		return;
	if (fstat(mi->fd, &st) || !S_ISREG(st.st_mode))
		return;
	enqueue(k, mi, st.st_size);
}

void modstore__sync(struct modstore *k, struct stacks *s, struct modules *m)
{
	uint32_t count;

	if (!k)
		return;
	count = stacks__count(s);
	while (k->stacks_done < count) {
		uint32_t n;
		const struct frame *f = stacks__get(s, ++k->stacks_done, &n);

		for (uint32_t i = 0; i < n; i++)
			if (f[i].kind == FRAME_NATIVE)
				consider(k, m, f[i].mod);
	}
}

/* path opened if it is a regular file with the build-id (or, without one, the same file). */
static int try_open(const char *path, const char *bid, bool same_file, uint64_t dev, uint64_t ino)
{
	char got[BID_MAX + 1];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		goto reject;
	if (bid[0]) {
		modules__file_build_id(fd, got, sizeof(got));
		if (strcmp(got, bid))
			goto reject;
	} else if (!same_file || st.st_ino != ino ||
		   (((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev)) != dev) {
		goto reject;
	}
	return fd;
reject:
	close(fd);
	return -1;
}

int modstore__open_module(const char *path, const char *build_id, uint64_t dev, uint64_t ino,
			  const char *const *dirs, int ndirs, char *found, size_t len)
{
	static const char *const suffixes[] = { ".debug", "" };
	char name[BID_MAX + 16], full[4096 + BID_MAX + 32];
	int fd;

	if (path && path[0] == '/' && (fd = try_open(path, build_id, true, dev, ino)) >= 0) {
		if (found)
			snprintf(found, len, "%s", path);
		return fd;
	}
	for (int d = 0; d < ndirs; d++) {
		for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
			if (!store_name(build_id, suffixes[i], name, sizeof(name)) ||
			    snprintf(full, sizeof(full), "%s/%s", dirs[d], name) >=
				    (int)sizeof(full))
				continue;
			fd = try_open(full, build_id, false, 0, 0);
			if (fd >= 0) {
				if (found)
					snprintf(found, len, "%s", full);
				return fd;
			}
		}
	}
	return -ENOENT;
}
