/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * snapshot.h - what reporters read: a self-contained, symbolized copy of the
 * books at one moment. Reporters are pure functions of a snapshot.
 */
#ifndef GL_SNAPSHOT_H
#define GL_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

struct snap_frame {
	const char *kind;     /* "native" or "python" */
	const char *function; /* NULL if unknown */
	const char *module;   /* path, NULL if unknown */
	const char *build_id; /* hex, NULL if unknown */
	const char *file;     /* source file, NULL if unknown */
	uint64_t offset;      /* native: file offset in module; python: 0 */
	uint64_t sym_off;     /* offset inside function */
	uint64_t address;     /* absolute address when no module is known */
	int line;
	bool inferred; /* python: another thread's frame, the caller inferred (stacks.h) */
};

#define SNAP_MAX_DEVS 16 /* CUDA ordinals kept per process (PROC_MAX_DEVICES) */

/* One bucket of a stack's history: its last value, and the most it held in it. */
struct snap_hpoint {
	uint64_t t_ns, last, max;
};

/* One PyTorch memory event (--memory-viz's device_traces; model/mvtrace.c). */
enum mv_action { MV_ALLOC = 1, MV_FREE_COMPLETED, MV_SEGMENT_ALLOC, MV_SEGMENT_FREE };

struct mv_event {
	uint64_t ts, addr, size;
	uint32_t stack; /* its stack (0: none) */
	uint8_t action; /* enum mv_action */
	int8_t dev;	/* -1: not known */
};

#define SNAP_HELD_BUCKETS 256 /* a process's life, cut in this many for snap_stack.held */

/* What a stack still holds of what it allocated in [t_ns, t_ns + width). */
struct snap_held {
	uint64_t t_ns;
	uint64_t bytes, allocs;
};

struct snap_stack {
	uint32_t id;
	uint8_t cls; /* enum gl_class */
	uint64_t outstanding_bytes, outstanding_allocs;
	uint64_t allocs, frees; /* calls */
	uint64_t alloc_bytes, peak_bytes;
	uint64_t first_ns, last_ns;
	const char *verdict; /* "leak", "steady", "unknown" */
	double growth_bytes_per_s;
	const char *why;      /* one line explaining the verdict */
	bool torch_segment;   /* device memory PyTorch's caching allocator asked for */
	const char *pattern;  /* leaks: the pattern its evidence points to (pattern.h), or NULL */
	const char *evidence; /* what the pattern rests on (owned); NULL with it */
	const char *fix;      /* what usually fixes it (pattern__fix, static); NULL with it */
	/* tensor blocks whose stacks were sampled (snap_tensors.sample_bytes) */
	bool estimated; /* the estimates below are set: a sampled stack */
	bool unsampled; /* the blocks that drew no stack (exact figures, no frames) */
	double estimated_bytes, estimated_allocs; /* outstanding, scaled by 1 / P(sampled) */
	uint64_t dev_bytes[SNAP_MAX_DEVS];	  /* outstanding per CUDA ordinal (device memory and
					      tensor blocks of a live process) */
	uint32_t nframes;
	struct snap_frame *frames;
	/* outstanding bytes over time, the books' buckets (--perfetto; else none) */
	uint32_t nhist;
	uint64_t hist_width_ns;	  /* each point covers [t_ns, t_ns + width) */
	struct snap_hpoint *hist; /* oldest first */
	/* its outstanding allocations by when they were made (with the histories; else
	 * none): held[i] covers [t_ns, t_ns + held_width_ns); held_before: made before the
	 * process's first record gpuleak saw (before attach), time not known */
	uint32_t nheld;
	uint64_t held_width_ns, held_before;
	struct snap_held *held; /* oldest first, buckets with nothing left out */
};

