/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * python.bpf.h - CPython frames of the calling thread.
 *
 * For a process that user space configured (map py_procs, struct gl_py_proc),
 * the walk finds this thread's PyThreadState in the interpreters' thread
 * lists by pthread id (fsbase on x86-64) or native thread id, not through the
 * GIL holder, because PyTorch releases the GIL around its operators. It then
 * follows the frame chain and records (code object, instruction index) per
 * frame, innermost first. C-stack shim frames (3.12+) are skipped and mark
 * the frame before them as an entry frame. A thread with no thread state (a
 * runtime's worker, which never ran Python) gets the frames of the only other
 * thread inside Python code at that moment, flagged GL_PY_INFERRED: the caller
 * that most likely waits for it; with several such threads, none. Everything read belongs to the
 * target and may be garbage: every read is checked and every loop bounded.
 *
 * 3.11+ keeps a thread's frames on its data stack, each caller below its
 * callee: the walk copies GL_PY_BLOCK bytes ending with the innermost frame at
 * once and takes every frame lying in that copy from it; a frame outside the
 * copy starts another (one in a generator, or in the data stack's previous
 * chunk), unless it lies on the C stack, where 3.12 keeps its one-frame shims.
 * Each read costs a fixed price (the user-copy checks), so a
 * 16-deep walk reads one or two blocks, not 16 frames; the first block is as
 * long as the thread's last walk needed, as copying bytes it does not use
 * costs too. The
 * bytes are the same either way: the traced thread is in the probe, its frames
 * stand still.
 */
#ifndef GPULEAK_PYTHON_BPF_H
#define GPULEAK_PYTHON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"

/* Processes whose frames are walked: tgid -> how. Written by src/trace/pyprocs.c. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct gl_py_proc);
} py_procs SEC(".maps");

#define GL_PY_BLOCK 4096       /* bytes of the data stack read at once (a power of two) */
#define GL_PY_MAX_BLOCKS 8     /* blocks read in one walk */
#define GL_PY_CSTACK (8 << 20) /* a frame this close above sp is on the C stack */

/*
 * What the walk's steps change. In the CPU's scratch, not on the BPF stack:
 * the verifier tracks values on the stack through every step of a bpf_loop()
 * callback, each count and flag a state of its own, and each state went on
 * through everything verified after the walk (half a million instructions
 * and a second of every start); values loaded from a map are not followed.
 */
struct py_walk_vars {
	__u64 interp;  /* interpreter whose threads are being looked at */
	__u64 tstate;  /* next thread state to look at, 0 = go to the next interpreter */
	__u64 frame;   /* next frame to look at */
	__u64 other;   /* the current frame of another thread inside Python code */
	__u32 busy;    /* other threads inside Python code: 0, 1, 2 for several */
	__u32 fflags;  /* flags of every frame recorded (GL_PY_INFERRED) */
	__u32 ns_tid;  /* this thread's id in its own PID namespace, 0 until needed */
	__u32 n;       /* frames recorded */
	__u32 interps; /* interpreters looked at */
	__u16 status;
	bool found;
};

struct gl_py_scratch {
	__u8 win[GL_PY_WINDOW];
	__u8 blk[GL_PY_BLOCK + GL_PY_WINDOW]; /* a window at the block's end stays in bounds */
	/* the block: here, not in struct py_walk, so that the verifier does not follow
	 * these values through the walk's steps (each value a state of its own) */
	__u64 blk_base;	  /* blk holds the target's blk_len bytes from here */
	__u64 first_end;  /* where the walk's first block ends */
	__u64 lowest;	  /* the lowest frame taken from the first block */
	__u64 lowest_any; /* the lowest frame taken from any block */
	__u64 floor;	  /* no block starts below this page (the thread's py_floor) */
	__u32 blk_len;	  /* 0: no block */
	__u32 blocks;	  /* blocks read in this walk */
	struct py_walk_vars v;
};

/* A window of the target's memory, one per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gl_py_scratch);
} py_scratch SEC(".maps");

struct py_walk {
	const struct gl_py_proc *cfg;
	__u8 *win;		 /* the bytes looked at: in s->win or in s->blk */
	struct gl_py_scratch *s; /* this CPU's scratch */
	bool blocks;		 /* frames are read in blocks (3.11+) */
	__u64 sp;		 /* the thread's user stack pointer */
	struct task_struct *task;
	struct gl_py_frame *out;
	__u64 fsbase;
	struct py_walk_vars *v; /* what the steps change: in the scratch */
};

