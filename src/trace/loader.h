/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loader.h - the BPF side's lifecycle: open, configure, load, attach; the
 * ring buffer; and the in-kernel counters.
 */
#ifndef GL_LOADER_H
#define GL_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "libcuda.h"

struct event; /* event.h */

struct tracer;

/* A process held at a library's mapping runs on after this long by default. */
#define GL_HOLD_TIMEOUT_NS 5000000000ULL

struct tracer_opts {
	bool all;	   /* every process, else only targets */
	bool follow_forks; /* children of targets become targets */
	enum gl_stack_mode stack_mode;
	uint32_t stack_bytes;	/* DWARF mode */
	bool python;		/* walk CPython frames */
	bool torch_python_only; /* tensor blocks: Python frames, no native stack */
	uint64_t ringbuf_bytes; /* power of two */
	uint32_t max_allocs;	/* BPF allocation table size */
	uint32_t max_procs;
	uint32_t max_held;	  /* processes held at once (0: 4096) */
	bool bench_floor;	  /* attach the do-nothing floor programs (benchmarks) */
	bool no_hold;		  /* never stop a target at a library's mapping */
	uint32_t max_py_procs;	  /* the py_procs map's size (0: 4096) */
	uint64_t hold_timeout_ns; /* the guard ends a hold older than this (0: GL_HOLD_TIMEOUT_NS) */
	bool stack_cache;	  /* DWARF mode: BPF sends ids of stacks published (scache.h) */
	uint64_t sample_bytes;	  /* tensor blocks: stacks for a byte-weighted sample of mean
				 * distance this (tiers.bpf.h); 0: a stack for every block */
	bool torch_per_pid;	  /* PyTorch's probes attached per process (tensor windows) */
	bool stop_on_oom;	  /* hold a process at an out-of-memory failure (GL_CALL_HELD) */
	bool rank_env;		  /* read RANK etc. at a library's mapping (gl_libmap.env) */
};

/*
 * The kernel's ring size, the backlog's peak and limit, and the times it reached the
 * limit (mouth.h).
 */
void tracer__ring(struct tracer *t, uint64_t *ring, uint64_t *peak, uint64_t *limit,
		  uint64_t *full);

/*
 * Called for every ring-buffer record, in the order the programs committed them,
 * decoded and validated at the ring's mouth (event__decode()): one that failed
 * validation comes with a negative type and its header alone. Returns 0 (or < 0 to
 * stop reading).
 */
typedef int (*tracer_record_fn)(void *ctx, const struct event *ev);

/*
 * Opens, configures and loads the BPF programs. NULL with errno set:
 * EPERM (privileges; a message naming the capability was logged), ENOTSUP
 * (kernel lacks BTF or a needed feature), or another error.
 */
struct tracer *tracer__new(const struct tracer_opts *opts, tracer_record_fn fn, void *ctx);
void tracer__free(struct tracer *t);

/* Starts tracing pid, until it exits (BPF drops it then). Returns 0 or -errno. */
int tracer__add_target(struct tracer *t, int pid);

/* Whether a library with this identity is attached already. */
bool tracer__has_lib(const struct tracer *t, dev_t dev, ino_t ino);
/*
 * Attaches entry and return probes to every function of lib. Returns the
 * number of functions attached (> 0), or -errno if none could be (-EPERM:
 * privileges, explained in the log).
 */
int tracer__attach_lib(struct tracer *t, const struct cuda_lib *lib);
/* Whether PyTorch's allocator probes are attached in this library file. */
bool tracer__has_torch(const struct tracer *t, dev_t dev, ino_t ino);
/*
 * Attaches to the USDT probes pytorch:malloc and pytorch:free of path (a
 * libc10_cuda.so), in every process that maps it. Returns 0, -ENOENT when the
 * library has no such probes, -EPERM (privileges), or another -errno.
 */
int tracer__attach_torch(struct tracer *t, const char *path, dev_t dev, ino_t ino);
/*
 * Attaches (true) or detaches (false) pytorch:malloc and pytorch:free in every
 * PyTorch library known, and in those attached later. A detached probe is gone
 * from the traced processes: its USDT semaphore drops and PyTorch skips it.
 * The tracer starts with both armed. Returns 0 or the first -errno.
 */
