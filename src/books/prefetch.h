/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * prefetch.h - what is known of a process before its books exist, for the
 * records that arrive after it died: its address map, name, namespace PID and
 * parent read while it was alive, and its parent and ranks as seen at the
 * mapping of a library. By PID, checked against the process's start time when
 * taken. At most PREFETCH_MAX of each are kept (all dropped past it).
 */
#ifndef GL_BOOKS_PREFETCH_H
#define GL_BOOKS_PREFETCH_H
#include <stdbool.h>
#include <stdint.h>

struct modules;
struct addr_map;
struct prefetches;
struct procs;
struct proc;
struct gl_proc;

struct prefetches *prefetches__new(void);
void prefetches__free(struct prefetches *p);
/*
 * Reads process pid's address map, name, namespace PID and parent now (nothing if
 * it is gone), replacing any before.
 */
void prefetches__add(struct prefetches *p, struct modules *m, int pid);
/*
 * The map read for proc (its pid and start time), handed over, or NULL; its name,
 * namespace PID and parent as read then, where proc has none (it is gone).
 */
struct addr_map *prefetches__take(struct prefetches *p, struct proc *proc);
/*
 * A library's mapping (GL_PROC_LIBLOAD record r) names its process's parent
 * and, with rank_env, its ranks: as BPF read them at the mapping, else from
 * /proc now (where proc_files). Into its books, or kept until they exist
 * (parent_of()).
 */
void prefetches__mapping_seen(struct prefetches *p, struct procs *procs, const struct gl_proc *r,
			      bool rank_env, bool proc_files);
/* A new process: the parent and ranks kept for it, where it has none. */
void prefetches__parent_of(struct prefetches *p, struct proc *proc);

#endif /* GL_BOOKS_PREFETCH_H */
