/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * outfile.h - opening the files gpuleak writes (reports, profiles, graphs).
 *
 * gpuleak runs as root and is often pointed at shared directories such as
 * /tmp, so a report path is opened without following a symlink at its last
 * component, a new file is created 0600, and an existing regular file is
 * written only if it has a single link (it is truncated after that check and
 * made 0600). Character devices and FIFOs (/dev/null, a pipe) are written as
 * they are. "-" is stdout.
 */
#ifndef GL_OUTFILE_H
#define GL_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Opens path for writing. Returns a stream the caller closes with
 * outfile__close(), or NULL with errno set: ELOOP for a symlink, EMLINK for a
 * file with other hard links, EISDIR or EINVAL for what cannot hold a report.
 */
FILE *outfile__open(const char *path);
/*
 * Flushes and closes a stream from outfile__open() (stdout is flushed, not
 * closed). Returns 0, or -EIO if anything written was lost. NULL is a no-op.
 */
int outfile__close(FILE *f);
/* Whether path names stdout ("-"). */
bool outfile__is_stdout(const char *path);

#endif /* GL_OUTFILE_H */
