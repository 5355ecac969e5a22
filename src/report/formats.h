/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * formats.h - the report files a command line can ask for, one row each: the
 * option that names the file, its help (lines of at most 48 columns), a file
 * name for the examples and errors, what the engine must keep for it, and the
 * reporter that writes it. The option parser, each subcommand's help, the man
 * page, the completions and the writing of the files all read this table: a new
 * format is its reporter (a pure function of a snapshot) and its row.
 */
#ifndef GL_FORMATS_H
#define GL_FORMATS_H

#include <stdio.h>
#include "model/opts.h"
#include "model/snapshot.h"

/* X(ID, option, help, example file, needs (enum gl_need), writer) */
#define REPORT_FORMATS(X)                                                                      \
	X(JSON, "json", "write the final report as JSON ('-': stdout)", "report.json", 0,      \
	  format__json)                                                                        \
	X(FOLDED, "folded",                                                                    \
	  "write folded stacks of outstanding bytes\n"                                         \
	  "(flamegraph.pl, speedscope, inferno)",                                              \
	  "leaks.folded", 0, format__folded)                                                   \
	X(SVG, "svg",                                                                          \
	  "write an interactive flame graph of outstanding\n"                                  \
	  "bytes",                                                                             \
	  "leaks.svg", 0, format__svg)                                                         \
	X(PPROF, "pprof",                                                                      \
	  "write a gzipped pprof profile (inuse/alloc space\n"                                 \
	  "and objects: go tool pprof, Parca, Pyroscope)",                                     \
	  "heap.pb.gz", 0, format__pprof)                                                      \
	X(MEMORY_VIZ, "memory-viz",                                                            \
	  "write the PyTorch process's segments and blocks\n"                                  \
	  "as the pickle torch.cuda.memory._snapshot()\n"                                      \
	  "writes (pytorch.org/memory_viz)",                                                   \
	  "snapshot.pickle", GL_NEED_MEMORY_EVENTS | GL_NEED_KEEP_AT_EXIT, format__memory_viz) \
	X(PERFETTO, "perfetto",                                                                \
	  "write memory over time as a trace (JSON Trace\n"                                    \
	  "Event Format: ui.perfetto.dev, chrome://tracing)",                                  \
	  "memory.trace.json", GL_NEED_TIMELINE, format__perfetto)                             \
	X(HTML, "html",                                                                        \
	  "write one self-contained HTML page: memory over\n"                                  \
	  "time by allocation site, the flame graph of what\n"                                 \
	  "a time range picked on it allocated and still\n"                                    \
	  "holds, the leaks with hints, the failures",                                         \
	  "report.html", GL_NEED_HISTORIES | GL_NEED_KEEP_AT_EXIT, format__html)

enum report_format {
#define REPORT_FORMAT_ID(id, ...) REPORT_##id,
	REPORT_FORMATS(REPORT_FORMAT_ID)
#undef REPORT_FORMAT_ID
		REPORT_NR_FORMATS
};

/* The options' names, space-separated: a string literal, for the subcommands' lists. */
#define REPORT_FORMAT_NAME(id, option, ...) option " "
#define REPORT_FORMAT_OPTIONS REPORT_FORMATS(REPORT_FORMAT_NAME)

struct report_format_row {
	const char *option;
	const char *help;
	const char *example;
	unsigned int needs; /* enum gl_need */
	/* writes snap into f, which names path; 0 or -errno (its warnings said on stderr) */
	int (*write)(FILE *f, const struct snapshot *snap, const char *path);
};

extern const struct report_format_row report_formats[REPORT_NR_FORMATS];

#endif /* GL_FORMATS_H */
