/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * torch.bpf.h - PyTorch's caching allocator, seen through its USDT probes.
 *
 * The CUDA driver only sees the allocator's segments; a tensor block that
 * leaks inside a segment never reaches it. libc10_cuda.so announces every
 * block with pytorch:malloc (ptr, device, size, stream) and pytorch:free
 * (ptr), each behind a semaphore that libbpf's USDT attachment raises. The
 * blocks are booked as class torch_block, with the same stacks as driver
 * calls. There is no entry/return pair: one probe, one record of each kind.
 */
#ifndef GPULEAK_TORCH_BPF_H
#define GPULEAK_TORCH_BPF_H

#include <bpf/usdt.bpf.h>

/* A call context for a probe that is its own entry and return. */
static __always_inline struct gl_inflight *torch_begin(struct gl_call_ctx *c,
						       struct gl_slot *slot, __u32 api)
{
	struct gl_inflight *inf;

	c->pid_tgid = bpf_get_current_pid_tgid();
	if (!is_target(c->pid_tgid >> 32))
		return NULL;
	count_call(api);
	c->task = bpf_get_current_task_btf();
	inf = bpf_task_storage_get(&inflight, c->task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!inf) {
		stat_inc(GL_STAT_INFLIGHT_FULL);
		return NULL;
	}
	slot->seq = ++inf->seq;
	slot->ts = bpf_ktime_get_ns();
	slot->api = api;
	c->slot = slot;
	c->inf = inf;
	c->api = api;
	c->desc = apis[api];
	c->dev = -1;
	return inf;
}

/* pytorch:malloc(ptr, device, size, stream): a tensor block handed out. */
SEC("usdt")
int BPF_USDT(torch_malloc, void *ptr, long device, long size, long stream)
{
	struct gl_call_ctx c = {};
	struct gl_slot slot = {};

	if (!torch_begin(&c, &slot, GL_API_pytorch_malloc) || !ptr || size <= 0)
		return 0;
	/* tensors are many: --torch-stacks python keeps their Python frames only,
	 * --tensor-sample a byte-weighted sample of their stacks */
	if (targ_stack_mode != GL_STACK_NONE && sample_take(size))
		emit_stack(ctx, c.task, c.pid_tgid, slot.seq, c.api, false,
			   targ_torch_python_only ? GL_STACK_NONE : targ_stack_mode);
	book_alloc(&c, GL_KIND_TORCH, (__u64)ptr, size, GL_CLASS_TORCH_BLOCK, (__s16)device);
	return 0;
}

/* pytorch:free(ptr): the block went back to the allocator's cache. */
SEC("usdt")
int BPF_USDT(torch_free, void *ptr)
{
	struct gl_call_ctx c = {};
	struct gl_slot slot = {};

	struct gl_alloc_key k = { .kind = GL_KIND_TORCH, .key = (__u64)ptr };

	if (!torch_begin(&c, &slot, GL_API_pytorch_free) || !ptr)
		return 0;
	/* a block whose malloc was not seen (before attach, between tensor windows,
	 * in a window's tail) tells nothing: no record, no count */
	k.tgid = tgid_of(&c);
	if (!bpf_map_lookup_elem(&allocs, &k))
		return 0;
	book_free(&c, GL_KIND_TORCH, (__u64)ptr);
	return 0;
}

#endif /* GPULEAK_TORCH_BPF_H */
