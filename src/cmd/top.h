/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * top.h - the live view.
 */
#ifndef GL_TOP_H
#define GL_TOP_H

#include "cli.h"

/* Runs `gpuleak top`; returns the process exit status. */
int top__run(const struct gl_opts *o);

#endif /* GL_TOP_H */
