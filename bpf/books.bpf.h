/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * books.bpf.h - what a returning call does to the exact in-kernel books.
 *
 * allocs holds every outstanding allocation, handle, mapping and reservation
 * of every traced process with its size; procs holds per-process counters.
 * Only successful calls change them. Each change is also written to the ring
 * buffer (struct gl_call) so that user space can attribute it to a stack;
 * comparing user space's totals with procs proves no record was lost.
 *
 * A driver hands an address freed on one thread to an allocation on another
 * at once, before the free has returned: the free's entry therefore takes its
 * key out of allocs (claim_key()), and its return books what it took. A
 * context torn down while other threads call into it: a call that entered
 * before the teardown and returns after it acted on memory the driver has
 * since dropped with the context (ctx_dead, ctx_gone()).
 *
 * This file applies a call and closes a process's books; the call's context
 * and record are in call.bpf.h, the allocs map's changes in allocs.bpf.h,
 * contexts and teardowns in contexts.bpf.h, CUDA arrays' sizes in arrays.bpf.h.
 */
#ifndef GPULEAK_BOOKS_BPF_H
#define GPULEAK_BOOKS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "stack.bpf.h" /* fill_hdr */
#include "call.bpf.h"
#include "allocs.bpf.h"
#include "arrays.bpf.h"
#include "contexts.bpf.h"

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2

struct mem_location {
	__s32 type, id;
};

/*
 * Whether a call's record names the device of the thread's context (a lookup in
 * ctx_dev): a failure's and most allocations'. A free's names the device of
 * what it freed; VMM calls and context calls name their own or none.
 */
static __always_inline bool uses_ctx_device(__u8 role, int rc)
{
	if (role >= GL_ROLE_CTX_CREATE)
		return false;
	if (rc != CUDA_SUCCESS)
		return true;
	switch (role) {
	case GL_ROLE_ALLOC:
	case GL_ROLE_ALLOC_PITCH:
	case GL_ROLE_HOST_REGISTER:
	case GL_ROLE_IMPORT:
	case GL_ROLE_IPC_OPEN:
	case GL_ROLE_ARRAY_CREATE:
	case GL_ROLE_ARRAY3D_CREATE:
	case GL_ROLE_MIPMAP_CREATE: return true;
	default: return false;
	}
}

/*
 * --census-on-oom: a process whose allocation ran out of memory is held (SIGSTOP, taken
 * before the call's caller sees the error), so that user space can read its heap as it
 * was at the failure; it goes on at once if the failure is one PyTorch's retry may save,
 * else after the census, and at the hold's deadline whatever happens.
 */
static __always_inline __u16 hold_at_failure(struct gl_call_ctx *c)
{
	__u32 zero = 0;

	/* key 0 in held: the tracer is going away, hold nothing more */
	if (!targ_stop_on_oom || c->rc != CUDA_ERROR_OUT_OF_MEMORY ||
	    bpf_map_lookup_elem(&held, &zero))
		return 0;
	return hold_current(c->task, tgid_of(c), bpf_ktime_get_ns()) > 0 ? GL_CALL_HELD : 0;
}

