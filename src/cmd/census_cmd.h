/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_cmd.h - `gpuleak census PID`: every live tensor of a running
 * PyTorch process and what holds it, read from outside (census/).
 */
#ifndef GL_CENSUS_CMD_H
#define GL_CENSUS_CMD_H

#include <stdbool.h>
#include <stdio.h>
#include "census/census.h"

struct census_books;
struct snap_census;

struct gl_opts;

/*
 * gpuleak census PID: the census as text on stdout and, with --json FILE, as
 * JSON in FILE ('-': JSON alone on stdout). Returns the exit status.
 */
int census_cmd__run(const struct gl_opts *o);
/* gpuleak serve, with the census its /census endpoint runs (census_cmd__one). */
int census_cmd__serve(const struct gl_opts *o);
/*
 * The census of pid as text into text and as JSON into json (either may be
 * NULL), paused unless told otherwise, within caps, each tensor joined with
 * books (census/join.h; NULL: gpuleak did not trace pid, and the output says
 * so); sum (may be NULL) gets its summary for the reports (snapshot__free()
 * frees its strings once it is a snapshot's). Returns an exit status
 * (model/opts.h).
 */
int census_cmd__one(int pid, FILE *text, FILE *json, bool pause, const struct census_caps *caps,
		    const struct census_books *books, struct snap_census *sum);
/* census_cmd__one without a summary: serve's /census. */
int census_cmd__joined(int pid, FILE *text, FILE *json, bool pause, const struct census_caps *caps,
		       const struct census_books *books);
/* The caps `gpuleak census` uses unless told otherwise. */
void census_cmd__default_caps(struct census_caps *caps);

#endif /* GL_CENSUS_CMD_H */
