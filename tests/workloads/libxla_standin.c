// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libxla_standin.c - a stand-in for XLA's runtime (jaxlib's xla_extension.so),
 * built as jaxlib/xla_extension.so so that gpuleak groups what it allocates
 * under "xla" from the stack's frames. Two patterns of the real one:
 *
 *   xla_standin_preallocate  one driver allocation of a share of the device
 *                            (JAX preallocates 75 % by default); buffers are
 *                            then carved out of it with no driver call
 *   xla_standin_worker_alloc allocations made by a worker thread of the
 *                            runtime, which runs no Python, while the caller
 *                            waits for it (XLA's and CuPy's stream threads)
 */
#include <pthread.h>
#include <stddef.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))

/* One allocation of size bytes; 0 or the driver's error, the pointer in *out. */
EXPORT __attribute__((noinline)) int xla_standin_preallocate(size_t size, CUdeviceptr *out)
{
	return cuMemAlloc_v2(out, size);
}

struct worker_job {
	CUcontext ctx;
	size_t size;
	int n, rc;
	CUdeviceptr *out;
};

static __attribute__((noinline)) void *xla_standin_worker(void *arg)
{
	struct worker_job *j = arg;

	j->rc = cuCtxSetCurrent(j->ctx);
	for (int i = 0; i < j->n && !j->rc; i++)
		j->rc = cuMemAlloc_v2(&j->out[i], j->size);
	return NULL;
}

/*
 * n allocations of size bytes on a new thread, waited for; the pointers in
 * out[0..n). Returns 0 or the driver's (or pthread's) error.
 */
EXPORT __attribute__((noinline)) int xla_standin_worker_alloc(size_t size, int n,
							      CUdeviceptr *out)
{
	struct worker_job j = { .size = size, .n = n, .out = out };
	pthread_t t;
	int rc = cuCtxGetCurrent(&j.ctx);

	if (rc)
		return rc;
	rc = pthread_create(&t, NULL, xla_standin_worker, &j);
	if (rc)
		return rc;
	pthread_join(t, NULL);
	return j.rc;
}
