/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tiers.bpf.h - the tensor tier's window boundary, run by user space.
 *
 * PyTorch's allocator probes are attached only in windows (user space's
 * tiers module). Between windows the frees of the blocks a window saw are not
 * seen, so before the next window opens the kernel's books forget every
 * tensor block they hold, as user space's do: each window starts from what it
 * sees. Driver-level allocations are not touched.
 */
#ifndef GPULEAK_TIERS_BPF_H
#define GPULEAK_TIERS_BPF_H

/* What forget_tensors did, read back by user space. */
__u64 tiers_forgotten = 0;

static long forget_one(struct bpf_map *map, struct gl_alloc_key *k, struct gl_alloc_val *v,
		       void *unused)
{
	struct gl_proc_stats *st;
	__u32 tgid = k->tgid;

	if (k->kind != GL_KIND_TORCH)
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
 * Run by user space (BPF_PROG_RUN) while the allocator probes are detached:
 * drops every tensor block from allocs and from its process's counters.
 */
SEC("syscall")
int forget_tensors(void *ctx)
{
	tiers_forgotten = 0;
	bpf_for_each_map_elem(&allocs, forget_one, NULL, 0);
	return 0;
}

#endif /* GPULEAK_TIERS_BPF_H */
