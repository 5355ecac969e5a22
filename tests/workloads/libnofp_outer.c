// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnofp_outer.c - the outer of wl_nofp's two shared libraries, between the
 * program and libnofp_inner.so. Built without frame pointers.
 */
#include "wl.h"

CUresult nofp_inner_call(CUdeviceptr *p, size_t size);

/* A frame with a buffer of its own: the CFA is rsp plus something odd. */
WL_FRAME CUresult nofp_outer_step(CUdeviceptr *p, size_t size)
{
	volatile char scratch[72];
	CUresult rc;

	scratch[0] = (char)size;
	rc = nofp_inner_call(p, size);
	return rc + scratch[0] - (char)size;
}

WL_FRAME CUresult nofp_outer_entry(CUdeviceptr *p, size_t size)
{
	unsigned long keep = size * 5;
	CUresult rc;

	__asm__ volatile("" : "+r"(keep));
	rc = nofp_outer_step(p, size);
	__asm__ volatile("" : "+r"(keep));
	return rc + (CUresult)(keep & 0);
}
