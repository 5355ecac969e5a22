// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * faketorch.c - a stand-in for PyTorch's libc10_cuda.so as gpuleak sees it: the
 * caching allocator's USDT probes pytorch:malloc (ptr, device, size, stream)
 * and pytorch:free (ptr), each guarded by a semaphore that a tracer raises.
 *
 * The "allocator" hands out blocks inside segments the caller got from the
 * CUDA driver (stand-in): faketorch_malloc() fires pytorch:malloc for a block
 * the caller chose, faketorch_free() fires pytorch:free, faketorch_grow() calls
 * the caller back for a new segment. It keeps no books:
 * workloads keep the ground truth.
 */
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
#include <stdint.h>
#include <sys/sdt.h>

#define EXPORT __attribute__((visibility("default")))

/* Raised by the kernel (uprobe reference counters) while a tracer listens. */
EXPORT unsigned short pytorch_malloc_semaphore __attribute__((section(".probes")));
EXPORT unsigned short pytorch_free_semaphore __attribute__((section(".probes")));

static uint64_t handed_out;

/* The allocator's bookkeeping: makes the probing functions real, framed callers. */
static __attribute__((noinline)) void book(int64_t n)
{
	__atomic_add_fetch(&handed_out, n, __ATOMIC_RELAXED);
}

EXPORT __attribute__((noinline)) void faketorch_malloc(void *ptr, int device, uint64_t size,
						       uint64_t stream)
{
	book(1);
	if (pytorch_malloc_semaphore)
		STAP_PROBE4(pytorch, malloc, ptr, (long)device, size, stream);
}

EXPORT __attribute__((noinline)) void faketorch_free(void *ptr)
{
	book(-1);
	if (pytorch_free_semaphore)
		STAP_PROBE1(pytorch, free, ptr);
}

/*
 * A runtime's worker thread, which never runs Python code (PyTorch's autograd
 * engine runs backward there): faketorch_worker_pairs() hands it n
 * malloc+free pairs of 4 KiB blocks from base and waits until they are done,
 * as a Python thread inside backward() waits for the engine.
 */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static uint64_t job_base;
static int job_n, job_posted, job_done;

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&job_lock);
	for (;;) {
		while (job_done == job_posted)
			pthread_cond_wait(&job_cond, &job_lock);
		uint64_t base = job_base;
		int n = job_n;

		pthread_mutex_unlock(&job_lock);
		for (int i = 0; i < n; i++) {
			faketorch_malloc((void *)(uintptr_t)(base + (uint64_t)i * 4096), 0, 4096,
					 0);
			faketorch_free((void *)(uintptr_t)(base + (uint64_t)i * 4096));
		}
		pthread_mutex_lock(&job_lock);
		job_done = job_posted;
		pthread_cond_broadcast(&job_cond);
	}
	return NULL;
}

/* 0, or -1 when the worker thread cannot be started. */
EXPORT int faketorch_worker_pairs(uint64_t base, int n)
{
	static pthread_t worker;
	static int started;

	pthread_mutex_lock(&job_lock);
	if (!started) {
		if (pthread_create(&worker, NULL, worker_main, NULL)) {
			pthread_mutex_unlock(&job_lock);
			return -1;
		}
		started = 1;
	}
	job_base = base;
	job_n = n;
	job_posted++;
	pthread_cond_broadcast(&job_cond);
	while (job_done != job_posted)
		pthread_cond_wait(&job_cond, &job_lock);
	pthread_mutex_unlock(&job_lock);
	return 0;
}

/* The allocator growing: it asks the caller's function for a new segment, so the
 * segment's stack passes through this library, as PyTorch's cudaMalloc calls do. */
EXPORT __attribute__((noinline)) void faketorch_grow(void (*alloc_segment)(void))
{
	book(0);
	alloc_segment();
	book(0);
}

/* Whether a tracer is listening (for the workload's own checks). */
EXPORT int faketorch_traced(void)
{
	return pytorch_malloc_semaphore > 0;
}

/*
 * pytorch:malloc's semaphore (the uprobes installed). Through a function: an
 * executable that named the variable would get a copy relocation, which the
 * library's code would then read, while the kernel raises the library's own.
 */
EXPORT int faketorch_semaphore(void)
{
	return pytorch_malloc_semaphore;
}
