// SPDX-License-Identifier: BSD-2-Clause
/*
 * site.c - what the reporters share about stacks: the frame that tells where a
 * stack allocates (model/site.h) as one line, and which classes are memory.
 */
#include <stdio.h>
#include <string.h>
#include "report.h"
#include "model/site.h"

bool report__is_memory_class(uint8_t cls)
{
	return cls == GL_CLASS_DEVICE || cls == GL_CLASS_MANAGED || cls == GL_CLASS_HOST_PINNED ||
	       cls == GL_CLASS_TORCH_BLOCK;
}

enum report_draw report__draw_rule(const struct snap_proc *p)
{
	bool blocks = false;

	for (uint32_t i = 0; i < p->nstacks && !blocks; i++)
		blocks = p->stacks[i].cls == GL_CLASS_TORCH_BLOCK;
	if (!blocks)
		return REPORT_DRAW_ALL;
	return p->tensors_known && p->tensors.coverage && !strcmp(p->tensors.coverage, "complete") ?
		       REPORT_DRAW_BLOCKS :
		       REPORT_DRAW_SEGMENTS;
}

bool report__drawn(enum report_draw rule, const struct snap_stack *st)
{
	if (!report__is_memory_class(st->cls))
		return false;
	switch (rule) {
	case REPORT_DRAW_BLOCKS: return !st->torch_segment;
	case REPORT_DRAW_SEGMENTS: return st->cls != GL_CLASS_TORCH_BLOCK;
	default: return true;
	}
}

static const char *basename_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

/*
 * The length of a native function's name without the suffixes the compiler adds to
 * the copies it makes (".constprop.0", ".isra.0", ".part.0", ".cold"): the name as
 * its source has it.
 */
static int source_name_len(const char *fn)
{
	static const char *const clones[] = { ".constprop.", ".isra.",	   ".part.",
					      ".cold",	     ".lto_priv.", ".clone." };
	size_t n = strlen(fn);

	for (size_t i = 0; i < sizeof(clones) / sizeof(clones[0]); i++) {
		const char *c = strstr(fn, clones[i]);

		if (c && c != fn && (size_t)(c - fn) < n)
			n = c - fn;
	}
	return (int)n;
}

void report__site(const struct snap_stack *st, char *buf, size_t len)
{
	const struct snap_frame *f = site__pick(st);

	if (!f)
		snprintf(buf, len, "[no stack]");
	else if (f->kind[0] == 'p')
		snprintf(buf, len, "%s:%d %s%s", basename_of(f->file) ? basename_of(f->file) : "?",
			 f->line, f->function ? f->function : "?",
			 f->inferred ? " (inferred)" : "");
	else if (f->function && f->file && f->line > 0)
		snprintf(buf, len, "%.*s (%s:%d, %s)", source_name_len(f->function), f->function,
			 basename_of(f->file), f->line,
			 basename_of(f->module) ? basename_of(f->module) : "?");
	else if (f->function)
		snprintf(buf, len, "%s (%s)", f->function,
			 basename_of(f->module) ? basename_of(f->module) : "?");
	else
		snprintf(buf, len, "%s+0x%llx",
			 basename_of(f->module) ? basename_of(f->module) : "?",
			 (unsigned long long)f->offset);
}

double report__proc_growth(const struct snap_proc *p)
{
	double g = 0;

	for (uint32_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].cls == GL_CLASS_DEVICE)
			g += p->stacks[i].growth_bytes_per_s;
	return g;
}
