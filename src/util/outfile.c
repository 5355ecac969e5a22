// SPDX-License-Identifier: BSD-2-Clause
/*
 * outfile.c - opening report files without following planted symlinks or
 * hard links, nor writing into another user's file; see outfile.h for the rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "outfile.h"

bool outfile__is_stdout(const char *path)
{
	return path && !strcmp(path, "-");
}

/* Checks what fd refers to: what may hold a report, of ours. Returns 0 or -errno. */
static int check_fd(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode))
		return 0;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
		return -EINVAL;
	if (st.st_uid != geteuid())
		return -EPERM;
	if (S_ISFIFO(st.st_mode))
		return 0;
	if (st.st_nlink > 1)
		return -EMLINK;
	if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600))
		return -errno;
	return 0;
}

/*
 * The rule of the kernel's fs.protected_symlinks, kept whatever the sysctl
 * says: a symbolic link among the parent directories of path that lies in a
 * sticky world-writable directory is followed only if it is ours or the
 * directory owner's. Returns 0, or -ENOLINK for such a link.
 */
static int check_parents(const char *path)
{
	char prefix[PATH_MAX];
	size_t len = strlen(path);
	struct stat st, dir;

	if (len >= sizeof(prefix))
		return -ENAMETOOLONG;
	for (size_t i = 1; i < len; i++) {
		char *slash;

		if (path[i] != '/')
			continue;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		if (lstat(prefix, &st) || !S_ISLNK(st.st_mode) || st.st_uid == geteuid())
			continue;
		/* the directory holding the link */
		slash = strrchr(prefix, '/');
		if (slash == prefix)
			snprintf(prefix, sizeof(prefix), "/");
		else if (slash)
			*slash = '\0';
		else
			snprintf(prefix, sizeof(prefix), ".");
		if (stat(prefix, &dir))
			continue;
		if ((dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH) && st.st_uid != dir.st_uid)
			return -ENOLINK;
	}
	return 0;
}

FILE *outfile__reserve(const char *path)
{
	FILE *f = NULL;
	int fd = -1, err;

	if (outfile__is_stdout(path))
		return stdout;
	err = check_parents(path);
	if (err)
		goto cleanup;
	/* O_NONBLOCK: a FIFO that nobody reads fails now (ENXIO) instead of blocking */
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	err = check_fd(fd);
	if (!err && fcntl(fd, F_SETFL, 0))
		err = -errno;
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

int outfile__begin(FILE *f)
{
	struct stat st;

	if (!f || f == stdout)
		return 0;
	if (fstat(fileno(f), &st))
		return -errno;
	if (S_ISREG(st.st_mode) && (fflush(f) || ftruncate(fileno(f), 0) || fseeko(f, 0, SEEK_SET)))
		return -errno;
	return 0;
}

FILE *outfile__open(const char *path)
{
	FILE *f = outfile__reserve(path);
	int err = outfile__begin(f);

	if (err) {
		outfile__close(f);
		errno = -err;
		return NULL;
	}
	return f;
}

bool outfile__same(FILE *a, FILE *b)
{
	struct stat sa, sb;

	if (!a || !b)
		return false;
	if (a == b)
		return true;
	if (fstat(fileno(a), &sa) || fstat(fileno(b), &sb))
		return false;
	/* a device (/dev/null) may take any number of reports */
	return !S_ISCHR(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

const char *outfile__strerror(int err)
{
	switch (err) {
	case ELOOP: return "it is a symbolic link (not followed)";
	case EMLINK: return "it has other hard links";
	case EPERM: return "it belongs to another user (remove it, or choose another path)";
	case ENOLINK:
		return "a parent directory is another user's symbolic link in a sticky "
		       "world-writable directory (not followed)";
	case ENXIO: return "it is a FIFO that no process reads (start the reader first)";
	case EINVAL: return "not a file that can hold a report";
	default: return strerror(err);
	}
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