/* Why a device allocation ran out of memory (books/explain.h's classification). */
struct snap_oom {
	const char *cause;  /* "leak", "fragmentation", "torch_cache", "outside_torch",
			       "other_processes", "peak", "unknown" */
	const char *why;    /* the evidence (owned) */
	const char *action; /* what usually helps (static) */
	int dev;	    /* -1: not known (every device together) */
	bool torch_request; /* PyTorch's caching allocator asked */
	bool blocks_seen;   /* PyTorch's blocks were known: the reserve could be split */
	uint64_t held, torch_reserved, torch_allocated, free_extents, largest_free, nr_free;
	uint64_t leak_bytes, outside_torch, top_lib_bytes;
	const char *top_lib; /* NULL: none */
	bool nvml;	     /* NVML answered at the failure */
	uint64_t dev_total, dev_free, others_used;
	const char *retry;    /* PyTorch's retry after freeing its cache: "pending", "succeeded",
				"failed", or NULL (not PyTorch's request, or this is the retry) */
	bool is_retry;	      /* this failure is PyTorch's retry of the one before */
	uint64_t retry_freed; /* cached segments PyTorch freed before retrying */
};

struct snap_failure {
	uint64_t ts;
	uint64_t bytes;
	uint64_t held_device;
	const char *api;
	const char *error;
	int rc;
	uint8_t cls;
	struct snap_stack *stack;   /* frames only */
	uint32_t nholders;	    /* out of memory: the largest holders at that moment */
	struct snap_stack *holders; /* outstanding_bytes/allocs and frames */
	struct snap_oom *oom;	    /* out of memory on a device: its explanation; else NULL */
};

#define SNAP_MAX_LIBS 7

struct snap_lib {
	const char *name; /* "nccl", "cublas", "cudnn", "cupy", "xla", "program", a file name,
			     "other" */
	uint64_t bytes;
};

/* One device of a process's breakdown (dev -1: allocations whose device is not known). */
struct snap_mem_dev {
	int dev;
	int nvml_index;	     /* the NVML device of this row; -1: not known */
	bool nvml_valid;     /* NVML listed the process on this device */
	uint64_t nvml_bytes; /* what NVML says the process uses on it */
	uint64_t nvml_total, nvml_free, nvml_others; /* the device, its other processes */
	uint64_t device_bytes; /* what gpuleak saw allocated: torch_reserved + outside_torch */
	uint64_t torch_reserved, torch_allocated, torch_cached, torch_blocks;
	uint64_t largest_free, nr_free; /* free extents of the reserve */
	uint64_t blocks_outside;	/* block bytes in segments gpuleak did not see: those
					   segments predate the attach (with expandable
					   segments: at least this much) */
	uint64_t blocks_in_seen;	/* block bytes inside the segments seen */
	double fragmentation;		/* 1 - largest_free / cached free extents */
	uint64_t outside_torch;
	uint32_t nlibs;
	struct snap_lib libs[SNAP_MAX_LIBS]; /* of outside_torch, largest first */
	uint64_t leak_bytes;
};

/*
 * One allocation outside PyTorch's allocator holding a large share of a device
 * (explain__is_pool): a framework's preallocated pool. What the framework
 * carves out of it makes no driver call: growth inside it is invisible.
 */
struct snap_pool {
	int dev;		  /* -1: not known */
	uint64_t bytes;		  /* the one allocation */
	uint64_t dev_total;	  /* the device's memory (NVML); 0: not known */
	uint32_t stack;		  /* its stack's id */
	const char *library;	  /* the library group that asked ("xla", "cupy", ...) */
	const char *framework;	  /* "XLA", or NULL: a pool of a framework not known */
	const char *visible_with; /* the setting that makes its buffers visible (static) */
};

#define SNAP_MAX_POOLS 4

/*
 * Where a process's device memory is. NVML's figure = torch_reserved +
 * outside_torch + unseen - unexplained (process totals).
 */
