/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_int.h - what the heap walk (heap.c), the object reader (pytypes.c),
 * the holders and groups (holders.c) and the PyTorch layout (torch.c) share:
 * the walk's state, its nodes and its one bounded reader.
 */
#ifndef GL_CENSUS_INT_H
#define GL_CENSUS_INT_H

#include <string.h>
#include "census.h"
#include "util/htab.h"

#define MAX_DEPTH 64	   /* of a path from its root */
#define NO_NODE UINT32_MAX /* no node: a root's parent, a tensor no path reaches */

/* Type flags (Include/object.h) */
#define TPF_MANAGED_DICT (1UL << 4)
#define TPF_INLINE_VALUES (1UL << 2) /* 3.13 */
#define TPF_HEAPTYPE (1UL << 9)
#define TPF_HAVE_GC (1UL << 14)
#define TPF_LIST_SUBCLASS (1UL << 25)
#define TPF_TUPLE_SUBCLASS (1UL << 26)
#define TPF_DICT_SUBCLASS (1UL << 29)
#define TPF_TYPE_SUBCLASS (1UL << 31)

/* PyTypeObject and PyHeapTypeObject fields (the same in 3.11 to 3.13, but ht_cached_keys) */
#define TP_NAME 24
#define TP_BASICSIZE 32
#define TP_FLAGS 168
#define TP_DICT 264
#define TP_DICTOFFSET 288
#define TP_MRO 344
#define TP_READ 352

enum kind {
	K_OTHER,
	K_DICT,
	K_LIST,
	K_TUPLE,
	K_MODULE,
	K_CELL,
	K_FUNC,
	K_TYPE,
	K_TENSOR,
	K_STR,
	K_INT
};

struct census_type {
	uint8_t kind;
	bool inst_dict; /* instances keep attributes in a __dict__ (or managed values) */
	uint64_t flags;
	int64_t dictoffset, basicsize;
	uint64_t cached_keys;
	uint64_t not_entered; /* references to instances the walk did not follow */
	char name[48];
};

struct census_node {
	uint64_t addr;
	uint32_t parent; /* NO_NODE for a root */
	uint32_t label;	 /* offset in labels */
	uint8_t kind;
	bool attrs; /* a __dict__: its keys are attributes */
};

struct census_extra {
	uint32_t tensor; /* index in tensor_objs */
	uint32_t parent; /* node */
	uint32_t label;
};

/* A little-endian word of a buffer read from the target. */
static inline uint64_t w64(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

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

/* pytypes.c */
/* A C string of the target, at most len - 1 printable ASCII characters. 0 or -EFAULT. */
int census__read_cstr(struct census_walk *w, uint64_t addr, char *buf, size_t len);
/* The type at addr (or of the object obj), read once and cached; NULL if unreadable. */
const struct census_type *census__type_of(struct census_walk *w, uint64_t addr);
const struct census_type *census__obj_type(struct census_walk *w, uint64_t obj);
/* A compact ASCII str into buf; 0, -EFAULT, or -ENOTSUP (another kind, too long). */
int census__read_str(struct census_walk *w, uint64_t obj, char *buf, size_t len);
/* A small int (one 30-bit digit); 0, -EFAULT or -ENOTSUP. */
int census__read_int(struct census_walk *w, uint64_t obj, long long *v);

/* holders.c: each tensor's paths (and its graph's), then the groups. 0 or -ENOMEM. */
int census__fill_holders(struct census_walk *w);
int census__build_groups(struct census_walk *w);

#endif /* GL_CENSUS_INT_H */
