/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * output.h - the report files a command line names, opened before tracing and
 * written from the final snapshot.
 */
#ifndef GL_OUTPUT_H
#define GL_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include "model/opts.h"
#include "report/formats.h"

struct snapshot;

/* The report files o names (report/formats.h), open from the start. */
struct output_files {
	FILE *f[REPORT_NR_FORMATS]; /* NULL where none is named */
	const char *path[REPORT_NR_FORMATS];
	bool created[REPORT_NR_FORMATS]; /* made now: removed if closed without a report */
};

/*
 * Opens and checks the report files o names without emptying them; the same
 * file named twice is refused. Returns 0, or -errno with every failure said
 * on stderr and nothing left open (nor created).
 */
int output__open_files(const struct gl_opts *o, struct output_files *rf);
/* Closes what was not written; files created by output__open_files() go. */
void output__close_files(struct output_files *rf);
/*
 * Writes snap into the open files and closes them. Returns 0, or the last
 * -errno (each failure said on stderr).
 */
int output__write_files(const struct snapshot *snap, struct output_files *rf);
/* Whether o names a report file. */
bool output__named(const struct gl_opts *o);
/* Whether one of those files is stdout (the text report is then left out). */
bool output__to_stdout(const struct gl_opts *o);

#endif /* GL_OUTPUT_H */
