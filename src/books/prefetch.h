/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * prefetch.h - processes' address maps read while they were alive, for the
 * records that arrive after they died: by PID, checked against the process's
 * start time when taken. At most PREFETCH_MAX are kept (all dropped past it).
 */
#ifndef GL_BOOKS_PREFETCH_H
#define GL_BOOKS_PREFETCH_H
#include <stdint.h>

struct modules;
struct addr_map;
struct prefetches;

struct prefetches *prefetches__new(void);
void prefetches__free(struct prefetches *p);
/* Reads process pid's address map now (nothing if it is gone), replacing any before. */
void prefetches__add(struct prefetches *p, struct modules *m, int pid);
/* The map read for the process (pid, start boot-time ns), handed over; or NULL. */
struct addr_map *prefetches__take(struct prefetches *p, int pid, uint64_t start_ns);

#endif /* GL_BOOKS_PREFETCH_H */