struct snap_memory {
	bool valid;	  /* built from the live books (not for a retired process) */
	bool blocks_seen; /* PyTorch's blocks were seen: else the reserve is not split
			     (driver level only: the tensor probes were not armed) */
	uint32_t ndevs;
	struct snap_mem_dev devs[17];
	bool nvml_valid;
	uint64_t nvml_bytes; /* NVML, every device */
	uint64_t device_bytes, torch_reserved, torch_allocated, torch_cached, outside_torch;
	uint64_t largest_free;
	double fragmentation;
	/* Blocks in segments from before attach: then the reserve seen (torch_reserved)
	 * = blocks_in_seen + torch_cached, and torch_allocated = blocks_in_seen +
	 * blocks_outside; no identity of the whole reserve is known. */
	uint64_t blocks_outside, blocks_in_seen;
	uint64_t unseen;      /* NVML's figure minus what gpuleak saw: context, before attach */
	uint64_t unexplained; /* gpuleak saw more than NVML's figure (NVML sampled apart) */
	uint64_t pinned_host, managed;
	uint32_t npools;
	struct snap_pool pools[SNAP_MAX_POOLS]; /* largest first */
};

/* Outstanding bytes of a process per class at one time (model/timeline.h). */
struct snap_tpoint {
	uint64_t ts; /* bpf_ktime_get_ns clock: the last change in its bucket */
	uint64_t device, managed, pinned, torch_block;
};

struct snap_timeline {
	uint64_t resolution_ns; /* changes closer than this keep the last (0: every one) */
	uint64_t since_ns;	/* followed from then on */
	uint32_t n;
	const struct snap_tpoint *pts; /* borrowed from the timeline */
};

/*
 * PyTorch's segments and blocks by address, as the books hold them at the snapshot
 * (snapshot_opts.memory_map): what a memory_viz snapshot is written from.
 */
struct snap_seg {
	uint64_t addr, size;
	uint32_t stack;		  /* its stack's id (snap_stack.id) */
	int dev;		  /* CUDA ordinal, -1: not known */
	uint32_t block0, nblocks; /* its blocks: memmap.blocks[block0 .. block0 + nblocks) */
};

struct snap_block {
	uint64_t addr, size;
	uint32_t stack;
};

struct snap_memmap {
	bool valid;	      /* built: asked for, and the process's live books */
	bool blocks_complete; /* every block since attach was seen: a gap in a segment is free */
	uint32_t nsegs, nblocks;
	struct snap_seg *segs;	   /* by device, then address */
	struct snap_block *blocks; /* by segment, then address */
	uint32_t outside_blocks;   /* blocks in no segment seen (segments from before attach) */
	uint64_t outside_bytes;
};

/* The GPU behind one CUDA ordinal of a process, as NVML names it. */
struct snap_gpu {
	int nvml_index; /* -1: not known */
	char uuid[96];	/* "": not known */
};

#define SNAP_IMB_STACKS 3

/*
 * One GPU of a process, or one rank of a job, holding much more than its
 * peers: hi against the largest of the others (peer), and the stacks that
 * make the difference (their bytes on hi minus on peer, largest first).
 */
struct snap_imbalance {
	bool found;
	int hi, peer; /* CUDA ordinals (a process), positions in the members (a job) */
	uint64_t hi_bytes, peer_bytes;
	uint32_t nstacks;
	struct {
		uint32_t proc;	/* a job's: index into snapshot.procs of the stack's process */
		uint32_t stack; /* index into that process's stacks */
		uint64_t bytes; /* on hi minus on peer */
	} stacks[SNAP_IMB_STACKS];
};

/* A window in which PyTorch's allocator probes were attached (tiers.h). */
struct snap_window {
	double start_s, end_s; /* since tracing started; end_s < 0: still open */
	const char *why;       /* "start", "duty", "growth", "capacity", "request" */
};

#define SNAP_MAX_WINDOWS 16

