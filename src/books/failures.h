/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * failures.h - failed allocations, private to books/ (books.c applies the
 * records, failures.c keeps what a failure leaves).
 */
#ifndef GL_FAILURES_H
#define GL_FAILURES_H

#include <stdbool.h>
#include <stdint.h>
#include "gpuleak_abi.h"

struct explain_src;
struct failure;
struct proc;

/*
 * A failed allocation (record c, its stack an id of the books' stack table) kept
 * in the process's ring of failures and returned; an out-of-memory failure also
 * gets the stacks holding the most of its class and, for device memory, its facts
 * (has_facts; the caller adds NVML's part, then calls its failure hook). Out of
 * memory for the facts: the failure keeps its holders.
 */
struct failure *failures__record(const struct explain_src *src, struct proc *proc,
				 const struct gl_call *c, uint32_t stack);
/*
 * After an out-of-memory failure of PyTorch's allocator: a segment freed (its
 * cache, alloc false) or allocated (the retry) at stack, of class cls.
 */
void failures__retry_note(const struct explain_src *src, struct proc *proc, uint32_t stack,
			  uint8_t cls, uint64_t bytes, bool alloc);

#endif /* GL_FAILURES_H */