int tracer__arm_torch(struct tracer *t, bool malloc_on, bool free_on);
/*
 * With torch_per_pid, PyTorch's probes are attached per process instead,
 * links that plant breakpoints (and raise the USDT semaphores) in that process
 * only: tracer__torch_found says a process maps the PyTorch library dev, ino
 * (attached by tracer__attach_torch; again later: nothing); a process new to
 * the tracer has both probes attached at once in that library, and is queued
 * for tracer__torch_next_found (its pid and when it was found). Without
 * torch_per_pid both do nothing.
 */
void tracer__torch_found(struct tracer *t, int pid, dev_t dev, ino_t ino);
bool tracer__torch_next_found(struct tracer *t, int *pid, uint64_t *found_ns);
/* As tracer__arm_torch, for pid alone (torch_per_pid). Returns 0 or the first -errno. */
int tracer__arm_torch_pid(struct tracer *t, int pid, bool malloc_on, bool free_on);
/* pid exited: its links go, and a process found later with its pid is new. */
void tracer__torch_forget_pid(struct tracer *t, int pid);
/*
 * Drops every tensor block from BPF's books (allocs and the per-process
 * counters); call it with the allocator probes detached. *forgotten (may be
 * NULL): how many. Returns 0 or -errno.
 */
int tracer__forget_tensors(struct tracer *t, uint64_t *forgotten);
/* As tracer__forget_tensors, for pid's blocks alone (its probes detached). */
int tracer__forget_tensors_pid(struct tracer *t, int pid, uint64_t *forgotten);

/* Number of probes (entry + return) attached over all libraries. */
int tracer__nr_probes(const struct tracer *t);
/* Library files attached now. */
int tracer__nr_libs(const struct tracer *t);
/*
 * Library files no process maps any more are detached (-a, serve), so that their
 * slots serve new files and a deleted file is let go. Each file keeps the processes
 * (PID and start time) seen mapping it: by a scan (tracer__lib_seen, a stat()
 * identity) and by every mapping's record, whether the maps of that process can be
 * read or not (tracer__lib_mapped, the kernel's identity); a pinned file (the one new
 * processes load) stays. tracer__detach_unused() detaches each file none of whose
 * processes lives and that was not seen since since_ns: the file is first made
 * unhandled (a mapping from then on is held), the ring read to where it stands, and a
 * file a process mapped meanwhile is kept. Returns how many were detached.
 */
void tracer__pin_lib(struct tracer *t, dev_t dev, ino_t ino);
void tracer__lib_seen(struct tracer *t, dev_t dev, ino_t ino, int pid);
void tracer__lib_mapped(struct tracer *t, __u64 kdev, __u64 kino, int pid);
int tracer__detach_unused(struct tracer *t, uint64_t since_ns);
/* Whether libraries are attached with uprobe_multi links (else one perf event per probe). */
bool tracer__uses_multi_links(const struct tracer *t);
/*
 * Holds: BPF stops (SIGSTOP) a target that maps a libcuda or libc10_cuda file
 * not handled yet and sends a GL_PROC_LIBLOAD record with lib.held set. Once
 * the probes are in, user space marks the file handled, so that no process
 * mapping it is held again, and releases the process.
 *
 * tracer__lib_handled takes the kernel's identity from the record;
 * tracer__file_handled a stat() identity (the libraries attached by path do
 * this themselves). Both return 0 or -errno.
 */
int tracer__lib_handled(struct tracer *t, __u64 kdev, __u64 kino);
int tracer__file_handled(struct tracer *t, dev_t dev, ino_t ino);
/* The file is not handled any more: a process mapping it is held again. */
void tracer__file_unhandled(struct tracer *t, dev_t dev, ino_t ino);
/* The kernel's dev_t (s_dev) of a dev_t as stat() gives it. */
__u64 tracer__kernel_dev(dev_t dev);
/* Releases pid (SIGCONT) if BPF holds it. Returns whether it was held. */
bool tracer__release(struct tracer *t, int pid);
/*
 * Whether a hold of pid ended at its deadline (and when BPF had stopped it, in *ns;
 * *by_kernel: ended by the BPF timer, not by the guard); the entry is taken: a second
 * call says false.
 */
