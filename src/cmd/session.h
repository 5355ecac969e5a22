/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session.h - one tracing session: attach to targets (or start one), collect
 * until they exit, the duration ends or a signal comes, then report.
 */
#ifndef GL_SESSION_H
#define GL_SESSION_H

#include "cli.h"

/* Runs the session described by o; returns the process exit status. */
int session__run(const struct gl_opts *o);

#endif /* GL_SESSION_H */