static __always_inline __u64 win_u64(const __u8 *win, __u32 off)
{
	if (off > GL_PY_WINDOW - 8)
		return 0;
	return *(const __u64 *)(win + off);
}

static __always_inline __u32 win_u32(const __u8 *win, __u32 off)
{
	if (off > GL_PY_WINDOW - 4)
		return 0;
	return *(const __u32 *)(win + off);
}

static __always_inline __u8 win_u8(const __u8 *win, __u32 off)
{
	if (off > GL_PY_WINDOW - 1)
		return 0;
	return win[off];
}

/* Copies len (<= GL_PY_WINDOW) bytes at addr into the window; 0 or -EFAULT. */
static __always_inline long read_window(__u8 *win, __u64 addr, __u32 len)
{
	if (len > GL_PY_WINDOW)
		len = GL_PY_WINDOW;
	return bpf_probe_read_user(win, len, (const void *)addr);
}

static __always_inline __u64 read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

static __always_inline __u32 task_ns_tid(struct task_struct *task)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid up = {};

	if (bpf_core_read(&up, sizeof(up), &pid->numbers[level & 31]))
		return 0;
	return up.nr;
}

/* Whether the thread state in the window is this thread's. */
static __always_inline bool is_this_thread(struct py_walk *w)
{
	const struct gl_py_proc *cfg = w->cfg;
	__u64 native;

	if (w->fsbase && win_u64(w->win, cfg->ts_thread_id) == w->fsbase)
		return true;
	if (!(cfg->flags & GL_PY_F_NATIVE_TID))
		return false;
	native = win_u64(w->win, cfg->ts_native_tid);
	if (!native)
		return false;
	if (!w->v->ns_tid)
		w->v->ns_tid = task_ns_tid(w->task);
	return native == w->v->ns_tid;
}

/* One step of the thread search: look at one thread state, or move to the next interpreter. */
static long find_thread_step(__u32 i, void *data)
{
	struct py_walk *w = data;
	const struct gl_py_proc *cfg = w->cfg;
	__u64 frame;

	if (!w->v->tstate) {
		if (!w->v->interp || w->v->interps >= GL_PY_MAX_INTERPS)
			return 1;
		w->v->tstate = read_ptr(w->v->interp + cfg->is_threads_head);
		w->v->interp = read_ptr(w->v->interp + cfg->is_next);
		w->v->interps++;
		return 0;
	}
	if (read_window(w->win, w->v->tstate, cfg->win_ts)) {
		w->v->status = GL_PY_FAULT;
		return 1;
	}
	if (is_this_thread(w)) {
		w->v->frame = win_u64(w->win, cfg->ts_frame);
		w->v->found = true;
		return 1;
	}
	w->v->tstate = win_u64(w->win, cfg->ts_next);
	/* another thread: inside Python code if it has a current frame */
	frame = win_u64(w->win, cfg->ts_frame);
	if (frame && (cfg->flags & GL_PY_F_CFRAME))
		frame = read_ptr(frame + cfg->cf_frame);
	if (frame) {
		/* 1 or 2 (several), never a count: the verifier's loop states stay few */
		w->v->busy = w->v->other ? 2 : 1;
		w->v->other = frame;
	}
	return 0;
}

/*
 * Copies the len (<= GL_PY_BLOCK) bytes that end with frame's window into the
 * block, or, where they cannot all be read (the data stack's first page),
 * those from the page of the frame on. False when nothing was copied.
 */
static __always_inline bool read_block(struct gl_py_scratch *s, __u64 frame, __u32 win_fr,
				       __u32 len)
{
	__u64 end = frame + win_fr, base, n = len;

	s->blk_len = 0;
	if (end < GL_PY_BLOCK || n > GL_PY_BLOCK)
		return false;
	s->blocks++;
	base = end - n;
	/* nothing of the thread's frames lies below the page of its outermost: the page
	 * under it may not be mapped, and a read that faults costs more than a walk */
	if (frame >= s->floor && base < s->floor) {
		base = s->floor;
		n = end - base;
		if (n == 0 || n > GL_PY_BLOCK)
			return false;
	}
	if (bpf_probe_read_user(s->blk, n, (void *)base)) {
		stat_inc(GL_STAT_PY_REREAD);
		base = frame & ~(__u64)(GL_PAGE_SIZE - 1);
		if (end - n > base)
			base = end - n;
		n = end - base;
		if (n == 0 || n > GL_PY_BLOCK || bpf_probe_read_user(s->blk, n, (void *)base))
			return false;
	}
	s->blk_base = base;
	s->blk_len = n;
	return true;
}

