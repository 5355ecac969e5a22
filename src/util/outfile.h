/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * outfile.h - opening the files gpuleak writes (reports, profiles, graphs).
 *
 * gpuleak runs as root and is often pointed at shared directories such as
 * /tmp, so a report path is opened without following a symlink at its last
 * component, a new file is created 0600, and an existing regular file is
 * written only if it is ours and has a single link (it is truncated after
 * those checks and made 0600). A FIFO must be ours and have a reader when it
 * is opened; character devices (/dev/null) are written as they are. A
 * symbolic link among the parent directories is followed unless it lies in a
 * sticky world-writable directory and belongs to neither us nor that
 * directory's owner (the rule of fs.protected_symlinks, whatever the sysctl).
 * "-" is stdout.
 */
#ifndef GL_OUTFILE_H
#define GL_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Opens path for writing and checks it, but leaves its contents alone until
 * outfile__begin(): a session opens its reports before it traces. Returns a
 * stream the caller closes with outfile__close(), or NULL with errno set:
 * ELOOP for a symlink, EMLINK for a file with other hard links, EPERM for
 * another user's file, ENOLINK for a planted parent link, ENXIO for a FIFO
 * without a reader, EISDIR or EINVAL for what cannot hold a report.
 */
FILE *outfile__reserve(const char *path);
/* Empties a regular file from outfile__reserve() before the report. Returns 0 or -errno. */
int outfile__begin(FILE *f);
/* outfile__reserve() and outfile__begin() at once. */
FILE *outfile__open(const char *path);
/* Whether two open reports are the same file (a character device never is). */
bool outfile__same(FILE *a, FILE *b);
/* Why opening failed, for errno values of outfile__reserve(), in words. */
const char *outfile__strerror(int err);
/*
 * Flushes and closes a stream from outfile__open() (stdout is flushed, not
 * closed). Returns 0, or -EIO if anything written was lost. NULL is a no-op.
 */
int outfile__close(FILE *f);
/* Whether path names stdout ("-"). */
bool outfile__is_stdout(const char *path);

#endif /* GL_OUTFILE_H */
