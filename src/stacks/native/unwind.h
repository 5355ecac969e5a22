/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * unwind.h - turning a stack record into instruction addresses, innermost
 * first.
 *
 * FP records come unwound by the kernel. DWARF records (registers and a copy
 * of the user stack) are unwound here with the CFI of the process's modules;
 * results are cached per process so that a call site seen again costs a
 * lookup, not an unwinding.
 */
#ifndef GL_UNWIND_H
#define GL_UNWIND_H

#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "stacks/stacks.h"

#define UNWIND_MAX_FRAMES 256

struct unwinder;
struct modules;

/* What the unwinder did with DWARF records. */
struct unwind_stats {
	uint64_t stacks;    /* DWARF records unwound */
	uint64_t hits;	    /* answered from the cache (kernel_hits, shape_hits included) */
	uint64_t misses;    /* unwound with libdwfl */
	uint64_t uncached;  /* misses whose result could not be cached */
	uint64_t fp_walks;  /* no CFI for the process (no address map, no module): rbp chain */
	uint64_t builds;    /* per-process Dwfl built (first record, or the address map changed) */
	uint64_t published; /* cache entries written to BPF's stack cache */
	uint64_t publish_failed; /* entries not written to BPF (map full, out of ids): copied */
	uint64_t kernel_hits;	 /* records BPF answered with a cache id (no copy) */
	uint64_t shape_hits;	 /* copies answered from what BPF holds, as BPF would have */
	uint64_t kernel_bad;	 /* records naming an id unknown or of another process */
	uint64_t chain_evicted;	 /* entries dropped from a full chain of one key */
	uint64_t shapes_evicted; /* BPF shapes replaced in a key whose ways were all taken */
	uint64_t kernel_clears;	 /* BPF's maps full: what BPF held was withdrawn to make room */
	uint64_t hit_ns, miss_ns, build_ns; /* time spent in each */
};

/*
 * Where the unwinder publishes the entries of its cache that BPF can check
 * (gpuleak_abi.h: a shape under its key, the stacks of a shape under their
 * words' hash), so that BPF sends an id in place of the stack copy.
 */
struct scache_publisher {
	/* writes shape s under k (replacing the one there); 0 or -errno */
	int (*put_shape)(void *ctx, const struct gl_scache_key *k, const struct gl_scache_shape *s);
	/* writes a stack of a shape; 0 or -errno */
	int (*put_stack)(void *ctx, const struct gl_scache_vkey *k, const struct gl_scache_val *v);
	/* withdraws a stack (its shape was replaced) */
	void (*del_stack)(void *ctx, const struct gl_scache_vkey *k);
	/* withdraws every entry of process pid */
	void (*drop)(void *ctx, int pid);
	void *ctx;
};

/* NULL with errno on failure. m must outlive the unwinder. */
struct unwinder *unwinder__new(struct modules *m, enum gl_stack_mode mode);
/* Frees the unwinder and everything it caches; logs its statistics at debug level. */
void unwinder__free(struct unwinder *u);
/* Entries are published through pub (copied) from now on. */
void unwinder__set_publisher(struct unwinder *u, const struct scache_publisher *pub);
/* Copies the statistics so far to *out. */
void unwinder__stats(const struct unwinder *u, struct unwind_stats *out);

/*
 * Instruction addresses of the stack in v, innermost first: ips[0] is the
 * traced function's entry, the others are return addresses. Returns the
 * count, 0 if the record has no stack. DWARF records are unwound through
 * who->am, which is read again when a pc lies outside it (a library loaded
 * since), as addr_map__refresh_after_miss() allows.
 */
int unwind__stack(struct unwinder *u, const struct stack_owner *who, const struct stack_view *v,
		  uint64_t *ips, int max);

#endif /* GL_UNWIND_H */
