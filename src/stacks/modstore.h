/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * modstore.h - module files keyed by build-id, so that frames recorded as
 * (module, file offset) can be named on another machine, later.
 *
 * Layout of a store (the one of /usr/lib/debug/.build-id): the module whose
 * build-id is the hex string xxyyyy... is DIR/xx/yyyy... (the file itself),
 * and separate debug information for it DIR/xx/yyyy....debug.
 *
 * Keeping (--keep-modules DIR): the modules that interned stacks use are
 * copied into a store by a background thread, each once, while the store
 * stays under a size cap; files appear whole (written under a temporary name,
 * then renamed) and 0600.
 */
#ifndef GL_MODSTORE_H
#define GL_MODSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct modstore;
struct modules;
struct stacks;

/*
 * A store at dir (created 0700 if missing) that may grow to max_bytes, the
 * files already in it counted. NULL with errno set (ENOTDIR, EACCES, ...).
 */
struct modstore *modstore__new(const char *dir, uint64_t max_bytes);
/*
 * Queues for copying the modules used by the stacks of s interned since the
 * last call (module files are read through m's descriptors, duplicated).
 * Modules without a build-id, already stored, or over the cap are skipped
 * (the cap is said once on stderr).
 */
void modstore__sync(struct modstore *k, struct stacks *s, struct modules *m);
/* Waits for the queued copies, says what was kept, frees. NULL is a no-op. */
void modstore__free(struct modstore *k);

/*
 * Opens the file of a recorded module for reading symbols: path if it is a
 * regular file with this build-id (with no build-id recorded: if it is the
 * same file, dev and inode as /proc/PID/maps gives them), else in each of
 * dirs[0..ndirs): DIR/xx/yyyy.debug, then DIR/xx/yyyy. Returns a descriptor
 * (the caller closes it) and the path used in found (may be NULL), or -ENOENT.
 */
int modstore__open_module(const char *path, const char *build_id, uint64_t dev, uint64_t ino,
			  const char *const *dirs, int ndirs, char *found, size_t len);

#endif /* GL_MODSTORE_H */
