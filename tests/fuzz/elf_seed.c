// SPDX-License-Identifier: BSD-2-Clause
/*
 * elf_seed.c - the source of the ELF fuzz target's seeds (make_elf_seeds):
 * a tiny driver library exporting every function of the probe table, and an
 * executable with a DT_RPATH or DT_RUNPATH.
 */
#include <linux/types.h>
#include "gpuleak_abi.h"

#define DEFINE(sym, role, cls, kind, flags) \
	int sym(void) { return __LINE__; }
GL_APIS(DEFINE)

static int helper(int x)
{
	return x * 3;
}

int main(void)
{
	return helper(0);
}
