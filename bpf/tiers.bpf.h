/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tiers.bpf.h - the tensor tier's helpers: forgetting tensor blocks at a window's
 * boundary (forget_tensors in gpuleak.bpf.c runs forget_one), and sampling their
 * stacks.
 *
 * PyTorch's allocator probes are attached only in windows (user space's
 * tiers module). Between windows the frees of the blocks a window saw are not
 * seen, so before the next window opens the kernel's books forget every
 * tensor block they hold, as user space's do: each window starts from what it
 * sees. Driver-level allocations are not touched.
 */
#ifndef GPULEAK_TIERS_BPF_H
#define GPULEAK_TIERS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "call.bpf.h" /* class_slot */

/* What forget_tensors did, read back by user space. */
__u64 tiers_forgotten = 0;
/* The process whose blocks forget_tensors drops, set by user space first; 0: every process. */
__u32 tiers_forget_tgid = 0;

static long forget_one(struct bpf_map *map, struct gl_alloc_key *k, struct gl_alloc_val *v,
		       void *unused)
{
	struct gl_proc_stats *st;
	__u32 tgid = k->tgid;

	if (k->kind != GL_KIND_TORCH || (tiers_forget_tgid && tgid != tiers_forget_tgid))
		return 0;
	st = bpf_map_lookup_elem(&procs, &tgid);
	if (st && v->cls < GL_NR_CLASSES) {
		__sync_fetch_and_add(&st->bytes[class_slot(v->cls)], -(__s64)v->size);
		__sync_fetch_and_add(&st->allocs[class_slot(v->cls)], -1);
	}
	bpf_map_delete_elem(map, k);
	tiers_forgotten++;
	return 0;
}

/*
 * Byte-weighted sampling of tensor-block stacks, as the heap profilers of Go,
 * tcmalloc and jemalloc do: the bytes allocated form a Poisson process of rate
 * 1/R, and a block gets a stack when a sample point falls in it, with
 * probability 1 - exp(-size/R). A countdown per CPU holds the bytes until the
 * next point; it is drawn from an exponential distribution of mean R through
 * a quantile table user space fills (targ_sample_exp[i] = R * -ln((i + 0.5) /
 * GL_SAMPLE_EXP_N)). Every block is still booked: totals stay exact.
 */
const volatile __u64 targ_sample_bytes = 0; /* R; 0: every block gets a stack */
const volatile __u64 targ_sample_exp[GL_SAMPLE_EXP_N] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} sample_left SEC(".maps");

/* Whether the block of size bytes gets a stack. */
static __always_inline bool sample_take(__u64 size)
{
	__u32 zero = 0;
	__s64 *left;

	if (!targ_sample_bytes)
		return true;
	left = bpf_map_lookup_elem(&sample_left, &zero);
	if (!left)
		return true;
	*left -= (__s64)size;
	if (*left > 0)
		return false;
	/* memoryless: the next point is a fresh draw past this block */
	*left = targ_sample_exp[bpf_get_prandom_u32() & (GL_SAMPLE_EXP_N - 1)];
	return true;
}

#endif /* GPULEAK_TIERS_BPF_H */
