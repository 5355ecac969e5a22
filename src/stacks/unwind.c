// SPDX-License-Identifier: BSD-2-Clause
/*
 * unwind.c - frame-pointer stacks come unwound from the kernel; this module
 * hands them on.
 */
#include <errno.h>
#include <stdlib.h>
#include "unwind.h"

struct unwinder {
	struct modules *mods;
	enum gl_stack_mode mode;
};

struct unwinder *unwinder__new(struct modules *m, enum gl_stack_mode mode)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->mods = m;
	u->mode = mode;
	return u;
}

void unwinder__free(struct unwinder *u)
{
	free(u);
}

int unwind__stack(struct unwinder *u, struct proc *proc, const struct stack_view *v,
		  uint64_t *ips, int max)
{
	int n = 0;

	(void)u;
	(void)proc;
	for (int i = 0; i < v->rec->nr_ips && n < max; i++) {
		if (!v->ips[i])
			break;
		ips[n++] = v->ips[i];
		/*
		 * At a function's first instruction the caller's return address is at
		 * sp, not yet behind a frame pointer: a frame-pointer walk skips the
		 * caller unless the kernel adds it (6.12+ does, for functions that
		 * start with push %rbp). Add it where it is missing.
		 */
		if (i == 0 && v->rec->ret_addr && n < max &&
		    (v->rec->nr_ips < 2 || v->ips[1] != v->rec->ret_addr))
			ips[n++] = v->rec->ret_addr;
	}
	return n;
}
