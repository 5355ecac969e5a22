/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * unwind.h - turning a stack record into instruction addresses, innermost
 * first, and merging Python frames into them.
 */
#ifndef GL_UNWIND_H
#define GL_UNWIND_H

#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "stacks.h"
#include "trace/event.h"

#define UNWIND_MAX_FRAMES 256

struct unwinder;
struct proc;
struct modules;

/* NULL with errno on failure. */
struct unwinder *unwinder__new(struct modules *m, enum gl_stack_mode mode);
void unwinder__free(struct unwinder *u);

/*
 * Instruction addresses of the stack in v, innermost first (ips[0] is the
 * traced function's entry). Returns the count, 0 if the record has no stack.
 */
int unwind__stack(struct unwinder *u, struct proc *proc, const struct stack_view *v,
		  uint64_t *ips, int max);

#endif /* GL_UNWIND_H */
