/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * attach.h - the attach and run commands.
 */
#ifndef GL_ATTACH_H
#define GL_ATTACH_H

#include "model/opts.h"

/* Runs the session described by o and reports; returns the process exit status. */
int session__run(const struct gl_opts *o);
struct incidents;
/* The flight recorder of o->incident_dir (NULL without one, or when it cannot be used:
 * said on stderr, errno set). */
struct incidents *attach__open_incidents(const struct gl_opts *o);

#endif /* GL_ATTACH_H */