bool tracer__hold_expired(struct tracer *t, int pid, uint64_t *ns, bool *by_kernel);
/* When BPF stopped pid (bpf_ktime_get_ns). Returns 0, or -ENOENT if it is not held. */
int tracer__held_since(struct tracer *t, int pid, uint64_t *ns);

/*
 * Waits up to timeout_ms for records and hands the waiting records to the callback
 * (BPF wakes the consumer only once enough records wait, so a record can wait up to one
 * timeout), for 50 ms at most: records that keep coming faster than they are read wait
 * for the next poll. Returns count or -errno.
 */
int tracer__poll(struct tracer *t, int timeout_ms);
/*
 * The time (CLOCK_MONOTONIC, as bpf_ktime_get_ns) before which every record committed
 * has been read, 0 before the first read reached the ring's end: the books are exact as
 * of then. A reader slower than the programs that write stays behind, and this time with
 * it, until a drain.
 */
uint64_t tracer__read_ns(const struct tracer *t);
/*
 * Handles the records written before it began, not those that come while it reads, for
 * 1 s at most: a drain under a load faster than its reading ends all the same, and
 * tracer__unread() says what it left. Once tracing stopped (tracer__stop), it reads the
 * ring to its end. Returns the records read, or -errno.
 */
int tracer__drain(struct tracer *t);
/* Ring bytes of records that waited as the last drain began and that it left unread. */
uint64_t tracer__unread(const struct tracer *t);
/*
 * The end of the session's tracing: calls that enter from now on are not booked, nor are
 * tensor blocks, in BPF's books as in the records, while calls in flight still return
 * into both. It returns once the programs running at the stop have ended (an RCU grace
 * period: milliseconds), so that what they booked is in the ring; the ring then ends,
 * and a drain reads it to its end. Process exits are still seen. Idempotent.
 */
void tracer__stop(struct tracer *t);
/* The ring buffer's epoll descriptor: readable when records wait (owned by the tracer). */
int tracer__epoll_fd(struct tracer *t);

/* Global BPF counters (enum gl_stat), summed over CPUs. */
int tracer__stats(struct tracer *t, uint64_t out[GL_NR_STATS]);
/* Traced calls per API id since load, summed over CPUs. Returns 0 or -errno. */
int tracer__api_calls(struct tracer *t, uint64_t out[GL_NR_APIS]);
/*
 * The kernel's run-time statistics of one of gpuleak's BPF programs. The kernel keeps
 * them only while they are enabled (sysctl kernel.bpf_stats_enabled=1, or a
 * BPF_ENABLE_STATS descriptor held open, as bench/ does).
 */
struct tracer_prog_time {
	char name[24];
	uint64_t runs;
	uint64_t run_ns;
};
/* The programs that ran with the statistics on, into out[max]; returns how many. */
int tracer__prog_times(struct tracer *t, struct tracer_prog_time *out, int max);
/* The in-kernel books of tgid. Returns 0, or -ENOENT if BPF holds none. */
int tracer__proc_stats(struct tracer *t, int tgid, struct gl_proc_stats *out);

/*
 * Deletes BPF's books of the exited process (tgid, start_time) once user space
 * has them. Returns 0 or -errno.
 */
int tracer__forget_proc(struct tracer *t, int tgid, uint64_t start_time);

/* Counts a process refused by the full py_procs map; returns the count so far. */
uint64_t tracer__note_py_refused(struct tracer *t);
/* Processes refused so far by the full py_procs map, and the map's size. */
uint64_t tracer__py_refused(const struct tracer *t);
uint32_t tracer__max_py_procs(const struct tracer *t);
/* --hold-timeout in force (ns). */
uint64_t tracer__hold_timeout(const struct tracer *t);

/* File descriptor of the BPF map called name (e.g. "py_procs"), or -ENOENT. */
int tracer__map_fd(struct tracer *t, const char *name);
/* Stack records read from the ring buffer so far; *bytes: the ring space they took. */
uint64_t tracer__ring_stacks(const struct tracer *t, uint64_t *bytes);

/* Explains a failure to load or attach in terms of capabilities (logged). */
void tracer__explain_eperm(const char *what);

#endif /* GL_LOADER_H */