/* What the tensor-level figures (class torch_block) cover. */
struct snap_tensors {
	const char *mode;      /* --tensors: "windowed", "sampled", "full" or "off" */
	uint64_t sample_bytes; /* stacks for a byte-weighted sample of this mean; 0: all */
	const char *coverage;  /* "complete" (every block since tracing started), "windowed" */
	bool armed;	       /* the probes are attached now */
	uint64_t until_ns;     /* windowed and disarmed: the figures are as of this; else 0 */
	double armed_s;	       /* time attached, all windows */
	uint64_t windows_total;
	uint32_t nwindows; /* the latest windows, oldest first */
	struct snap_window windows[SNAP_MAX_WINDOWS];
};

struct snap_proc {
	int pid, ns_pid;
	int ppid;			     /* 0: not known */
	bool ranked;			     /* RANK was read (--ranks-from-env): rank is set */
	int rank, local_rank, world_size;    /* -1: not known */
	int job;			     /* index into snapshot.jobs; -1: none (snap_job_of) */
	struct snap_gpu gpus[SNAP_MAX_DEVS]; /* per CUDA ordinal; only with gpu_basis */
	const char *gpu_basis; /* how ordinals were matched to NVML's GPUs: "one" (one ordinal,
				  one GPU), "order" (ordinals and GPUs in ascending order),
				  "bytes" (the only order the bytes allow); NULL: not matched */
	struct snap_imbalance imbalance; /* between its GPUs */
	char comm[16];
	bool exited;
	bool tensors_known;	     /* tensors holds its tensor level's windows */
	struct snap_tensors tensors; /* (a copy: procs[] may be moved) */
	uint64_t start_time;
	uint64_t duration_ns; /* observed */
	uint64_t bytes[GL_CLASS_SLOTS];
	uint64_t nallocs[GL_CLASS_SLOTS];
	uint64_t alloc_bytes[GL_CLASS_SLOTS], free_bytes[GL_CLASS_SLOTS]; /* cumulative */
	uint64_t outstanding_allocs; /* device + managed + host_pinned */
	uint64_t peak_device;
	uint64_t dev_bytes[16];	    /* device class per device ordinal */
	uint64_t unknown_dev_bytes; /* device class, device not known */
	uint64_t alloc_calls, free_calls, failures, oom_failures, unmatched_frees, dropped_bytes;
	uint64_t failed_frees;
	uint64_t ctx_drops; /* context teardowns applied (compared with bpf.ctx_drops) */
	uint32_t unheld;    /* libraries mapped that could not be held until attached */
	char unheld_lib[sizeof(((struct gl_libmap *)0)->name) + 1]; /* the last of them */
	uint64_t torch_reserved_bytes; /* device bytes under PyTorch's caching allocator */
	bool bpf_valid;		       /* bpf below holds BPF's own books */
	struct gl_proc_stats bpf;
	bool consistent;	 /* user-space books equal BPF's */
	bool totals_from_kernel; /* not consistent: the totals above are BPF's exact ones */
	uint64_t attributed_bytes[GL_CLASS_SLOTS]; /* then: what the stacks add up to */
	uint64_t attributed_allocs;
	uint32_t nstacks;
	struct snap_stack *stacks; /* most suspicious first */
	uint32_t nfailures;
	struct snap_failure *failures_list;
	/* growth of the process's device memory (analysis.h), and NVML's figures */
	double device_growth_bytes_per_s;
	double projected_oom_s;	   /* until its devices are full at that rate; < 0: unknown */
	bool pre_attach_valid;	   /* NVML listed the process */
	uint64_t pre_attach_bytes; /* NVML's figure minus device bytes: before attach, context */
	struct snap_memory memory;
	struct snap_memmap memmap;
	struct snap_timeline timeline; /* n 0: none followed */
	/* --memory-viz: PyTorch's memory events since attach, oldest first (the snapshot
	 * owns them), how many went before them, and the frames of their stacks that are not
	 * among stacks[] (stacks that hold nothing now) */
	bool mv_traced; /* its events were followed (else device_traces is not a history) */
	uint32_t nmv_events, nmv_stacks;
	struct mv_event *mv_events;
	uint64_t mv_dropped;
	struct snap_stack *mv_stacks;
};

#define SNAP_MAX_MEMBERS 64

