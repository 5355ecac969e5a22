/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * output.h - writing the report files a command line names.
 */
#ifndef GL_OUTPUT_H
#define GL_OUTPUT_H

#include <stdbool.h>
#include "model/opts.h"

struct snapshot;

/*
 * Writes the report files o names (--json, --folded, --svg, --pprof) from
 * snap. Returns 0, or the last -errno (each failure said on stderr).
 */
int output__write_files(const struct snapshot *snap, const struct gl_opts *o);
/* Whether one of those files is stdout (the text report is then left out). */
bool output__to_stdout(const struct gl_opts *o);

#endif /* GL_OUTPUT_H */
