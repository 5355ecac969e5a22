// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnofp_inner.c - the inner of wl_nofp's two shared libraries: the frames
 * that call the driver. Built like the CUDA libraries: -O2, no frame
 * pointers, with .eh_frame.
 */
#include "wl.h"

/* The allocation site. */
WL_SITE CUresult nofp_inner_site(CUdeviceptr *p, size_t size)
{
	return cuMemAlloc_v2(p, size);
}

/*
 * Keeps six values live across the call, so that every callee-saved register,
 * rbp included, holds data: nothing here looks like a frame-pointer chain.
 */
WL_FRAME CUresult nofp_inner_call(CUdeviceptr *p, size_t size)
{
	unsigned long a = size * 3, b = size ^ 0x5a5a, c = size + 17, d = size * 7;
	unsigned long e = size >> 3, f = size | 1;
	CUresult rc;

	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
	rc = nofp_inner_site(p, size);
	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
	return rc + (CUresult)((a ^ b ^ c ^ d ^ e ^ f) & 0);
}
