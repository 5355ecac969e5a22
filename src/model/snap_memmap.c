// SPDX-License-Identifier: BSD-2-Clause
/*
 * snap_memmap.c - PyTorch's segments and blocks of a process, by address, in
 * its snapshot (snapshot_opts.memory_map): the segments are the device
 * allocations PyTorch's caching allocator asked the driver for (their stacks
 * pass through libc10_cuda), the blocks its tensors' allocations, each placed
 * in the segment that holds it.
 */
#include <errno.h>
#include <stdlib.h>
#include "books/books.h"
#include "snapshot_int.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct snap_seg *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_block(const void *a, const void *b)
{
	const struct snap_block *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The segment holding [addr, addr + size) among segs sorted by address, or NULL. */
static struct snap_seg *holder(struct snap_seg **by_addr, uint32_t n, uint64_t addr, uint64_t size)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) { /* the first segment starting past addr */
		uint32_t mid = lo + (hi - lo) / 2;

		if (by_addr[mid]->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	struct snap_seg *s = by_addr[lo - 1];

	return addr + size <= s->addr + s->size ? s : NULL;
}

static int cmp_seg_addr(const void *a, const void *b)
{
	const struct snap_seg *x = *(struct snap_seg *const *)a, *y = *(struct snap_seg *const *)b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Blocks in segment order: each segment's blocks together, by address. */
static int place_blocks(struct snap_memmap *m, struct snap_block *found, uint32_t nfound)
{
	struct snap_seg **by_addr = calloc(m->nsegs ? m->nsegs : 1, sizeof(*by_addr));
	uint32_t *seg_of = calloc(nfound ? nfound : 1, sizeof(*seg_of));
	int err = 0;

	if (!by_addr || !seg_of) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < m->nsegs; i++)
		by_addr[i] = &m->segs[i];
	qsort(by_addr, m->nsegs, sizeof(*by_addr), cmp_seg_addr);
	for (uint32_t i = 0; i < nfound; i++) {
		struct snap_seg *s = holder(by_addr, m->nsegs, found[i].addr, found[i].size);

		seg_of[i] = s ? (uint32_t)(s - m->segs) : UINT32_MAX;
		if (s) {
			s->nblocks++;
		} else {
			m->outside_blocks++;
			m->outside_bytes += found[i].size;
		}
	}
	for (uint32_t i = 0, at = 0; i < m->nsegs; i++) {
		m->segs[i].block0 = at;
		at += m->segs[i].nblocks;
		m->segs[i].nblocks = 0;
	}
	for (uint32_t i = 0; i < nfound; i++) {
		struct snap_seg *s;

		if (seg_of[i] == UINT32_MAX)
			continue;
		s = &m->segs[seg_of[i]];
		m->blocks[s->block0 + s->nblocks++] = found[i];
	}
	m->nblocks = nfound - m->outside_blocks;
	for (uint32_t i = 0; i < m->nsegs; i++)
		qsort(m->blocks + m->segs[i].block0, m->segs[i].nblocks, sizeof(*m->blocks),
		      cmp_block);
out:
	free(by_addr);
	free(seg_of);
	return err;
}

int snap_memmap__fill(struct books *b, struct proc *proc, struct snap_proc *sp)
{
	struct snap_memmap *m = &sp->memmap;
	uint32_t *torch_ids = calloc(sp->nstacks ? sp->nstacks : 1, sizeof(*torch_ids)), nids = 0;
	const struct alloc_key *k;
	const struct alloc_val *v;
	struct snap_block *found = NULL;
	uint32_t nfound = 0, cap_segs = 0, cap_found = 0;
	size_t it = 0;
	int err = -ENOMEM;

	if (!torch_ids)
		return -ENOMEM;
	if (!proc__live(proc) && !proc__next_held(proc, &it, &k)) {
		free(torch_ids);
		return 0; /* a retired process keeps no table (unless kept: books_opts) */
	}
	it = 0;
	for (uint32_t i = 0; i < sp->nstacks; i++)
		if (sp->stacks[i].torch_segment)
			torch_ids[nids++] = sp->stacks[i].id;
	qsort(torch_ids, nids, sizeof(*torch_ids), cmp_u32);
	while ((v = proc__next_held(proc, &it, &k))) {
		if (k->kind == GL_KIND_DPTR && v->cls == GL_CLASS_DEVICE &&
		    bsearch(&v->stack, torch_ids, nids, sizeof(*torch_ids), cmp_u32)) {
			if (m->nsegs == cap_segs) {
				struct snap_seg *n;

				cap_segs = cap_segs ? cap_segs * 2 : 16;
				n = realloc(m->segs, cap_segs * sizeof(*n));
				if (!n)
					goto out;
				m->segs = n;
			}
			m->segs[m->nsegs++] = (struct snap_seg){ .addr = k->key,
								 .size = v->size,
								 .stack = v->stack,
								 .dev = v->dev };
		} else if (k->kind == GL_KIND_TORCH && v->cls == GL_CLASS_TORCH_BLOCK) {
			if (nfound == cap_found) {
				struct snap_block *n;

				cap_found = cap_found ? cap_found * 2 : 64;
				n = realloc(found, cap_found * sizeof(*n));
				if (!n)
					goto out;
				found = n;
			}
			found[nfound++] = (struct snap_block){ k->key, v->size, v->stack };
		}
	}
	if (m->nsegs)
		qsort(m->segs, m->nsegs, sizeof(*m->segs), cmp_seg);
	m->blocks = calloc(nfound ? nfound : 1, sizeof(*m->blocks));
	if (!m->blocks || place_blocks(m, found, nfound))
		goto out;
	m->blocks_complete = books__torch_map_complete(b) && sp->memory.blocks_seen;
	m->valid = true;
	err = 0;
out:
	free(found);
	free(torch_ids);
	return err;
}