/* Processes of one job: children of one launcher, as ranks or by their parent alone. */
struct snap_job {
	int id;		   /* the launcher's PID (the members' parent) */
	const char *basis; /* "environment" (RANK of every member), "parent" */
	int world_size;	   /* -1: not known */
	uint32_t nmembers;
	uint32_t members[SNAP_MAX_MEMBERS]; /* indices into snapshot.procs, by rank, then PID */
	uint64_t device_bytes;
	struct snap_imbalance imbalance; /* between its members */
};

/* Whether ordinal d of p was matched to an NVML GPU. */
static inline bool snap_gpu_named(const struct snap_proc *p, int d)
{
	return p->gpu_basis && d >= 0 && d < SNAP_MAX_DEVS && p->gpus[d].nvml_index >= 0;
}

/* Where a snapshot rebuilt from a recording (gpuleak report) came from, and what it lacks. */
struct snap_recording {
	const char *file;
	const char *host;	/* where it was recorded, "" if unknown */
	uint64_t wall_start_ns; /* when (CLOCK_REALTIME), 0 if unknown */
	uint32_t version;	/* of the format */
	bool complete;		/* ended, nothing truncated, cut, damaged or skipped */
	bool ended;		/* the recorder finished it (its end record is there) */
	bool truncated;		/* --max-size stopped the recording of events */
	bool cut;		/* the file ends inside a chunk */
	uint64_t max_size;
	uint64_t bytes, skipped_bytes, bad_chunks, bad_records, unknown_records;
	uint64_t calls;			   /* call records replayed */
	uint32_t modules, modules_missing; /* module files not found: frames unsymbolized */
};

/* One holder of a census (attach --census) as the reports show it. */
struct snap_census_row {
	char *holder;	  /* the container or name holding the tensors (owned) */
	const char *kind; /* "list", "dict", "global", ... (static) */
	int tensors;
	uint64_t bytes; /* of the distinct storages */
	char *site;	/* the line that allocated them (the first joined), NULL: none (owned) */
	bool leak;	/* that line's stack is judged to leak */
};

#define SNAP_CENSUS_ROWS 12

/* The census of one process, summed up for the reports (the full census is its text). */
struct snap_census {
	int pid;
	bool valid; /* the census was read and PyTorch's layout verified */
	size_t tensors, storages;
	uint64_t bytes;
	int orphan_tensors; /* held by no Python path (an autograd graph may hold them) */
	uint64_t orphan_bytes;
	int pre_attach_tensors; /* device memory in no allocation seen */
	uint64_t pre_attach_bytes;
	bool paused;
	uint64_t pause_ns;
	uint32_t nrows, more_rows; /* the largest holders; how many more there were */
	struct snap_census_row rows[SNAP_CENSUS_ROWS];
};

/* The limits of the tracer's own tables and holds, and how often they bit. */
struct snap_limits {
	uint32_t max_libs;	  /* library files attached at once (GL_MAX_LIBS); 0: unknown */
	uint64_t libs_refused;	  /* mappings of a file past it: that process is not traced */
	uint32_t max_py_procs;	  /* processes whose Python frames are walked; 0: unknown */
	uint64_t py_refused;	  /* processes that got no Python frames: the table was full */
	uint64_t hold_timeout_ns; /* a hold ends after this long (0: not known) */
	uint64_t holds_expired;	  /* holds that ended so, before the probes were in */
};

/* The kernel's ring buffer, and the backlog records wait in once copied out of it. */
struct snap_ring {
	uint64_t bytes;		/* the kernel's ring */
	uint64_t backlog_peak;	/* the backlog's largest size */
	uint64_t backlog_limit; /* its limit */
	uint64_t backlog_full;	/* times it reached the limit: records then waited in the ring */
};

/* What one of gpuleak's BPF programs cost while the kernel kept its run time. */
struct snap_prog {
	char name[24];
	uint64_t runs;
	uint64_t run_ns;
};
#define SNAP_MAX_PROGS 32

