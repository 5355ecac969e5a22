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
	uint64_t stacks;   /* DWARF records unwound */
	uint64_t hits;	   /* answered from the cache */
	uint64_t misses;   /* unwound with libdwfl */
	uint64_t uncached; /* misses whose result could not be cached */
	uint64_t fp_walks; /* no CFI for the process (no address map, no module): rbp chain */
	uint64_t builds;   /* per-process Dwfl built (first record, or the address map changed) */
	uint64_t hit_ns, miss_ns, build_ns; /* time spent in each */
};

/* NULL with errno on failure. m must outlive the unwinder. */
struct unwinder *unwinder__new(struct modules *m, enum gl_stack_mode mode);
/* Frees the unwinder and everything it caches; logs its statistics at debug level. */
void unwinder__free(struct unwinder *u);
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
