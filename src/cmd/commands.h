/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * commands.h - the one table of subcommands and the one table of options.
 *
 * Everything a user reads about the command line comes from these two tables:
 * the parser (cli.c), `gpuleak help`, `gpuleak SUBCOMMAND --help`, the man page
 * and the shell completions (doc.c). Adding a subcommand adds one row to
 * cli_commands[]; adding an option adds one row to cli_options[], its name to
 * the subcommands that take it and its case to cli.c's parse_option().
 */
#ifndef GL_COMMANDS_H
#define GL_COMMANDS_H

#include <stdbool.h>
#include "cli.h"

/* The most options one subcommand takes (getopt's tables are that big). */
#define CLI_MAX_OPTIONS 64

/* Keys of options with no short letter: above every char. */
enum {
	/* a report file: OPT_FORMAT + its enum report_format (report/formats.h) */
	OPT_FORMAT = 256,
	OPT_STACKS = OPT_FORMAT + GL_MAX_FORMATS,
	OPT_STACK_BYTES,
	OPT_TOP,
	OPT_FRAMES,
	OPT_RINGBUF,
	OPT_MAX_ALLOCS,
	OPT_LIBCUDA,
	OPT_NO_FOLLOW,
	OPT_NO_PYTHON,
	OPT_TORCH,
	OPT_NO_TORCH,
	OPT_TORCH_STACKS,
	OPT_TENSORS,
	OPT_TENSOR_WINDOW,
	OPT_TENSOR_DUTY,
	OPT_TENSOR_SAMPLE,
	OPT_LISTEN,
	OPT_STATE_DIR,
	OPT_PROFILE_DIR,
	OPT_PROFILE_EVERY,
	OPT_PROFILE_KEEP,
	OPT_MAX_PROCS,
	OPT_MAX_HELD,
	OPT_HOLD_TIMEOUT,
	OPT_MAX_PY_PROCS,
	OPT_RESCAN,
	OPT_FULL_STACKS,
	OPT_MAX_STACKS,
	OPT_SORT,
	OPT_RESOLUTION,
	OPT_RANKS_ENV,
	OPT_IMBALANCE,
	OPT_INCIDENT_DIR,
	OPT_INCIDENT_MAX,
	OPT_INCIDENT_MAX_BYTES,
	OPT_CENSUS_ON_OOM,
	OPT_BENCH_FLOOR,
	OPT_NO_STACK_CACHE,
	OPT_BENCH_TORCH_LIB,
	OPT_MAX_SIZE,
	OPT_KEEP_MODULES,
	OPT_KEEP_MAX,
	OPT_DEBUG_DIR,
	OPT_FORCE,
	OPT_CENSUS,
	OPT_NO_PAUSE,
	OPT_MAX_OBJECTS,
	OPT_MAX_READ,
	OPT_MAX_TIME,
};

/* What a shell offers for an option's value or a subcommand's operands. */
enum cli_complete {
	COMPLETE_NONE = 0, /* free text: nothing offered */
	COMPLETE_FILE,
	COMPLETE_DIR,
	COMPLETE_PID,
	COMPLETE_WORDS,		  /* the words of .choices */
	COMPLETE_COMMAND,	  /* run: a command, then its arguments */
	COMPLETE_PIDS_OR_COMMAND, /* record: PIDs, or a command after '--' */
	COMPLETE_SUBCOMMAND,	  /* help: the names of the table's subcommands */
};

struct cli_option {
	const char *name;    /* long name, without "--" */
	int key;	     /* the short option's letter, else an OPT_* key */
	const char *arg;     /* the value's name in help ("T", "FILE"); NULL: a flag */
	const char *help;    /* what it does and its default; '\n' breaks the line in help */
	const char *example; /* a value it accepts, shown in its errors */
	enum cli_complete complete;
	const char *choices; /* COMPLETE_WORDS: the values, space-separated */
	bool hidden;	     /* in no help and no completion (bench/ only) */
};

/* A subcommand's own wording of an option's help. */
struct cli_opt_help {
	const char *name; /* the option's long name; NULL ends the list */
	const char *help; /* as cli_option.help */
};

struct cli_command {
	const char *name;
	enum gl_cmd cmd;	 /* what cli.c checks it by; CMD_NONE for none of its checks */
	const char *operands;	 /* after "[options]"; '\n' separates alternative forms */
	const char *summary;	 /* one line, in `gpuleak help` */
	const char *description; /* a paragraph for SUBCOMMAND --help and the man page */
	const char *options;	 /* long names of the options it takes, space-separated */
	const char *examples;	 /* "COMMAND LINE\tWHAT IT DOES\n" per example */
	/* options whose help says something else for this subcommand; NULL: none */
	const struct cli_opt_help *option_help;
	enum cli_complete operand;
	const char *choices;  /* operand COMPLETE_WORDS: the values */
	bool stop_at_operand; /* options end at the first operand (run: CMD's own options) */
	bool hidden;	      /* in no help and no completion */
	int (*run)(const struct gl_opts *o);
};

/* The man page's sections other than the per-command ones. */
struct cli_doc {
	const char *name_line;	 /* NAME: "gpuleak - ..." */
	const char *description; /* paragraphs separated by "\n\n" */
	const char *durations;	 /* how durations (T) are written */
	const char *sizes;	 /* how sizes (SIZE) are written */
	const char *overhead;
	const char *exit_status; /* "N\tmeaning\n" per status */
	const char *see_also;
};

extern const struct cli_option cli_options[];
extern const struct cli_command cli_commands[];
extern const struct cli_doc cli_doc;

/* Lookups; NULL if there is no such row. */
const struct cli_command *cli__command(const char *name);
const struct cli_command *cli__command_of(enum gl_cmd cmd);
const struct cli_option *cli__option(const char *long_name);
const struct cli_option *cli__option_of(int key);
/* Whether cmd takes the option named long_name. */
bool cli__takes(const struct cli_command *cmd, const char *long_name);
/* Whether cmd takes the option row op (by its .id, else its .name). */
bool cli__offers(const struct cli_command *cmd, const struct cli_option *op);

/* The printers of doc.c. Each returns 0, or -EIO if writing f failed. */
int doc__help(FILE *f);					     /* gpuleak help */
int doc__command_help(FILE *f, const struct cli_command *c); /* gpuleak CMD --help */
int doc__man(FILE *f);					     /* the man page, scdoc source */
int doc__bash(FILE *f);					     /* bash completion */
int doc__zsh(FILE *f);					     /* zsh completion */

/* Run functions of the subcommands that only print. */
int doc__run_help(const struct gl_opts *o);
int doc__run_version(const struct gl_opts *o);
int doc__run_completion(const struct gl_opts *o);
int doc__run_man(const struct gl_opts *o);

#endif /* GL_COMMANDS_H */
