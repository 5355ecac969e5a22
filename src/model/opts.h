/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opts.h - what a run of gpuleak is asked to do: the options the command line
 * (cmd/cli.c) fills and every stage below reads, and the exit statuses.
 */
#ifndef GL_OPTS_H
#define GL_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

/* Exit statuses (documented in the README and in --help). */
enum {
	EXIT_OK = 0,
	EXIT_RUNTIME = 1,      /* the tracing could not be done: no such process, no libcuda, ... */
	EXIT_USAGE = 2,	       /* bad command line */
	EXIT_BADFILE = 3,      /* report: the file cannot be read as a gpuleak recording */
	EXIT_PRIV = 4,	       /* missing privileges (capabilities) */
	EXIT_CANNOT_RUN = 126, /* run: the command was found but cannot be run */
	EXIT_NOT_FOUND = 127,  /* run: there is no such command */
	EXIT_SIGNAL = 128,     /* run: 128 + the signal that killed the command */
};

enum gl_cmd {
	CMD_NONE = 0,
	CMD_ATTACH,
	CMD_RUN,
	CMD_SERVE,
	CMD_TOP,
	CMD_HELP,
	CMD_VERSION,
	CMD_RECORD,
	CMD_REPORT,
	CMD_COMPLETION,
	CMD_MAN,
	CMD_EXPLAIN, /* attach for a moment (--duration, 1 s), then where the memory is */
	CMD_CENSUS,  /* read the process's memory: what every live allocation holds */
};

/* top: the order of its lists. */
enum gl_sort {
	GL_SORT_GROWTH = 0,
	GL_SORT_BYTES,
	GL_SORT_NAME,
};

#define GL_MAX_DEBUG_DIRS 8

#define GL_MAX_PIDS 256
/* Report files a command line can name (report/formats.h's table has at most this many). */
#define GL_MAX_FORMATS 16

/* What the engine keeps for the report files asked for (report/formats.h's rows say). */
enum gl_need {
	GL_NEED_TIMELINE = 1 << 0,	/* memory over time per site (perfetto) */
	GL_NEED_HISTORIES = 1 << 1,	/* each stack's held bytes over the process's life */
	GL_NEED_MEMORY_EVENTS = 1 << 2, /* PyTorch's segments and blocks and their events */
	GL_NEED_KEEP_AT_EXIT = 1 << 3,	/* what a process held when it ended */
};

struct cli_command;

struct gl_opts {
	enum gl_cmd cmd;
	const struct cli_command *command; /* its row of the table (cmd/commands.h) */
	int pids[GL_MAX_PIDS];
	int nr_pids;
	bool all;
	char **argv;		/* run: the command */
	uint64_t interval_ms;	/* 0: no interim summaries */
	uint64_t duration_ms;	/* 0: until the targets exit or a signal */
	uint64_t wait_ms;	/* for libcuda to be loaded */
	uint64_t resolution_ms; /* of the allocation history behind leak verdicts */
	/* report files by enum report_format (report/formats.h); "-": stdout; NULL: none */
	const char *out[GL_MAX_FORMATS];
	unsigned int needs; /* enum gl_need: of the report files asked for */
	const char *libcuda;
	enum gl_stack_mode stack_mode;
	uint32_t stack_bytes;
	bool no_python;		/* do not walk CPython frames */
	bool no_torch;		/* do not attach to PyTorch's allocator probes */
	bool torch;		/* --torch: say so loudly when the probes are missing */
	bool torch_python_only; /* --torch-stacks python */
	bool census; /* --census (attach): the census of each live PID after the final report */
	/* census: --no-pause and the caps (0: census_cmd__default_caps()'s) */
	bool census_no_pause;
	uint64_t census_max_objects, census_max_read, census_max_ms;
	bool tensors_full;	   /* --tensors full: the allocator probes attached all the time */
	uint64_t tensor_window_ms; /* --tensor-window: a window's length (0: 16 x resolution) */
	uint32_t tensor_duty_pct;  /* --tensor-duty: automatic windows' share of the time */
	bool tensors_sampled;	   /* --tensors sampled: always attached, stacks sampled */
	uint64_t tensor_sample_bytes; /* --tensor-sample: mean bytes between stacks; 0: all */
	uint32_t top;
	uint32_t frames;
	uint64_t ringbuf_bytes;
	uint32_t max_allocs;
	bool follow_forks;
	int verbosity;
	enum gl_sort sort;	/* top */
	const char *help_topic; /* help: the subcommand asked about, NULL: all */
	const char *shell;	/* completion: bash or zsh */
	bool force;		/* record: replace an existing recording */
	/* serve */
	const char *listen;	   /* ADDR:PORT or [ADDR]:PORT */
	const char *state_dir;	   /* the only place serve writes; NULL: writes nothing */
	const char *profile_dir;   /* inside state_dir */
	uint64_t profile_every_ms; /* 0: no profiles on disk */
	uint32_t profile_keep;	   /* profiles kept on disk */
	uint32_t max_procs;	   /* processes tracked (BPF and user space) */
	uint32_t max_held;	   /* processes held at once at a library's mapping */
	bool full_stacks;	   /* text stacks show the plumbing's frames too */
	uint32_t max_py_procs;	   /* processes whose Python frames are walked (0: 4096) */
	uint64_t rescan_ms;	   /* -a, serve: every process's maps read this often (0: 1m) */
	uint64_t hold_timeout_ms;  /* a hold ends after this long at most (0: 5 s) */
	uint32_t max_stacks;	   /* distinct stacks interned */
	bool ranks_env;		   /* --ranks-from-env: RANK, LOCAL_RANK, WORLD_SIZE only */
	uint32_t imbalance_pct;	   /* --imbalance: a GPU or rank at this % of its peer (150) */
	bool bench_floor;    /* hidden --bench-floor: do-nothing programs, to measure the floor */
	bool no_stack_cache; /* hidden: copy every native stack (tests, bench/) */
	const char *bench_torch_lib; /* hidden: the file-name prefix of PyTorch's library */
	const char *record_path;     /* record: -o FILE; report: FILE */
	uint64_t max_size;	     /* record: 0 = no limit */
	const char *incident_dir; /* the flight recorder's bundles (serve: state-dir/incidents) */
	uint32_t incident_max;	  /* bundles kept (0: the default) */
	uint64_t incident_max_bytes; /* their bytes (0: the default) */
	bool census_on_oom;	     /* hold a process at its out-of-memory failure for a census */
	const char *keep_dir;	     /* --keep-modules: build-id store */
	uint64_t keep_max;
	const char *debug_dirs[GL_MAX_DEBUG_DIRS]; /* report: --debug-dir */
	int nr_debug_dirs;
};

#endif /* GL_OPTS_H */
