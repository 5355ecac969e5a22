/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * report.h - reporters: pure functions from a snapshot to a stream.
 *
 * Each returns 0, or -EIO if writing failed.
 */
#ifndef GL_REPORT_H
#define GL_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include "model/snapshot.h"

struct text_opts {
	uint32_t max_stacks; /* per process; 0 = all in the snapshot */
	uint32_t max_frames; /* per stack; 0 = all */
	bool summary;	     /* one line per process, no stacks */
	bool full_stacks;    /* every frame; else, past the allocating call, runs of plumbing
				(site__is_plumbing) are one line each */
};

int report__text(FILE *f, const struct snapshot *s, const struct text_opts *o);

/*
 * A few lines saying where a process's device memory is (NVML's figure and its
 * parts), indented by indent; nothing if the snapshot has no breakdown of it.
 */
void report__memory_text(FILE *f, const struct snap_proc *p, const char *indent);
/* The cause of an out-of-memory failure and what helps, and PyTorch's retry; nothing if
 * the failure has no explanation. */
void report__oom_text(FILE *f, const struct snap_failure *fl, const char *indent);
/* gpuleak explain: each process's breakdown and its out-of-memory failures explained. */
int report__explain(FILE *f, const struct snapshot *s);

struct top_opts {
	bool sort_bytes;     /* processes and stacks by outstanding bytes, else by growth */
	bool sort_name;	     /* by name (processes) and site (stacks), before sort_bytes */
	uint32_t max_stacks; /* 0 = all */
};

/* The live view's screen (without the escape sequences that clear it). */
int report__top(FILE *f, const struct snapshot *s, const struct top_opts *o);
/* A stack's site (model/site.h) as one short line ("train.py:42 forward", "leak_site (app)",
 * "[no stack]"). */
void report__site(const struct snap_stack *st, char *buf, size_t len);
int report__json(FILE *f, const struct snapshot *s);
/*
 * memviz.c: the process's PyTorch segments and blocks (snap_proc.memmap) as the pickle
 * torch.cuda.memory._snapshot() writes, for PyTorch's memory_viz. -ENOMEM or -EIO.
 */
int report__memory_viz(FILE *f, const struct snapshot *s, const struct snap_proc *sp);
/* perfetto.c: memory over time in the Trace Event Format (ui.perfetto.dev, chrome://tracing). */
int report__perfetto(FILE *f, const struct snapshot *s);
/*
 * One self-contained HTML page (html.c): the leaks in words, memory over time by
 * allocation site, a time range's flame graph of what it allocated and still holds, the
 * leak table, the census's holders, the out-of-memory failures. pid > 0: that process
 * alone. The snapshot needs the histories (snapshot_opts.histories). 0 or -errno.
 */
int report__html(FILE *f, const struct snapshot *s, int pid);
/* The process a memory_viz snapshot is written for: the most PyTorch memory among those
 * with a memory map; *others: how many others had one. NULL: none. */
const struct snap_proc *report__memory_viz_proc(const struct snapshot *s, int *others);

struct jsonw;
/*
 * gpus.c: a process's job, rank and GPUs (ordinal, NVML index and UUID) and the
 * imbalance between its GPUs, as text lines (nothing for a process on one
 * unnamed GPU outside any job) and as the fields of its JSON object.
 */
void report__gpus_text(FILE *f, const struct snapshot *s, const struct snap_proc *p);
void report__gpus_json(struct jsonw *w, const struct snapshot *s, const struct snap_proc *p);
/* The jobs: one block of text each (nothing without jobs), or the "jobs" array. */
void report__jobs_text(FILE *f, const struct snapshot *s);
void report__jobs_json(struct jsonw *w, const struct snapshot *s);
/* "  cuda0=GPU1 80.00 MiB cuda1 16.00 MiB" for a process on two GPUs or more, else "". */
char *report__gpus_short(const struct snap_proc *p, char *buf, size_t len);
/*
 * What top's DEVICE column leaves out, as one line into buf, or NULL: processes
 * running with no NVML figure (DEVICE is only what gpuleak saw since it attached),
 * else what NVML counts beyond it (memory from before the attach, contexts).
 */