/* Whether frame's window lies inside the block; if so, w->win points at it there. */
static __always_inline bool window_in_block(struct py_walk *w, __u64 frame)
{
	struct gl_py_scratch *s = w->s;
	__u64 off = frame - s->blk_base;

	if (frame < s->blk_base || off >= GL_PY_BLOCK || off + w->cfg->win_fr > s->blk_len)
		return false;
	w->win = s->blk + (off & (GL_PY_BLOCK - 1));
	if (s->blocks == 1)
		s->lowest = frame;
	if (!s->lowest_any || frame < s->lowest_any)
		s->lowest_any = frame;
	return true;
}

/*
 * Points w->win at the first win_fr bytes of frame w->v->frame: in the block, in a
 * new block when the frame is off the C stack, else read alone. False if they
 * cannot be read.
 */
static __always_inline bool frame_window(struct py_walk *w)
{
	struct gl_py_scratch *s = w->s;
	__u64 frame = w->v->frame;

	if (w->blocks) {
		if (window_in_block(w, frame))
			return true;
		if (s->blocks < GL_PY_MAX_BLOCKS &&
		    !(frame >= w->sp && frame - w->sp < GL_PY_CSTACK) &&
		    read_block(s, frame, w->cfg->win_fr, GL_PY_BLOCK) && window_in_block(w, frame))
			return true;
	}
	w->win = s->win;
	return read_window(w->win, frame, w->cfg->win_fr) == 0;
}

/* One step of the frame walk: record one frame, or skip a shim. */
static long walk_frame_step(__u32 i, void *data)
{
	struct py_walk *w = data;
	const struct gl_py_proc *cfg = w->cfg;
	struct gl_py_frame *f;
	__u64 code, prev, instr;
	__u32 n = w->v->n;

	if (!w->v->frame)
		return 1;
	if (n >= GL_MAX_PY_FRAMES) {
		w->v->status = GL_PY_TRUNCATED;
		return 1;
	}
	if (!frame_window(w)) {
		w->v->status = GL_PY_FAULT;
		return 1;
	}
	prev = win_u64(w->win, cfg->fr_previous);
	if (prev == w->v->frame) {
		w->v->status = GL_PY_LOOP;
		return 1;
	}
	if (cfg->owner_shim && win_u8(w->win, cfg->fr_owner) >= cfg->owner_shim) {
		if (n > 0)
			w->out[(n - 1) & (GL_MAX_PY_FRAMES - 1)].flags |= GL_PY_ENTRY;
		w->v->frame = prev;
		return 0;
	}
	/* 3.14 tags the low bit of f_executable; objects are 16-byte aligned */
	code = win_u64(w->win, cfg->fr_code) & ~7ULL;
	f = &w->out[n & (GL_MAX_PY_FRAMES - 1)];
	f->code = code;
	f->flags = w->v->fflags;
	if (cfg->flags & GL_PY_F_LASTI_INT) {
		f->lasti = win_u32(w->win, cfg->fr_instr);
	} else {
		instr = win_u64(w->win, cfg->fr_instr);
		code += cfg->co_code;
		f->lasti = instr >= code && instr - code < (1ULL << 31) ? (instr - code) / 2 :
									  GL_PY_LASTI_NONE;
	}
	if ((cfg->flags & GL_PY_F_ALL_ENTRY) ||
	    ((cfg->flags & GL_PY_F_IS_ENTRY) && win_u8(w->win, cfg->fr_is_entry)))
		f->flags |= GL_PY_ENTRY;
	w->v->n = n + 1;
	w->v->frame = prev;
	return 0;
}

/*
 * Walks the Python frames of the current thread into out[0..GL_MAX_PY_FRAMES).
 * Returns the number recorded; *status says why the walk stopped.
 */
