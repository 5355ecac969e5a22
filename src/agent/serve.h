/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * serve.h - `gpuleak serve`: the host-wide agent.
 */
#ifndef GL_SERVE_H
#define GL_SERVE_H

#include <stdbool.h>
#include <stdio.h>
#include "model/opts.h"
#include "session/session.h"

struct census_caps;
struct census_books;

/*
 * The census of a process as JSON into json, paused when pause, joined with
 * books; returns an exit status (opts.h). The command layer hands it down
 * (cmd/census_cmd.c): serve's /census endpoint runs it.
 */
typedef int (*serve_census_fn)(int pid, FILE *text, FILE *json, bool pause,
			       const struct census_caps *caps, const struct census_books *books);

/* Runs the agent until SIGTERM/SIGINT; returns the process exit status. */
/* held: --census-on-oom's census of a process held at its failure (census_cmd__one). */
int serve__run(const struct gl_opts *o, serve_census_fn census, session_census_fn held);

#endif /* GL_SERVE_H */
