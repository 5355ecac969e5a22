// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * partial.c - a "libcuda.so.1" that exports only cuMemAlloc_v2, for testing how
 * gpuleak treats a driver library lacking functions it expects.
 */
#include <stddef.h>

__attribute__((visibility("default"))) int cuMemAlloc_v2(unsigned long long *dptr, size_t size)
{
	(void)size;
	*dptr = 0;
	return 801; /* CUDA_ERROR_NOT_SUPPORTED */
}