static __always_inline __u16 py_walk(struct task_struct *task, struct gl_inflight *inf,
				     __u64 pid_tgid, __u64 sp, struct gl_py_frame *out,
				     __u16 *status)
{
	__u32 tgid = pid_tgid >> 32, zero = 0;
	const struct gl_py_proc *cfg = bpf_map_lookup_elem(&py_procs, &tgid);
	struct gl_py_scratch *s;
	struct py_walk w = {};
	__u64 start;

	*status = GL_PY_OK;
	if (!cfg)
		return 0;
	/* task is a BTF pointer (the current task): direct loads, no bpf_probe_read_kernel() */
	start = task->group_leader->start_boottime;
	if (!cfg->tick_ns || start / cfg->tick_ns != cfg->start_ticks) {
		*status = GL_PY_STALE;
		return 0;
	}
	s = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!s)
		return 0;
	__builtin_memset(&s->v, 0, sizeof(s->v));
	w.v = &s->v;
	w.cfg = cfg;
	w.win = s->win;
	w.s = s;
	w.task = task;
	w.sp = sp;
	w.out = out;
#ifdef __TARGET_ARCH_x86
	w.fsbase = task->thread.fsbase;
#endif
	/* the thread state found last time, if it still names this thread: no search */
	if (inf->py_tstate) {
		w.v->tstate = inf->py_tstate;
		find_thread_step(0, &w);
		if (!w.v->found) {
			w.v->tstate = 0;
			w.v->status = GL_PY_OK;
			w.v->busy = 0; /* the full search below counts every other thread */
			w.v->other = 0;
		}
	}
	if (!w.v->found) {
		w.v->interp = read_ptr(cfg->runtime + cfg->rt_interp_head);
		if (!w.v->interp) {
			*status = GL_PY_NO_RUNTIME;
			inf->py_tstate = 0;
			return 0;
		}
		bpf_loop(GL_PY_MAX_THREADS + GL_PY_MAX_INTERPS, find_thread_step, &w, 0);
	}
	inf->py_tstate = w.v->found ? w.v->tstate : 0;
	if (!w.v->found) {
		*status = w.v->status ?: (w.v->tstate ? GL_PY_MANY_THREADS : GL_PY_NO_THREAD);
		if (*status != GL_PY_NO_THREAD || !w.v->busy)
			return 0;
		if (w.v->busy > 1) {
			*status = GL_PY_AMBIGUOUS;
			return 0;
		}
		/* the one thread inside Python code: its frames, flagged as inferred */
		w.v->frame = w.v->other;
		w.v->fflags = GL_PY_INFERRED;
	} else if ((cfg->flags & GL_PY_F_CFRAME) && w.v->frame) {
		w.v->frame = read_ptr(w.v->frame + cfg->cf_frame);
	}
	if (cfg->version >= 0x030b && w.v->frame) {
		/* frames on the data stack: the first block as long as the last walk used */
		__u32 len = inf->py_block;

		if (len < GL_PY_WINDOW || len > GL_PY_BLOCK)
			len = GL_PY_BLOCK;
		w.blocks = true;
		s->blocks = 0;
		s->lowest = 0;
		s->lowest_any = 0;
		s->floor = inf->py_floor;
		s->first_end = w.v->frame + cfg->win_fr;
		read_block(s, w.v->frame, cfg->win_fr, len);
	}
	bpf_loop(GL_PY_MAX_STEPS, walk_frame_step, &w, 0);
	if (w.blocks) {
		/* the next walk's first block: what this one used of its first, a window more */
		__u64 used = s->first_end - s->lowest;

		inf->py_block = s->lowest && s->first_end > s->lowest && used < GL_PY_BLOCK ?
					(used | (GL_PY_WINDOW - 1)) + 1 + GL_PY_WINDOW :
					GL_PY_BLOCK;
		/* a walk to the outermost frame: its page is the floor of the next walks */
		if (!w.v->status && !w.v->frame && s->lowest_any)
			inf->py_floor = s->lowest_any & ~(__u64)(GL_PAGE_SIZE - 1);
	}
	if (!w.v->status && w.v->frame)
		w.v->status = GL_PY_LOOP;
	*status = w.v->status;
	return w.v->n;
}

#endif /* GPULEAK_PYTHON_BPF_H */