struct snapshot {
	uint64_t start_ns; /* when tracing began (bpf_ktime_get_ns clock); 0: not known */
	uint64_t now_ns;
	double duration_s;
	uint64_t lost_events;	  /* ring-buffer records dropped */
	uint64_t unread_bytes;	  /* ring bytes of records from before it, not yet read */
	uint64_t unmatched_frees; /* all processes */
	uint64_t stats[GL_NR_STATS];
	uint64_t api_calls[GL_NR_APIS]; /* traced calls per API (all processes) */
	uint64_t malformed, stack_missing;
	bool complete; /* nothing lost, books agree, no cap reached */
	/* the caps on what gpuleak keeps, and what reaching them cost (all processes) */
	uint32_t cap_allocs;	   /* the kernel's allocation table (--max-allocs), 0: unknown */
	uint64_t untracked_allocs; /* allocations it could not hold: in no figure */
	uint64_t untracked_bytes;  /* their bytes */
	uint32_t cap_stacks;	   /* distinct stacks kept (--max-stacks), 0: no cap */
	uint64_t stack_overflows;  /* allocations past it, counted under one "other stacks" */
	uint32_t cap_procs;	   /* processes in the books (--max-procs), 0: no cap */
	uint64_t procs_refused;	   /* records of processes past it: dropped, in no figure */
	struct snap_limits limits; /* the tracer's own limits, and what reaching them cost */
	uint32_t nprocs;
	struct snap_proc *procs;
	uint32_t nprocs_idle; /* after procs[nprocs]: made no CUDA call, not reported */
	uint32_t njobs;
	struct snap_job *jobs;
	const char *stack_mode;
	uint32_t nr_probes;
	uint64_t ring_stack_records,
		ring_stack_bytes; /* stack records read, ring bytes they took */
	struct snap_ring ring;	  /* the kernel's ring and the backlog beside it */
	/* gpuleak's own cost so far: its CPU time (0: not known, a recording) and its BPF
	 * programs' (those that ran while the kernel's statistics were on) */
	uint64_t self_cpu_ns;
	uint32_t nprogs;
	struct snap_prog progs[SNAP_MAX_PROGS];
	const struct snap_recording *recording; /* NULL: a live session */
	const struct snap_tensors *tensors; /* NULL: not known (a recording); else &tensors_buf */
	struct snap_tensors tensors_buf;
	uint32_t ncensus; /* attach --census: the census of each target, for the reports */
	struct snap_census *census;
};

struct books;
struct symbolizer;
struct python;
struct nvml_sample;

struct snapshot_opts {
	uint64_t now_ns;	   /* bpf_ktime_get_ns clock */
	uint64_t start_ns;	   /* when tracing started, same clock */
	uint32_t max_stacks;	   /* per process, 0 = every stack with outstanding memory */
	bool all_stacks;	   /* include stacks with nothing outstanding */
	const uint64_t *stats;	   /* GL_NR_STATS BPF counters, or NULL */
	const uint64_t *api_calls; /* GL_NR_APIS call counts, or NULL */
	/* BPF's books of a running process; returns 0 or -ENOENT. NULL: none. */
	int (*bpf_stats)(void *ctx, int pid, struct gl_proc_stats *out);
	void *bpf_ctx;
	struct python *python; /* resolves Python frames; may be NULL */
	const char *stack_mode;
	uint32_t nr_probes;
	uint64_t ring_stack_records, ring_stack_bytes; /* 0 0: not known */
	struct snap_ring ring;			       /* zero: not known (a recording) */
	uint64_t self_cpu_ns;			       /* 0: not known */
	const struct snap_prog *progs;		       /* nprogs of them */
	uint32_t nprogs;
	uint64_t unread_bytes; /* ring bytes of records from before now that were not read */
	const struct nvml_sample *nvml;	    /* NVML's devices and processes; NULL: none */
	const struct snap_tensors *tensors; /* the tensor level's windows; NULL: none known */
	/* a process's own windows into *out; NULL: each process has the session's (tensors) */
	void (*proc_tensors)(void *ctx, int pid, uint64_t now_ns, struct snap_tensors *out);
	void *tensors_ctx;
	uint32_t cap_allocs; /* the caps in force, reported with what they cost (0: unknown) */
	uint32_t cap_stacks;
	double imbalance_ratio; /* --imbalance: hi >= ratio x peer; 0: the default */
	uint32_t cap_procs;
	const struct snap_limits *limits; /* NULL: none known (a recording) */
	bool memory_map;		  /* fill each process's memmap (--memory-viz) */
	const struct mvtrace *mvtrace;	  /* with memory_map: PyTorch's events (mvtrace.h) */
	bool histories;			  /* each stack's history (snap_stack.hist) */
	int only_pid;			  /* > 0: that process alone */
	/* > 0: that process is judged as of judge_ns (its failure), not now: a pause of
	 * gpuleak's (its census) is no time of the process's own */
	int judge_pid;
	uint64_t judge_ns;
	/* a process's timeline into *out (--perfetto); NULL: none */
	void (*proc_timeline)(void *ctx, int pid, uint64_t start_time, struct snap_timeline *out);
	void *timeline_ctx;
};