const char *report__top_unseen(const struct snapshot *s, char *buf, size_t len);
/* One line for job j (top): its members, memory and imbalance, into buf. Returns buf. */
char *report__job_line(const struct snapshot *s, const struct snap_job *j, char *buf, size_t len);
/*
 * Why the snapshot is not complete, as one sentence that names the cause and
 * what to do (a cap reached names the cap and what it cost), into buf
 * (truncated if needed); "" when it is complete. Returns buf.
 */
char *report__incomplete_why(const struct snapshot *s, char *buf, size_t len);
/* Whether a class appears in reports' stack lists (memory, not address space). */
bool report__is_memory_class(uint8_t cls);
/*
 * Whether stack st of process p is drawn where its bytes add up (flame graphs,
 * folded stacks, pprof): memory, and of PyTorch's
 * segments and the tensor blocks inside them only one, or their bytes would
 * count twice. The blocks where every one since tracing began was seen, else
 * the segments (exact at the driver level; blocks seen in tensor windows stop
 * between them). The HTML report draws by the same rule. The rule is the
 * process's (report__draw_rule()), the answer the stack's.
 */
enum report_draw {
	REPORT_DRAW_ALL,      /* no tensor block seen: every memory stack */
	REPORT_DRAW_BLOCKS,   /* the blocks, not PyTorch's segments */
	REPORT_DRAW_SEGMENTS, /* the segments, not the blocks */
};
enum report_draw report__draw_rule(const struct snap_proc *p);
bool report__drawn(enum report_draw rule, const struct snap_stack *st);
/* How fast a process's device memory grows: its device stacks' growth added up, bytes/s. */
double report__proc_growth(const struct snap_proc *p);

/*
 * The name a frame has in folded stacks and flame graphs: a native frame's
 * function, else "module+0xoffset" (module's base name), else "0xaddress";
 * a Python frame's "function (file:line)". Written into buf (truncated with
 * "..." if needed, always terminated); returns buf.
 */
char *report__frame_name(const struct snap_frame *fr, char *buf, size_t len);

struct folded_opts {
	bool leak_only; /* only stacks whose verdict is "leak" */
};

/*
 * Folded stacks for flamegraph.pl, inferno and speedscope: one line per
 * distinct stack, "comm (pid);outermost;...;innermost BYTES", of outstanding
 * bytes in memory classes (stacks holding nothing are left out), sorted,
 * identical lines merged. ';' in a name becomes ':' and control characters
 * '?'. Returns 0, -ENOMEM or -EIO.
 */
int report__folded(FILE *f, const struct snapshot *s, const struct folded_opts *o);

struct svg_opts {
	bool leak_only;	   /* only stacks whose verdict is "leak" */
	const char *title; /* NULL: a default naming what is shown */
	uint32_t width;	   /* pixels; 0: 1200 */
};

/*
 * A self-contained interactive flame graph (SVG with an inline script, no
 * external resource) of outstanding bytes, root at the bottom: hover for
 * details, click to zoom, search. Frames are coloured by kind (Python,
 * libcuda, other native) and outlined when every byte under them comes from
 * stacks judged leaks; Python frames show their file's base name. At most
 * about 30000 frames are drawn (the narrowest are left out and counted).
 * Returns 0, -ENOMEM or -EIO.
 */
int report__svg(FILE *f, const struct snapshot *s, const struct svg_opts *o);

enum pprof_sample {
	PPROF_INUSE_SPACE,
	PPROF_INUSE_OBJECTS,
	PPROF_ALLOC_SPACE,
	PPROF_ALLOC_OBJECTS,
};

struct pprof_opts {
	enum pprof_sample default_sample; /* what pprof shows first */
	bool leak_only;			  /* only stacks whose verdict is "leak" */
	uint64_t time_ns;		  /* wall-clock ns since the epoch at the end; 0: none */
};

/*
 * A gzipped profile.proto (pprof, Parca, Pyroscope) with sample types
 * inuse_space, inuse_objects, alloc_space, alloc_objects: one sample per
 * process and stack of a memory class (those holding nothing too, for the
 * alloc_* views), labelled pid, comm, memory and verdict. Native frames
 * keep their module and build id as mappings (addresses are file offsets
 * above a per-module base, so pprof can symbolize them later). Returns 0,
 * -ENOMEM or -EIO.
 */
int report__pprof(FILE *f, const struct snapshot *s, const struct pprof_opts *o);

#endif /* GL_REPORT_H */
