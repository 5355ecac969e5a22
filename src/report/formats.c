// SPDX-License-Identifier: BSD-2-Clause
/*
 * formats.c - the table of report files (formats.h), and the writers of the
 * reporters that take options of their own.
 */
#include <time.h>
#include "formats.h"
#include "report.h"
#include "util/log.h"

_Static_assert(REPORT_NR_FORMATS <= GL_MAX_FORMATS, "gl_opts.out holds every format");

static int format__json(FILE *f, const struct snapshot *snap, const char *path)
{
	(void)path;
	return report__json(f, snap);
}

static int format__folded(FILE *f, const struct snapshot *snap, const char *path)
{
	(void)path;
	return report__folded(f, snap, &(struct folded_opts){ 0 });
}

static int format__svg(FILE *f, const struct snapshot *snap, const char *path)
{
	(void)path;
	return report__svg(f, snap, &(struct svg_opts){ 0 });
}

static int format__pprof(FILE *f, const struct snapshot *snap, const char *path)
{
	struct pprof_opts po = { .default_sample = PPROF_INUSE_SPACE };
	struct timespec wall;

	(void)path;
	clock_gettime(CLOCK_REALTIME, &wall);
	po.time_ns = wall.tv_sec * 1000000000ULL + wall.tv_nsec;
	return report__pprof(f, snap, &po);
}

/* The memory_viz snapshot of the process with the most PyTorch memory (others named). */
static int format__memory_viz(FILE *f, const struct snapshot *snap, const char *path)
{
	int others;
	const struct snap_proc *sp = report__memory_viz_proc(snap, &others);

	if (!sp) {
		log_warn("%s: no process had PyTorch memory gpuleak could see (segments its "
			 "caching allocator took, or tensor blocks): the snapshot is empty",
			 path);
		return report__memory_viz(f, snap, &(struct snap_proc){ .pid = 0, .comm = "" });
	}
	if (others)
		log_warn("%s holds PID %d (%s), the process with the most PyTorch memory; %d "
			 "other%s had some too (a snapshot is one process's, as PyTorch's own: "
			 "trace that one alone to have it)",
			 path, sp->pid, sp->comm, others, others > 1 ? "s" : "");
	return report__memory_viz(f, snap, sp);
}

static int format__perfetto(FILE *f, const struct snapshot *snap, const char *path)
{
	(void)path;
	return report__perfetto(f, snap);
}

static int format__html(FILE *f, const struct snapshot *snap, const char *path)
{
	(void)path;
	return report__html(f, snap, 0);
}

const struct report_format_row report_formats[REPORT_NR_FORMATS] = {
#define REPORT_FORMAT_ROW(id, option, help, example, needs, write) \
	[REPORT_##id] = { option, help, example, needs, write },
	REPORT_FORMATS(REPORT_FORMAT_ROW)
#undef REPORT_FORMAT_ROW
};
