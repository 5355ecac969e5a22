/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * stack.bpf.h - the caller's stack at the entry of an allocating call.
 *
 * FP mode asks the kernel for a frame-pointer walk (bpf_get_stack). DWARF mode
 * copies the registers and the live part of the user stack, page by page so
 * that a fault at the stack's end still leaves what was read, for user space
 * to unwind with the CFI. Python frames, when enabled, come first.
 */
#ifndef GPULEAK_STACK_BPF_H
#define GPULEAK_STACK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "python.bpf.h"

#define GL_PY_BYTES (GL_MAX_PY_FRAMES * sizeof(struct gl_py_frame))

/*
 * The start time of task's process. task is a BTF pointer (the current task, a
 * tracepoint's argument): the fields are read with direct loads, which the JIT
 * guards against a fault, not with two bpf_probe_read_kernel() calls (each
 * allocation and free reads it twice: its process's counters, its record).
 */
static __always_inline __u64 proc_start_time(struct task_struct *task)
{
	return task->group_leader->start_boottime;
}

static __always_inline void fill_hdr(struct gl_hdr *h, __u32 type, __u32 size,
				     struct task_struct *task, __u64 pid_tgid)
{
	h->type = type;
	h->size = size;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->start_time = proc_start_time(task);
	h->ts = bpf_ktime_get_ns();
}

struct vma_bounds {
	__u64 start, end;
};

/*
 * Above the main thread's first frame: argc, argv, the environment, the auxiliary
 * vector and their strings, below them a random gap of up to 8 KiB; no frame's
 * unwinding reads them. Those that are not, where a dynamic loader run as a
 * program shifts its arguments (a word each), lie within this of the start.
 */
#define GL_STACK_TOP_SLACK 256

static long vma_bounds_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_bounds *vb = data;
	__u64 top = vma->vm_mm->start_stack; /* where the first frame's sp started */

	vb->start = vma->vm_start;
	vb->end = vma->vm_end;
	if (top >= vb->start && top + GL_STACK_TOP_SLACK < vb->end)
		vb->end = top + GL_STACK_TOP_SLACK;
	return 0;
}

/*
 * The number of stack bytes to copy at sp: targ_stack_bytes, less where its
 * mapping ends sooner, or, in the main thread's, where its frames end
 * (vma_bounds_cb()). The mapping is looked up (under the address space's
 * lock) only when sp has left the one this thread's sp was in last time: a
 * thread's stack is not unmapped under it, and a main stack grows down, past
 * the start kept, so a stack's end does not move. Were it to (a mapping split or
 * merged above sp), a copy asked for past the end stops at the first page it
 * cannot read, as any copy does.
 */
static __always_inline __u64 stack_want(struct task_struct *task, struct gl_inflight *inf, __u64 sp)
{
	struct vma_bounds vb = {};
	__u64 want = targ_stack_bytes > GL_MAX_STACK_COPY ? GL_MAX_STACK_COPY : targ_stack_bytes;

	if (sp >= inf->stack_lo && sp < inf->stack_hi) {
		vb.end = inf->stack_hi;
	} else if (bpf_find_vma(task, sp, vma_bounds_cb, &vb, 0) == 0) {
		inf->stack_lo = vb.start;
		inf->stack_hi = vb.end;
	}
	if (vb.end > sp && vb.end - sp < want)
		want = vb.end - sp;
	return want;
}

/* Copy want bytes at sp to buf page by page, up to the first that cannot be read; returns bytes copied. */
static __always_inline __u32 copy_user_stack(__u64 sp, __u64 want, __u8 *buf)
{
	__u64 done = 0;

	for (int i = 0; i < GL_MAX_STACK_COPY / GL_PAGE_SIZE + 1; i++) {
		__u64 chunk = GL_PAGE_SIZE - ((sp + done) & (GL_PAGE_SIZE - 1));

		if (done >= want)
			break;
		if (chunk > want - done)
			chunk = want - done;
		if (done > GL_MAX_STACK_COPY || chunk > GL_PAGE_SIZE)
			break;
		if (bpf_probe_read_user(buf + done, chunk, (void *)(sp + done)))
			break;
		done += chunk;
	}
	return done;
}

