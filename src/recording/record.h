/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * record.h - the recording file (`gpuleak record`, read back by `gpuleak
 * report`): its layout (constants shared by the writer and recread.c) and
 * the writer. The layout is described at the top of record.c.
 */
#ifndef GL_RECORD_H
#define GL_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

#define GLR_MAGIC "GPULEAKR"
#define GLR_VERSION 1
#define GLR_ABI_CALLS_V2 2 /* recordings of GL_ABI_VERSION 2: their calls are converted */
#define GLR_HDR_SIZE 32
#define GLR_F_LITTLE_ENDIAN 0x1

#define GLR_CHUNK_MAGIC 0x4b434c47u /* "GLCK" */
#define GLR_CHUNK_HDR 24
#define GLR_CHUNK_DEFLATE 0x1
#define GLR_CHUNK_RAW_MAX (256u << 10) /* what a writer puts in one chunk */
#define GLR_CHUNK_READ_MAX (1u << 20)  /* what a reader accepts */
#define GLR_REC_HDR 8

#define GLR_STR_MAX 4095    /* bytes of a string (longer ones are cut) */
#define GLR_FRAMES_MAX 1024 /* frames of a stack */
#define GLR_BUILD_ID_MAX 64 /* hex digits of a build-id */
#define GLR_STATS_MAX 64    /* BPF counters in a stats record */

enum glr_type {
	GLR_SESSION = 1,    /* how and when the recording was made */
	GLR_MODULE = 2,	    /* a module: id, dev, ino, path, build-id */
	GLR_PYCODE = 3,	    /* a Python code object: id, function, file */
	GLR_STACK = 4,	    /* a stack: id and frames */
	GLR_PROCINFO = 5,   /* a process entered the books: comm, PID in its namespace */
	GLR_CALL = 6,	    /* a call record and the stack its entry parked */
	GLR_PROC = 7,	    /* a process record (exit, exec, fork) */
	GLR_STATS = 8,	    /* BPF's global counters */
	GLR_BPF_PROC = 9,   /* BPF's exact books of a process still running at the end */
	GLR_TRUNCATED = 10, /* recording stopped at --max-size */
	GLR_END = 11,	    /* the recorder finished: nothing is missing at the end */
	GLR_TENSORS = 12,   /* the tensor level's mode (--tensors, --tensor-sample) */
	GLR_WINDOW = 13,    /* a tensor window opened, began its tail, closed */
};

/*
 * SESSION flags. COMMAND: a command's recording (record -- CMD), whose report,
 * as run's, leaves out the processes that made no CUDA call (the launchers and
 * shells in front of the job) and counts them. Files written before the flag
 * have 0 there: an attach's report, which lists every process traced.
 */
#define GLR_SESSION_COMMAND 0x1

/* TENSORS: --tensors as the reports name it. */
enum glr_tensor_mode {
	GLR_TENSORS_OFF = 0,
	GLR_TENSORS_WINDOWED = 1,
	GLR_TENSORS_SAMPLED = 2,
	GLR_TENSORS_FULL = 3,
	GLR_TENSORS_NR,
};

/* WINDOW: what happened (equal to enum tier_event of session/tiers.h). */
enum glr_window_event {
	GLR_WINDOW_OPEN = 1,  /* both probes attached (flags: what the books did) */
	GLR_WINDOW_TAIL = 2,  /* frees only: the books' blocks stop being PyTorch's whole map */
	GLR_WINDOW_CLOSE = 3, /* neither probe */
	GLR_WINDOW_STOP = 4,  /* no more windows */
	GLR_WINDOW_NR,
};

/* WINDOW: why it opened (equal to enum tier_why of model/winlog.h). */
#define GLR_WHY_NR 5
/* WINDOW flags: at its opening the books forgot every tensor block of the last window. */
#define GLR_WINDOW_FORGOT 0x1

/* Frame kinds in stack records (equal to enum frame_kind of stacks.h). */
enum glr_frame_kind {
	GLR_FRAME_NATIVE = 0,  /* mod = module id, addr = file offset */
	GLR_FRAME_UNKNOWN = 1, /* addr = absolute address */
	GLR_FRAME_PYTHON = 2,  /* mod = Python code id, addr = line */
	GLR_FRAME_API = 3,     /* mod = API id */
	GLR_FRAME_NOTE = 5,    /* mod = a note on the Python caller (enum frame_note) */
};

struct recorder;
struct modules;
struct stacks;
struct proc;

