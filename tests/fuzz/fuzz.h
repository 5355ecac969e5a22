/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fuzz.h - what the fuzz targets share: a private temporary directory made
 * once per process (a fake /proc, fuzzed files), removed at exit, and
 * writing an input into a file there.
 */
#ifndef GL_FUZZ_H
#define GL_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>
#include "util/log.h"

/* Short: procfs builds "ROOT/PID/maps" into 64 bytes. */
static char fuzz_dir[32];

static inline int fuzz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static inline void fuzz_cleanup(void)
{
	if (fuzz_dir[0])
		nftw(fuzz_dir, fuzz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Makes the temporary directory (exits on failure). */
static inline const char *fuzz_tmpdir(void)
{
	if (fuzz_dir[0])
		return fuzz_dir;
	snprintf(fuzz_dir, sizeof(fuzz_dir), "/tmp/glfz.XXXXXX");
	if (!mkdtemp(fuzz_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(fuzz_cleanup);
	return fuzz_dir;
}

/* Writes data[0..size) into path, replacing it (exits on failure). */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd)) {
		perror(path);
		exit(1);
	}
}

/* A NUL-terminated malloc'd copy of data (NULL when out of memory). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif /* GL_FUZZ_H */
