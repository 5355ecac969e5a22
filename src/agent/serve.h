/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * serve.h - `gpuleak serve`: the host-wide agent.
 */
#ifndef GL_SERVE_H
#define GL_SERVE_H

#include "model/opts.h"

/* Runs the agent until SIGTERM/SIGINT; returns the process exit status. */
int serve__run(const struct gl_opts *o);

#endif /* GL_SERVE_H */
