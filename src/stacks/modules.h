/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * modules.h - the executable files mapped by traced processes, and each
 * process's address map, so that an instruction address becomes
 * (module, file offset): a process-independent frame that can be symbolized
 * later, even after the process is gone, and on another machine by build-id.
 */
#ifndef GL_MODULES_H
#define GL_MODULES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct modules;	 /* all modules seen, shared by every process */
struct addr_map; /* one process's executable mappings */

struct module_info {
	const char *path;     /* as the process saw it */
	const char *build_id; /* hex, "" if the file has none or could not be read */
	int fd;		      /* an open descriptor to the file, -1 if none */
	dev_t dev;
	ino_t ino;
};

/* NULL with errno on failure. */
struct modules *modules__new(void);
void modules__free(struct modules *m);
/* Module id (>= 1) -> info, or NULL. Reads the build-id on first call. */
const struct module_info *modules__info(struct modules *m, uint32_t id);
uint32_t modules__count(const struct modules *m);
/* Registers a module by identity (used by the recording reader); returns its id or 0. */
uint32_t modules__add(struct modules *m, dev_t dev, ino_t ino, const char *path,
		      const char *build_id);
/* The hex build-id of the ELF file open at fd into out ("" if none). */
void modules__file_build_id(int fd, char *out, size_t len);
/* Gives module id the open file fd to read it from (owned from now on). Returns 0 or -ENOENT. */
int modules__set_fd(struct modules *m, uint32_t id, int fd);

/*
 * Reads /proc/PID/maps. NULL with errno (ESRCH: the process is gone, or
 * exited and not yet reaped: no file is mapped executable).
 */
struct addr_map *addr_map__new(struct modules *m, int pid);
void addr_map__free(struct addr_map *am);
/*
 * Re-reads the maps (libraries loaded or unloaded). Returns 0 or -errno;
 * on -ESRCH (gone, or exited) the maps read before stay.
 */
int addr_map__refresh(struct addr_map *am);
/*
 * Resolves addr: returns the module id and stores the file offset, or 0 if no
 * file-backed executable mapping holds addr.
 */
uint32_t addr_map__resolve(const struct addr_map *am, uint64_t addr, uint64_t *file_off);
/* Calls cb for each file-backed executable mapping (for the unwinder). */
int addr_map__for_each(const struct addr_map *am,
		       int (*cb)(uint64_t start, uint64_t end, uint64_t off, uint32_t mod,
				 void *ctx),
		       void *ctx);
/* Generation counter: increases at every refresh that changed the map. */
uint64_t addr_map__generation(const struct addr_map *am);
/*
 * After an address was not found: re-reads the maps (a library was loaded)
 * unless the last such re-read was less than the backoff ago. The backoff is
 * 0 for a new map (the first miss re-reads at once), 10 ms after a re-read
 * that changed the map, and doubles up to 1 s while re-reads change nothing
 * (JIT code has no file). now is in ns on the caller's clock (record
 * timestamps). Returns whether the map changed; NULL am is a no-op.
 */
bool addr_map__refresh_after_miss(struct addr_map *am, uint64_t now);

#endif /* GL_MODULES_H */
