/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * holdbook.h - the book of holds every gpuleak on the host shares: a process
 * two gpuleaks hold goes on when both have attached, or at the deadline.
 */
#ifndef GL_HOLDBOOK_H
#define GL_HOLDBOOK_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>

/* The book another gpuleak pinned, if it is one this gpuleak can share: its fd,
 * or -errno (none, no BPF file system, another layout: said in the log). */
int holdbook__open_shared(void);

/* Pins this gpuleak's book for the others (a failure is logged: holds stay its own). */
void holdbook__share(int fd);

/* The other live gpuleaks holding pid (entries of gone ones, of an earlier process of
 * the PID, or held since before expired_before are taken out); one of them in *other. */
int holdbook__holders(int fd, __u32 pid, __u32 self, uint64_t expired_before, __u32 *other);

/* This gpuleak's hold of pid ends: SIGCONT unless another live gpuleak still holds it
 * (false then, that one's PID in *other). */
bool holdbook__let_go(int fd, __u32 pid, __u32 self, uint64_t expired_before, __u32 *other);

/* The guard's pass: other gpuleaks' holds past the deadline, or whose gpuleak is gone,
 * end; a process no live gpuleak holds any more goes on. */
void holdbook__sweep(int fd, __u32 self, uint64_t expired_before);

#endif /* GL_HOLDBOOK_H */