/*
 * DWARF mode's common case: the copy is read with one call straight into a
 * ring-buffer reservation, not into the scratch buffer and then copied again.
 * The reservation has room for every Python frame and the copy, rounded up;
 * hdr.size says how much of it is the record (user space trims the rest).
 * False when nothing was sent because a page of the copy cannot be read: the
 * copy must then go page by page, to keep what can be read.
 */
static __always_inline bool send_direct(struct gl_stack_buf *b, __u8 *rec, __u64 off, __u64 want,
					__u64 cap, struct task_struct *task, __u64 pid_tgid)
{
	struct gl_stack *r = &b->rec;

	if (!rec) {
		stat_inc(GL_STAT_LOST_STACK);
		return true;
	}
	if (off > GL_PY_BYTES || want > cap ||
	    bpf_probe_read_user(rec + sizeof(*r) + off, want, (void *)r->sp)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		return false;
	}
	r->stack_bytes = want;
	fill_hdr(&r->hdr, GL_REC_STACK, sizeof(*r) + off + want, task, pid_tgid);
	if (bpf_probe_read_kernel(rec, sizeof(*r) + off, b)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		return false;
	}
	/* with the stack cache, a copy is a call site BPF does not know yet: the reader is
	 * woken to publish it, or every call of the site would be copied until it reads */
	bpf_ringbuf_submit(rec, targ_stack_cache ? BPF_RB_FORCE_WAKEUP : rb_flags(r->hdr.ts));
	return true;
}

#define GL_DIRECT_SIZE(cap) (sizeof(struct gl_stack) + GL_PY_BYTES + (cap))

static __always_inline bool emit_stack_direct(struct gl_stack_buf *b, __u64 off, __u64 want,
					      struct task_struct *task, __u64 pid_tgid)
{
	/* the size reserved must be a constant: the next power of two up from a page */
	if (!want)
		return false;
	if (want <= GL_PAGE_SIZE)
		return send_direct(b, bpf_ringbuf_reserve(&events, GL_DIRECT_SIZE(GL_PAGE_SIZE), 0),
				   off, want, GL_PAGE_SIZE, task, pid_tgid);
	if (want <= 2 * GL_PAGE_SIZE)
		return send_direct(
			b, bpf_ringbuf_reserve(&events, GL_DIRECT_SIZE(2 * GL_PAGE_SIZE), 0), off,
			want, 2 * GL_PAGE_SIZE, task, pid_tgid);
	if (want <= 4 * GL_PAGE_SIZE)
		return send_direct(
			b, bpf_ringbuf_reserve(&events, GL_DIRECT_SIZE(4 * GL_PAGE_SIZE), 0), off,
			want, 4 * GL_PAGE_SIZE, task, pid_tgid);
	return send_direct(b, bpf_ringbuf_reserve(&events, GL_DIRECT_SIZE(GL_MAX_STACK_COPY), 0),
			   off, want, GL_MAX_STACK_COPY, task, pid_tgid);
}

/* The stack copied at sp, as a global function's argument (its size is the type's). */
struct gl_stack_words {
	__u8 b[GL_MAX_STACK_COPY];
};

/*
 * The hash of the live words at sp (w, span bytes) at shape s's offsets, bp
 * first if s needs it (gl_scache_hash in gpuleak_abi.h); 0 when s cannot be
 * checked. A bounded loop, not bpf_loop(), whose callback per word costs more
 * than the work. A global function: the verifier checks it once, not once for
 * every state that reaches it (the loop's 128 steps, each state of the walk
 * before it: a third of a second of every start).
 */
__noinline __u64 scache_hash(const struct gl_scache_shape *s, const struct gl_stack_words *w,
			     __u64 bp)
{
	__u64 h = GL_SC_SEED;
	__u32 nr, span;

	if (!s || !w)
		return 0;
	nr = s->nr_checks;
	span = s->span;
	if (nr > GL_SC_CHECKS)
		return 0;
	if (s->need_bp)
		h = gl_scache_mix(h, bp);
	for (__u32 i = 0; i < GL_SC_CHECKS; i++) {
		__u32 off = s->off[i];

		if (i >= nr)
			break;
		if (off > GL_MAX_STACK_COPY - 8 || off + 8 > span)
			return 0;
		h = gl_scache_mix(h, *(const __u64 *)(w->b + off));
	}
	return h;
}

