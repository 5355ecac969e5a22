/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * offline.h - `gpuleak record` (trace, write a recording) and `gpuleak
 * report` (the reports of a recording, anywhere, later).
 */
#ifndef GL_OFFLINE_H
#define GL_OFFLINE_H

#include "cli.h"

/* Records what o names into o->record_path. Returns the process exit status. */
int record_cmd__run(const struct gl_opts *o);
/* Prints the reports of the recording o->record_path. Returns the process exit status. */
int report_cmd__run(const struct gl_opts *o);

#endif /* GL_OFFLINE_H */
