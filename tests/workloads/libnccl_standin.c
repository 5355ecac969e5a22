// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnccl_standin.c - a stand-in for a library outside PyTorch's allocator
 * that asks the CUDA driver for its own buffers (NCCL's communicator buffers
 * are the usual case). Built as libnccl.so.2, so that gpuleak groups what it
 * allocates under "nccl" from the stack's frames.
 */
#include <stddef.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))

/* Allocates n buffers of size bytes; returns 0 or the driver's error. */
EXPORT __attribute__((noinline)) int nccl_standin_buffers(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		CUdeviceptr p;
		int rc = cuMemAlloc_v2(&p, size);

		if (rc)
			return rc;
	}
	return 0;
}
