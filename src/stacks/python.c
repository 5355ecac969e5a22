// SPDX-License-Identifier: BSD-2-Clause
/*
 * python.c - CPython code objects resolved to names, files and lines.
 */
#include <errno.h>
#include <stdlib.h>
#include "python.h"

struct python {
	struct modules *mods;
};

struct python *python__new(struct modules *m)
{
	struct python *py = calloc(1, sizeof(*py));

	if (py)
		py->mods = m;
	return py;
}

void python__free(struct python *py)
{
	free(py);
}

int python__attach(struct python *py, struct tracer *t, int pid)
{
	(void)py;
	(void)t;
	(void)pid;
	return -ENOENT;
}

void python__detach(struct python *py, struct tracer *t, int pid)
{
	(void)py;
	(void)t;
	(void)pid;
}

int python__merge(struct python *py, struct proc *proc, const struct stack_view *v,
		  struct frame *frames, int n, int max)
{
	(void)py;
	(void)proc;
	(void)v;
	(void)frames;
	(void)max;
	return n;
}

void python__code_info(struct python *py, uint32_t id, const char **function, const char **file)
{
	(void)py;
	(void)id;
	*function = NULL;
	*file = NULL;
}
