/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dwarf.h - unwinding a copy of a user stack with the call frame information
 * (.eh_frame, .debug_frame) of the process's modules, through elfutils'
 * libdwfl: one Dwfl per process, over its address map.
 *
 * x86-64 only: the registers a stack record carries (ip, sp, bp) are given to
 * libdwfl as DWARF registers rip, rsp and rbp.
 */
#ifndef GL_DWARF_H
#define GL_DWARF_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "stacks/modules.h"

struct dwarf_ctx;  /* shared by every process: the modules' ELF layouts */
struct dwarf_proc; /* one process: a Dwfl over its address map */

/* The registers at a call's entry and a copy of the stack at sp. */
struct dwarf_input {
	uint64_t ip, sp, bp;
	const uint8_t *stack; /* the bytes of [sp, sp + len) */
	uint32_t len;
	bool at_entry; /* ip is a function's first instruction: its return address is at sp */
};

/* The word at addr in the copy; false if its 8 bytes are not all in the copy. */
static inline bool dwarf_input__read(const struct dwarf_input *in, uint64_t addr, uint64_t *val)
{
	if (addr < in->sp || in->len < 8 || addr - in->sp > in->len - 8u)
		return false;
	memcpy(val, in->stack + (addr - in->sp), sizeof(*val));
	return true;
}

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
/* The process's Dwfl (owned by p), for the analysis in dwarf_deps.h. */
Dwfl *dwarf_proc__dwfl(const struct dwarf_proc *p);

/*
 * Unwinds in with libdwfl: stores the pcs of at most max frames, innermost
 * first (pcs[0] = in->ip; the others are return addresses), and returns
 * their number (>= 1 when max >= 1). Unwinding stops at the end of the CFI
 * chain, at a read outside the copy, at a pc of 0, or at max.
 */
int dwarf_proc__unwind(struct dwarf_proc *p, const struct dwarf_input *in, uint64_t *pcs, int max);
/* Whether pc lies in a module p reported (one whose CFI libdwfl can look up). */
bool dwarf_proc__knows(const struct dwarf_proc *p, uint64_t pc);

/*
 * Frame-pointer walk of the copy alone (no CFI): ip, the return address at
 * sp where in is at a function's entry, then the rbp chain while it stays in
 * the copy and goes up. Returns the number of pcs stored.
 */
int dwarf__fp_walk(const struct dwarf_input *in, uint64_t *pcs, int max);

#endif /* GL_DWARF_H */