struct recorder_opts {
	uint64_t max_size;  /* bytes the file may reach; 0: no limit */
	uint8_t stack_mode; /* enum gl_stack_mode */
	bool ran_command;   /* record -- CMD (GLR_SESSION_COMMAND) */
	const char *host;   /* said to be recorded on; NULL: this machine's name */
	uint64_t wall_ns;   /* started at (CLOCK_REALTIME); 0: now */
	/* function and file of a Python code id (NULLs if unknown); NULL: no names */
	void (*code_info)(void *ctx, uint32_t id, const char **function, const char **file);
	void *code_ctx;
	bool replace; /* an existing recording at path is replaced (at a successful end) */
};

/*
 * Creates the file at path (0600, created exclusively; a symlink there is
 * refused with ELOOP, a file with other links with EMLINK, one of another
 * user with EPERM, anything but a regular file with EINVAL, a file another
 * recorder writes with EBUSY, an existing recording with EEXIST unless
 * o->replace) and writes its header. An existing empty file is written in
 * place; an existing recording is replaced only by a successful
 * recorder__finish (the new one is written beside it, then renamed over it).
 * NULL with errno set (ENOSPC: max_size cannot hold a recording).
 */
struct recorder *recorder__new(const char *path, const struct recorder_opts *o);
/*
 * Starts the recording: tracing started at start_ns (bpf_ktime_get_ns clock),
 * frames will be read from m and s (not owned), the books' history has
 * series_width_ns resolution.
 */
void recorder__begin(struct recorder *r, struct modules *m, struct stacks *s, uint64_t start_ns,
		     uint64_t series_width_ns);
/* Closes the file (a last flush, no end record; a replacement not finished is
 * dropped, the old recording kept); NULL is a no-op. */
void recorder__free(struct recorder *r);
/* Closes it and removes what it wrote (nothing was recorded); NULL is a no-op. */
void recorder__discard(struct recorder *r);

/* A process entered the books. */
void recorder__proc_new(struct recorder *r, const struct proc *proc);
/*
 * A process left the books (its exit record, or BPF's table when that record
 * was lost): written as an exit record with its final books. Exit records
 * given to recorder__applied are left to this.
 */
void recorder__proc_exit(struct recorder *r, const struct proc *proc);
/*
 * A record was applied to the books (the books' "applied" hook): a call is
 * written with stack (its id in s, 0: none parked), preceded by whatever
 * stack, module and Python code definitions it needs; a fork or exec record
 * is written as it is; stack records are not written.
 */
void recorder__applied(struct recorder *r, const void *data, size_t size, uint32_t stack);
/*
 * Periodic work: flushes what is buffered when a second has passed since the
 * last flush, with BPF's global counters (stats, GL_NR_STATS of them, or
 * NULL) when they changed. Returns 0 or -errno (writing failed).
 */
int recorder__tick(struct recorder *r, uint64_t now_ns, const uint64_t *stats);
/*
 * The tensor level's mode (the name snap_tensors.mode gives; NULL or unknown:
 * nothing is written) and --tensor-sample, once, before the first window.
 */
void recorder__tensor_level(struct recorder *r, const char *mode, uint64_t sample_bytes);
/*
 * A tensor window's event (enum glr_window_event) of process pid at ts, why
 * it opened (OPEN; else 0) and whether the books forgot its last window's
 * blocks then. Written in the order of the call records around it, as the
 * books applied them.
 */
void recorder__window(struct recorder *r, int pid, unsigned int event, unsigned int why,
		      uint64_t ts, bool forgot);
/* The name of a recorded mode as snap_tensors.mode has it; NULL out of range. */
const char *record__tensor_mode_name(unsigned int mode);
/* BPF's books of a process still running at the end (before recorder__finish). */
void recorder__bpf_proc(struct recorder *r, int pid, const struct gl_proc_stats *st);
/*
 * Ends the recording: the final counters, the end record, a flush and an
 * fsync. malformed: records the books rejected; nr_probes: probes attached.
 * Returns 0 or -errno.
 */
int recorder__finish(struct recorder *r, uint64_t end_ns, const uint64_t *stats, uint64_t malformed,
		     uint32_t nr_probes);

/* Whether --max-size stopped the recording of events. */
bool recorder__truncated(const struct recorder *r);
/* Whether writing failed (the error was logged); nothing more is written. */
bool recorder__failed(const struct recorder *r);
/* File size so far (flushed), and call records written. */
uint64_t recorder__size(const struct recorder *r);
uint64_t recorder__calls(const struct recorder *r);

/* The file header as this version writes it, into h[GLR_HDR_SIZE]. */
void record__file_header(uint8_t *h);
/* A chunk header, into h[GLR_CHUNK_HDR], for stored bytes of data holding raw bytes of records. */
void record__chunk_header(uint8_t *h, uint32_t flags, uint32_t raw, uint32_t stored,
			  const uint8_t *data);

/* Little-endian field access for the writer and the reader. */
static inline void glr_put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t glr_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#endif /* GL_RECORD_H */
