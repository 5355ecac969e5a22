/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dwarf.h - unwinding a copy of a user stack with the call frame information
 * (.eh_frame, .debug_frame) of the process's modules through elfutils' libdwfl,
 * and the analysis that says which words of the copy the result depends on,
 * so that unwind.c can reuse a result soundly.
 *
 * x86-64 only: the registers a stack record carries (ip, sp, bp) are given to
 * libdwfl as DWARF registers rip, rsp and rbp.
 */
#ifndef GL_DWARF_H
#define GL_DWARF_H

#include <stdbool.h>
#include <stdint.h>
#include "modules.h"

struct dwarf_ctx;  /* shared by every process: module layouts, analysis scratch */
struct dwarf_proc; /* one process: a Dwfl over its address map */

/* The registers at a call's entry and a copy of the stack at sp. */
struct dwarf_input {
	uint64_t ip, sp, bp;
	const uint8_t *stack; /* the bytes of [sp, sp + len) */
	uint32_t len;
};

/* An 8-byte read the result depends on: the word at addr was val, or was not in the copy. */
struct dwarf_check {
	uint64_t addr;
	uint64_t val; /* 0 when !ok */
	bool ok;
};

/* What a result depends on besides ip and sp (which it always depends on). */
struct dwarf_deps {
	const struct dwarf_check *checks; /* in the context, valid until its next analysis */
	uint32_t nr_checks;
	bool bp; /* the value of bp */
};

/* NULL with errno on failure. The context keeps m; m must outlive it. */
struct dwarf_ctx *dwarf_ctx__new(struct modules *m);
void dwarf_ctx__free(struct dwarf_ctx *c);

/*
 * A Dwfl holding every module mapped executable in am, opened through the
 * module table's descriptors. NULL with errno on failure (ENOENT: no module
 * could be opened).
 */
struct dwarf_proc *dwarf_proc__new(struct dwarf_ctx *c, const struct addr_map *am, int pid);
void dwarf_proc__free(struct dwarf_proc *p);

/*
 * Unwinds in with libdwfl: stores the pcs of at most max frames, innermost
 * first (pcs[0] = in->ip; the others are return addresses), and returns
 * their number (>= 1 when max >= 1). Unwinding stops at the end of the CFI
 * chain, at a read outside the copy, or at max.
 */
int dwarf_proc__unwind(struct dwarf_proc *p, const struct dwarf_input *in, uint64_t *pcs,
		       int max);

/*
 * Works out which inputs pcs[0..n), the result of dwarf_proc__unwind(p, in,
 * pcs, max), depends on. Returns 0 with *out filled, or -EAGAIN when the
 * result must not be reused (CFI this analysis does not follow, or an
 * analysis that disagrees with libdwfl).
 */
int dwarf_proc__deps(struct dwarf_proc *p, const struct dwarf_input *in, const uint64_t *pcs,
		     int n, int max, struct dwarf_deps *out);

/*
 * Frame-pointer walk of the copy alone (no CFI): ip, the return address at
 * sp, then the rbp chain while it stays in the copy and goes up. Returns the
 * number of pcs stored.
 */
int dwarf__fp_walk(const struct dwarf_input *in, uint64_t *pcs, int max);

#endif /* GL_DWARF_H */