/* Whether the live words at sp (w) are v's, at shape s's offsets (checked by scache_hash()). */
__noinline int scache_words_equal(const struct gl_scache_shape *s, const struct gl_scache_val *v,
				  const struct gl_stack_words *w)
{
	__u32 nr;

	if (!s || !v || !w)
		return 0;
	nr = s->nr_checks;
	if (nr > GL_SC_CHECKS)
		return 0;
	for (__u32 i = 0; i < GL_SC_CHECKS; i++) {
		__u32 off = s->off[i];

		if (i >= nr)
			break;
		if (off > GL_MAX_STACK_COPY - 8)
			return 0;
		if (*(const __u64 *)(w->b + off) != v->val[i])
			return 0;
	}
	return 1;
}

struct scache_probe {
	struct gl_scache_key k;
	__u64 start_time, bp, want;
	__u8 *buf;  /* GL_MAX_STACK_COPY bytes of scratch */
	__u32 have; /* bytes of the stack at sp in buf */
	__u32 id;   /* the entry that matched */
	bool found; /* a shape under the key was looked at */
};

/*
 * One way of the key: its shape, if any, checked against the live stack, and
 * the stack of that shape with the live words, if any (its first, else one
 * found by their hash); 1 on a match.
 */
static long scache_way_step(__u32 i, void *data)
{
	struct scache_probe *p = data;
	const struct gl_scache_shape *s;
	const struct gl_scache_val *v;
	struct gl_scache_vkey vk;
	__u32 span;
	__u8 byte;

	p->k.way = i;
	s = bpf_map_lookup_elem(&stack_shapes, &p->k);
	if (!s)
		return 0;
	p->found = true;
	span = s->span;
	if (s->start_time != p->start_time || !s->shape || span < 8 || span > p->want ||
	    span > GL_MAX_STACK_COPY || s->len > p->want)
		return 0;
	if (span > p->have) {
		if (bpf_probe_read_user(p->buf, span, (void *)p->k.sp))
			return 0;
		p->have = span;
	}
	/* a copy cut short at a page it could not read, whose unwinding tried to read past
	 * the cut: this one must be cut there too (or sooner, past span: the unwinding read
	 * nothing between span and len). One whose unwinding read nothing past the cut
	 * unwinds the same whatever lies there: no probe of the page, which faults each
	 * time it is not there. */
	if (s->need_cut && s->len < p->want &&
	    !bpf_probe_read_user(&byte, 1, (void *)(p->k.sp + s->len)))
		return 0;
	/* the shape's first stack, in place: a key of one stack costs one lookup */
	v = &s->first;
	if (v->id && (!s->need_bp || v->bp == p->bp) &&
	    scache_words_equal(s, v, (const struct gl_stack_words *)p->buf)) {
		p->id = v->id;
		return 1;
	}
	vk.tgid = p->k.tgid;
	vk.shape = s->shape;
	vk.hash = scache_hash(s, (const struct gl_stack_words *)p->buf, p->bp);
	if (!vk.hash)
		return 0;
	v = bpf_map_lookup_elem(&stack_cache, &vk);
	if (!v || !v->id || (s->need_bp && v->bp != p->bp) ||
	    !scache_words_equal(s, v, (const struct gl_stack_words *)p->buf))
		return 0;
	p->id = v->id;
	return 1;
}

/*
 * DWARF mode: the id of a cached native stack that this one is known to unwind
 * to (gpuleak_abi.h), or 0: the copy must go. want is the copy's length, buf
 * room for GL_MAX_STACK_COPY bytes of scratch.
 */
static __always_inline __u32 scache_lookup(struct task_struct *task, __u64 pid_tgid,
					   const struct gl_stack *r, __u64 want, __u8 *buf)
{
	struct scache_probe p = { .k = { .tgid = pid_tgid >> 32, .ip = r->ip, .sp = r->sp },
				  .bp = r->bp,
				  .want = want,
				  .buf = buf };

	if (!targ_stack_cache || want < 8 || want > GL_MAX_STACK_COPY)
		return 0;
	if (bpf_probe_read_user(&p.k.word0, sizeof(p.k.word0), (void *)r->sp))
		return 0;
	p.start_time = proc_start_time(task);
	bpf_loop(GL_SC_WAYS, scache_way_step, &p, 0);
	if (p.id) {
		stat_inc(GL_STAT_SCACHE_HIT);
		return p.id;
	}
	if (p.found)
		stat_inc(GL_STAT_SCACHE_MISS);
	return 0;
}

