/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_int.h - what the heap walk (heap.c) and the PyTorch layout
 * (torch.c) share: the walk's state and its one bounded reader.
 */
#ifndef GL_CENSUS_INT_H
#define GL_CENSUS_INT_H

#include "census.h"
#include "util/htab.h"

struct census_walk {
	const struct census_mem *m;
	const struct census_py *py;
	const struct census_caps *caps;
	struct census *out;
	uint64_t start_ns;
	uint64_t reads;
	bool stopped;	    /* the cap on bytes or time was reached: no more reads */
	struct htab *types; /* type address -> struct census_type */
	struct htab *seen;  /* object address -> node index (uint32_t) */
	struct census_node *nodes;
	size_t nr_nodes, cap_nodes;
	char *labels; /* NUL-separated labels; a node's label is an offset */
	size_t labels_len, labels_cap;
	struct htab *tensor_of; /* object address -> index in tensor_objs (uint32_t) */
	uint64_t *tensor_objs;
	uint32_t *tensor_node;	/* the node that first reached it, UINT32_MAX if none */
	uint8_t *tensor_extras; /* further holders kept per tensor */
	size_t nr_tensor_objs, cap_tensor_objs, cap_tensor_node, cap_tensor_extras;
	struct census_extra *extras; /* further holders of tensors */
	size_t nr_extras, cap_extras;
	uint64_t *modules;
	size_t nr_modules, cap_modules;
};

/*
 * Reads exactly len bytes at addr, counting them against the caps. Returns 0;
 * -EFAULT when fewer bytes could be read; -E2BIG once the cap on bytes or
 * time is reached (w->out->truncated_by names it; every later read fails too).
 */
int census__rd(struct census_walk *w, uint64_t addr, void *buf, size_t len);
int census__rd64(struct census_walk *w, uint64_t addr, uint64_t *v);

/* Reads the tensors' layout and figures (torch.c): fills w->out's tensors. */
int census__tensors(struct census_walk *w);

#endif /* GL_CENSUS_INT_H */
