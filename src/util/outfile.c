// SPDX-License-Identifier: BSD-2-Clause
/*
 * outfile.c - opening report files without following planted symlinks or
 * hard links; see outfile.h for the rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "outfile.h"

bool outfile__is_stdout(const char *path)
{
	return path && !strcmp(path, "-");
}

/* Checks what fd refers to and prepares a regular file. Returns 0 or -errno. */
static int prepare(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		return 0;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_nlink > 1)
		return -EMLINK;
	if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600))
		return -errno;
	if (ftruncate(fd, 0))
		return -errno;
	return 0;
}

FILE *outfile__open(const char *path)
{
	FILE *f = NULL;
	int fd = -1, err;

	if (outfile__is_stdout(path))
		return stdout;
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	err = prepare(fd);
	if (err)
		goto cleanup;
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		goto cleanup;
	}
	fd = -1;
cleanup:
	if (fd >= 0)
		close(fd);
	if (!f)
		errno = -err;
	return f;
}

int outfile__close(FILE *f)
{
	int err = 0;

	if (!f)
		return 0;
	if (fflush(f) || ferror(f))
		err = -EIO;
	if (f != stdout && fclose(f))
		err = -EIO;
	return err;
}
