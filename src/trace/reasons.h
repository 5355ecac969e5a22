/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reasons.h - why a process cannot be traced, said in one line on stderr.
 */
#ifndef GL_REASONS_H
#define GL_REASONS_H

#include <stdbool.h>

/*
 * Whether pid can be traced whatever it loads: false (said why) for gpuleak
 * itself, a kernel thread, a zombie.
 */
bool reasons__traceable(int pid);
/*
 * /proc/PID/maps was refused: says why. Returns -EACCES when gpuleak holds
 * CAP_SYS_PTRACE (the machine hides the process), else -EPERM (privileges).
 */
int reasons__maps_refused(int pid);

#endif /* GL_REASONS_H */
