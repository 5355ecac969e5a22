/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * call.bpf.h - a returning call as the in-kernel books see it (struct
 * gl_call_ctx): its process's counters in procs, its record in the ring
 * buffer, reading its user-memory results, and the rules the books share:
 * which kinds and classes go with a context, whether a context was torn down
 * since the call entered, and the barrier between the two sides of a teardown.
 */
#ifndef GPULEAK_CALL_BPF_H
#define GPULEAK_CALL_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "stack.bpf.h" /* fill_hdr */

struct gl_call_ctx {
	struct gl_slot *slot;
	struct gl_inflight *inf;
	struct task_struct *task;
	struct gl_proc_stats *st;
	struct gl_api_desc desc;
	__u64 pid_tgid;
	__u64 ctx; /* context current on the thread */
	__u64 id;  /* the allocation booked or freed (gl_call.id) */
	__s32 dev;
	__u32 api;
	int rc;
};

static __always_inline __u32 tgid_of(struct gl_call_ctx *c)
{
	return c->pid_tgid >> 32;
}

/* The value a process's counters start from (never written: a stack copy would
 * cost every program that books a call 216 bytes of its 512). */
static const struct gl_proc_stats proc_zero = {};

/*
 * The counters of process tgid, created on its first call. An entry whose
 * start_time is 0 is being created by another of its threads, which will set
 * it; one with another start time is a reused PID whose exit was missed, and
 * is replaced.
 */
static __always_inline struct gl_proc_stats *proc_stats(struct task_struct *task, __u32 tgid)
{
	struct gl_proc_stats *st = bpf_map_lookup_elem(&procs, &tgid);
	__u64 start = proc_start_time(task);
	long err;

	if (st && st->start_time == start)
		return st;
	if (!st || st->start_time) {
		if (st)
			bpf_map_delete_elem(&procs, &tgid);
		err = bpf_map_update_elem(&procs, &tgid, &proc_zero, BPF_NOEXIST);
		if (err && err != -EEXIST) {
			stat_inc(GL_STAT_PROC_TABLE_FULL);
			return NULL;
		}
		st = bpf_map_lookup_elem(&procs, &tgid);
		if (!st)
			return NULL;
	}
	__sync_val_compare_and_swap(&st->start_time, 0, start);
	return st->start_time == start ? st : NULL;
}

/* A zeroed call record of c in the ring buffer, header and seq set; NULL (counted) if full. */
static __always_inline struct gl_call *reserve_call(struct gl_call_ctx *c)
{
	struct gl_call *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		stat_inc(GL_STAT_LOST_CALL);
		return NULL;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, GL_REC_CALL, sizeof(*r), c->task, c->pid_tgid);
	r->seq = c->slot->seq;
	return r;
}

static __always_inline void emit_call(struct gl_call_ctx *c, __u8 op, __u8 kind, __u64 key,
				      __u64 bytes, __u8 cls, __u16 flags, __s16 dev)
{
	struct gl_call *r = reserve_call(c);

	if (!r)
		return;
	r->key = key;
	r->bytes = bytes;
	r->ctx = c->ctx;
	r->teardowns = c->slot->teardowns;
	r->rc = c->rc;
	r->api = c->api;
	r->op = op;
	r->cls = cls;
	r->dev = dev;
	r->flags = flags;
	r->kind = kind;
	r->id = c->id;
	/* a failure is read at once: it may hold its process (GL_CALL_HELD) */
	bpf_ringbuf_submit(r, op == GL_OP_FAIL ? BPF_RB_FORCE_WAKEUP : rb_flags(r->hdr.ts));
}

/* A class as an index the verifier can bound (the compiler drops a plain mask). */
static __always_inline __u32 class_slot(__u8 cls)
{
	__u32 i = cls;

	asm volatile("%0 &= 7" : "+r"(i));
	return i;
}

static __always_inline void count(struct gl_proc_stats *st, __u8 cls, __s64 bytes, __s64 n)
{
	if (!st || cls >= GL_NR_CLASSES)
		return;
	__sync_fetch_and_add(&st->bytes[class_slot(cls)], bytes);
	__sync_fetch_and_add(&st->allocs[class_slot(cls)], n);
}

/*
 * count(), whose second atomic fetches: also a full memory barrier (see
 * full_barrier()), so that an allocation's booking needs no atomic of its own.
 * False when nothing was counted (no process counters): no barrier either.
 */
static __always_inline bool count_fenced(struct gl_proc_stats *st, __u8 cls, __s64 bytes, __s64 n)
{
	__s64 was;

	if (!st || cls >= GL_NR_CLASSES)
		return false;
	__sync_fetch_and_add(&st->bytes[class_slot(cls)], bytes);
	was = __sync_fetch_and_add(&st->allocs[class_slot(cls)], n);
	asm volatile("" : : "r"(was) : "memory");
	return true;
}

static __always_inline __u64 read_user_u64(__u64 addr, bool narrow)
{
	__u64 v = 0;
	__u32 v32 = 0;

	if (narrow) {
		if (bpf_probe_read_user(&v32, sizeof(v32), (void *)addr))
			stat_inc(GL_STAT_READ_ERROR);
		return v32;
	}
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		stat_inc(GL_STAT_READ_ERROR);
	return v;
}

/* Kinds whose allocations belong to a context and go with it (the rule of drop_one()). */
static __always_inline bool kind_in_ctx(__u32 kind)
{
	return kind != GL_KIND_HANDLE && kind != GL_KIND_MAPPING && kind != GL_KIND_VA;
}

/* Memory classes, as dropped_bytes and untracked_bytes count them. */
static __always_inline bool cls_is_memory(__u8 cls)
{
	return cls != GL_CLASS_ADDRESS && cls != GL_CLASS_IMPORTED && cls < GL_NR_CLASSES;
}

/*
 * Whether context ctx was torn down after this call entered. Read after the
 * call's allocation is in the books and a full barrier: a teardown that this
 * read of ctx_teardowns does not see walks the books after it counted itself,
 * and meets the allocation there.
 */
static __always_inline bool ctx_gone(struct gl_call_ctx *c, __u64 ctx)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = ctx };
	__u64 *dead;

	if (!ctx || *(volatile __u64 *)&ctx_teardowns == c->slot->teardowns)
		return false;
	dead = bpf_map_lookup_elem(&ctx_dead, &k);
	return dead && *dead > c->slot->teardowns;
}

/*
 * Whether allocation v went with a teardown of its context: its call entered
 * before the teardown began, which a later allocation in a new context at the
 * same address did not.
 */
static __always_inline bool went_with_ctx(struct gl_call_ctx *c, const struct gl_alloc_val *v)
{
	struct gl_ctx_key k = { .tgid = tgid_of(c), .ctx = v->ctx };
	__u64 *dead;

	if (!v->ctx)
		return false;
	dead = bpf_map_lookup_elem(&ctx_dead, &k);
	return dead && *dead > v->teardowns;
}

/*
 * A full memory barrier, between a write to one map and a read of another that
 * another CPU does the other way round (an atomic that fetches: lock-prefixed
 * on x86, acquire-release on arm64). A hash map's update ends with a plain
 * store, which a later load may pass.
 */
static __always_inline void full_barrier(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&alloc_ids, &zero), v;

	if (!n)
		return;
	v = __sync_fetch_and_add(n, 0);
	asm volatile("" : : "r"(v) : "memory");
}

#endif /* GPULEAK_CALL_BPF_H */