/*
 * A snapshot of every process in the books. Strings are borrowed from the
 * symbolizer and the module table, which must outlive it. NULL on ENOMEM.
 */
struct snapshot *snapshot__build(struct books *b, struct symbolizer *sym,
				 const struct snapshot_opts *o);

/* NULL is a no-op. */
void snapshot__free(struct snapshot *s);
/* Frees a census summary not (yet) a snapshot's, and its strings. */
void snap_census__free(struct snap_census *c);
/* Makes c (malloc'd) the snapshot's: it owns its strings then, and c is freed. 0 or
 * -ENOMEM (c untouched). */
int snapshot__add_census(struct snapshot *s, struct snap_census *c);
/* The job of p, or NULL. */
const struct snap_job *snap_job_of(const struct snapshot *s, const struct snap_proc *p);
/*
 * Adds a process for each of pids that the books have not heard of (it made
 * no CUDA call since attach): its memory is NVML's figure alone, all counted
 * as from before attach (unseen). Returns 0 or -ENOMEM (those added stay).
 */
int snapshot__add_targets(struct snapshot *s, const int *pids, int n,
			  const struct nvml_sample *nvml);
/*
 * Moves the processes that made no CUDA allocation, free or failed call (a
 * shell or launcher in front of the job) behind procs[nprocs], counted in
 * nprocs_idle, where no report looks.
 */
void snapshot__hide_idle(struct snapshot *s);
/* The same for the followed children of traced processes that made no CUDA call (a
 * DataLoader worker, an addr2line PyTorch runs, a shell-out): counted, not listed. */
void snapshot__hide_idle_children(struct snapshot *s);

#define SNAP_IMBALANCE_RATIO 1.5
#define SNAP_IMBALANCE_MIN (16ULL << 20) /* bytes hi must hold beyond peer */

/*
 * Sets each process's imbalance from its per-device figures and its stacks (after
 * snapshot__build, before snapshot__group_jobs).
 */
void snapshot__proc_imbalances(struct snapshot *s, double ratio);
/*
 * Groups s's reported processes (procs[0..nprocs)) into jobs: two or more of
 * one parent that run the same program (comm), or share a WORLD_SIZE, and sets
 * each job's imbalance between its members. Returns 0 or -ENOMEM (no jobs).
 */
int snapshot__group_jobs(struct snapshot *s, double ratio);

struct books;
struct symbolizer;
struct python;
/*
 * Stack id's frames into st (id, nframes, frames), symbolized where sym and py allow:
 * for a reader of one stack beside a snapshot (the census's join). 0 or -ENOMEM.
 */
int snap_stacks__frames(struct books *b, struct symbolizer *sym, struct python *py, uint32_t id,
			struct snap_stack *st);

#endif /* GL_SNAPSHOT_H */