/*
 * Write a GL_REC_STACK record for the call that just entered (at_entry: the
 * probe sits on a function's first instruction, so sp points at the return
 * address) or for a probe inside a function (USDT).
 */
static __always_inline void build_stack(struct gl_stack_buf *b, struct pt_regs *ctx,
					struct task_struct *task, struct gl_inflight *inf,
					__u64 pid_tgid, __u64 seq, __u32 api, bool at_entry,
					__u32 mode)
{
	struct gl_stack *r = &b->rec;
	__u64 off = 0;
	__u32 size;
	long n;

	r->seq = seq;
	r->ip = PT_REGS_IP(ctx);
	r->sp = PT_REGS_SP(ctx);
	r->bp = PT_REGS_FP(ctx);
	r->ret_addr = 0;
	if (at_entry)
		bpf_probe_read_user(&r->ret_addr, sizeof(r->ret_addr), (void *)r->sp);
	r->api = api;
	r->nr_ips = 0;
	r->nr_py = 0;
	r->stack_bytes = 0;
	r->py_status = 0;
	r->cache_id = 0;

	if (targ_python) {
		r->nr_py = py_walk(task, inf, pid_tgid, r->sp, (struct gl_py_frame *)b->data,
				   &r->py_status);
		/* read back from the map: one state after the walk, whatever its count */
		off = *(volatile __u16 *)&r->nr_py * sizeof(struct gl_py_frame);
		if (off > GL_PY_BYTES)
			off = GL_PY_BYTES;
	}
	if (mode == GL_STACK_FP) {
		n = bpf_get_stack(ctx, b->data + off, GL_MAX_FP_FRAMES * 8, BPF_F_USER_STACK);
		if (n < 0) {
			stat_inc(GL_STAT_STACK_ERROR);
			n = 0;
		}
		r->nr_ips = n / 8;
		off += r->nr_ips * 8;
	} else if (mode == GL_STACK_DWARF) {
		__u64 want = stack_want(task, inf, r->sp);

		r->cache_id = scache_lookup(task, pid_tgid, r, want, b->data + off);
		if (r->cache_id)
			goto send; /* the Python frames and the id: no copy */
		if (emit_stack_direct(b, off, want, task, pid_tgid))
			return;
		r->stack_bytes = copy_user_stack(r->sp, want, b->data + off);
		off += r->stack_bytes;
	}
send:
	size = sizeof(*r) + off;
	if (size > sizeof(*r) + sizeof(b->data))
		return;
	fill_hdr(&r->hdr, GL_REC_STACK, size, task, pid_tgid);
	if (bpf_ringbuf_output(&events, b, size, rb_flags(r->hdr.ts)))
		stat_inc(GL_STAT_LOST_STACK);
}

/*
 * The CPU's scratch buffer (and the Python walk's, py_scratch) is shared by
 * every program that runs on the CPU. A uprobe's program is preemptible on
 * kernels that preempt kernel code (preempt=full or lazy): the task that runs
 * next on the CPU may take a stack while this one is half built. It finds the
 * buffer busy and takes none (counted as a stack error, which the reports
 * show), rather than write over a record being built.
 */
static __always_inline void emit_stack(struct pt_regs *ctx, struct task_struct *task,
				       struct gl_inflight *inf, __u64 pid_tgid, __u64 seq,
				       __u32 api, bool at_entry, __u32 mode)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct gl_stack_buf *b = bpf_map_lookup_elem(&scratch, &cpu);

	if (!b)
		return;
	if (__sync_val_compare_and_swap(&b->busy, 0, 1)) {
		stat_inc(GL_STAT_STACK_ERROR);
		return;
	}
	build_stack(b, ctx, task, inf, pid_tgid, seq, api, at_entry, mode);
	/* only tasks on this CPU contend, and a context switch orders the stores */
	*(volatile __u64 *)&b->busy = 0;
}

#endif /* GPULEAK_STACK_BPF_H */