/* Apply a returning call to the books and tell user space what changed. */
static __always_inline void apply_call(struct gl_call_ctx *c)
{
	__u64 *a = c->slot->args;
	bool v1 = c->desc.flags & GL_API_V1;
	bool v1_size = c->desc.flags & (GL_API_V1 | GL_API_V1_SIZE);
	__u8 role = c->desc.role, cls = c->desc.cls, kind = c->desc.kind;
	__u32 d = c->inf->ctx_depth;
	__u64 key, size;

	c->ctx = d > 0 ? c->inf->ctx[(d - 1) & (GL_MAX_CTX - 1)] : 0;
	c->dev = uses_ctx_device(role, c->rc) ? ctx_device(c) : -1;

	if (role >= GL_ROLE_CTX_CREATE) {
		if (c->rc == CUDA_SUCCESS)
			apply_ctx_call(c);
		return;
	}

	if (c->rc != CUDA_SUCCESS) {
		switch (role) {
		case GL_ROLE_ALLOC:
		case GL_ROLE_ALLOC_PITCH:
		case GL_ROLE_HOST_REGISTER:
		case GL_ROLE_VMM_CREATE:
		case GL_ROLE_ARRAY_CREATE:
		case GL_ROLE_ARRAY3D_CREATE:
		case GL_ROLE_MIPMAP_CREATE:
			c->st = proc_stats(c->task, tgid_of(c));
			if (c->st)
				__sync_fetch_and_add(&c->st->failures, 1);
			size = role == GL_ROLE_ALLOC_PITCH ? a[2] * a[3] : a[1];
			if (role >= GL_ROLE_ARRAY_CREATE)
				size = 0;
			emit_call(c, GL_OP_FAIL, kind, 0, v1_size ? (__u32)size : size, cls,
				  hold_at_failure(c), c->dev);
			break;
		default:
			/* a failed free changes nothing (but see book_failed_free()) */
			emit_call(c, GL_OP_NONE, kind, a[0], 0, cls, book_failed_free(c), c->dev);
		}
		return;
	}

	switch (role) {
	case GL_ROLE_ALLOC:
		key = read_user_u64(a[0], v1);
		book_alloc(c, kind, key, v1_size ? (__u32)a[1] : a[1], cls, c->dev);
		break;
	case GL_ROLE_ALLOC_PITCH:
		key = read_user_u64(a[0], v1);
		size = read_user_u64(a[1], v1) * (v1 ? (__u32)a[3] : a[3]);
		book_alloc(c, kind, key, size, cls, c->dev);
		break;
	case GL_ROLE_HOST_REGISTER: book_alloc(c, kind, a[0], a[1], cls, c->dev); break;
	case GL_ROLE_FREE:
		key = v1 ? (__u32)a[0] : a[0];
		if (key == 0 && kind == GL_KIND_DPTR)
			break; /* cuMemFree(0) is not a free */
		book_free(c, kind, key);
		break;
	case GL_ROLE_VMM_CREATE: {
		struct mem_location loc = {};
		__s16 dev = -1;

		/* CUmemAllocationProp: type, requestedHandleTypes, location {type, id} */
		bpf_probe_read_user(&loc, sizeof(loc), (void *)(a[2] + 8));
		if (loc.type == 1)
			dev = loc.id;
		else if (loc.type >= 2)
			cls = GL_CLASS_HOST_PINNED;
		book_alloc(c, kind, read_user_u64(a[0], false), a[1], cls, dev);
		break;
	}
	case GL_ROLE_VMM_RELEASE:
		/* more than one reference at entry: the return takes one; else what the entry
		 * took (or found absent) is freed */
		if (c->slot->claim == GL_CLAIM_NONE)
			handle_unref(c, a[0]);
		else
			book_free(c, GL_KIND_HANDLE, a[0]);
		break;
	case GL_ROLE_VMM_MAP: {
		struct gl_alloc_key k = { .tgid = tgid_of(c),
					  .kind = GL_KIND_MAPPING,
					  .key = a[0] };
		struct gl_alloc_val v = { .size = a[1],
					  .handle = a[3],
					  .refs = 1,
					  .cls = GL_NR_CLASSES,
					  .dev = -1 };

		handle_ref(c, a[3]);
		if (bpf_map_update_elem(&allocs, &k, &v, BPF_ANY))
			stat_inc(GL_STAT_ALLOC_TABLE_FULL);
		emit_call(c, GL_OP_NONE, kind, a[0], a[1], cls, 0, -1);
		break;
	}
	case GL_ROLE_VMM_UNMAP: {
		struct unmap_walk w = { .c = c, .cur = a[0], .end = a[0] + a[1] };

		unmap_claimed(c, &w);
		bpf_loop(1 << 16, unmap_one, &w, 0);
		break;
	}
	case GL_ROLE_VMM_RETAIN: handle_ref(c, read_user_u64(a[0], false)); break;
	case GL_ROLE_VA_RESERVE:
		book_alloc(c, kind, read_user_u64(a[0], false), a[1], cls, -1);
		break;
	case GL_ROLE_VA_FREE: book_free(c, kind, a[0]); break;
	case GL_ROLE_IMPORT:
	case GL_ROLE_IPC_OPEN:
		book_alloc(c, kind, read_user_u64(a[0], false), 0, cls, c->dev);
		break;
	case GL_ROLE_ARRAY_CREATE:
	case GL_ROLE_ARRAY3D_CREATE:
	case GL_ROLE_MIPMAP_CREATE:
		size = array_bytes(a[1], role != GL_ROLE_ARRAY_CREATE,
				   role == GL_ROLE_MIPMAP_CREATE ? a[2] : 1);
		book_alloc(c, kind, read_user_u64(a[0], false), size, cls, c->dev);
		break;
	}
}

static __always_inline void emit_proc(struct task_struct *task, __u32 tgid, __u32 event, __u32 ppid,
				      struct gl_proc_stats *st)
{
	struct gl_proc *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		stat_inc(GL_STAT_LOST_PROC);
		return;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, GL_REC_PROC, sizeof(*r), task, ((__u64)tgid << 32) | task->pid);
	r->event = event;
	r->ppid = ppid;
	BPF_CORE_READ_STR_INTO(&r->comm, task, group_leader, comm);
	if (st)
		r->stats = *st;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static long drop_ctx_one(struct bpf_map *map, struct gl_ctx_key *k, __s32 *v, __u32 *tgid)
{
	if (k->tgid == *tgid)
		bpf_map_delete_elem(map, k);
	return 0;
}

/* Exit or exec: report the final books, then drop everything the process held. */
static __always_inline void close_books(struct task_struct *task, __u32 tgid, __u32 event)
{
	struct gl_proc_stats *st = bpf_map_lookup_elem(&procs, &tgid);
	struct drop_walk w = { .tgid = tgid, .all_kinds = 1, .dev = -1 };

	if (!st && !bpf_map_lookup_elem(&targets, &tgid))
		return;
	if (st && event == GL_PROC_EXIT)
		st->exit_time = bpf_ktime_get_ns();
	emit_proc(task, tgid, event,
		  event == GL_PROC_EXIT ? BPF_CORE_READ(task, exit_code) :
					  BPF_CORE_READ(task, group_leader, real_parent, tgid),
		  st);
	if (!st)
		return;
	drop_books(NULL, &w);
	bpf_for_each_map_elem(&ctx_dev, drop_ctx_one, &tgid, 0);
	if (event != GL_PROC_EXIT) {
		__u64 start = st->start_time;

		__builtin_memset(st, 0, sizeof(*st));
		st->start_time = start;
	}
}

#endif /* GPULEAK_BOOKS_BPF_H */
