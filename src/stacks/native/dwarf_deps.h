/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dwarf_deps.h - which inputs the result of a CFI unwinding (dwarf.h)
 * depends on: the stack words, read at which addresses, and whether bp. Two
 * records agreeing on ip, sp and those unwind to the same pcs, so the result
 * of one can stand for the other (unwind.c's cache).
 */
#ifndef GL_DWARF_DEPS_H
#define GL_DWARF_DEPS_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>
#include "dwarf.h"

struct dwarf_replay; /* scratch space for the analysis */

/* An 8-byte read the result depends on: the word at addr was val, or was not in the copy. */
struct dwarf_check {
	uint64_t addr;
	uint64_t val; /* 0 when !ok */
	bool ok;
};

/* What a result depends on besides ip and sp (which it always depends on). */
struct dwarf_deps {
	const struct dwarf_check *checks; /* in the replay, valid until its next analysis */
	uint32_t nr_checks;
	bool bp; /* the value of bp */
};

/* NULL with errno on failure. */
struct dwarf_replay *dwarf_replay__new(void);
void dwarf_replay__free(struct dwarf_replay *r);

/*
 * Works out which inputs pcs[0..n), the result of dwarf_proc__unwind() for
 * in with at most max frames over dwfl, depends on. Returns 0 with *out
 * filled, or -EAGAIN when the result must not be reused (CFI this analysis
 * does not follow, or an analysis that disagrees with libdwfl's result).
 */
int dwarf_replay__deps(struct dwarf_replay *r, Dwfl *dwfl, const struct dwarf_input *in,
		       const uint64_t *pcs, int n, int max, struct dwarf_deps *out);

#endif /* GL_DWARF_DEPS_H */
