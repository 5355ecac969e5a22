// SPDX-License-Identifier: BSD-2-Clause
/*
 * output.c - the report files a command line names (--json, --folded, --svg,
 * --pprof), written from one snapshot by attach, run and report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "output.h"
#include "report/report.h"
#include "util/log.h"
#include "util/outfile.h"

/* Whether a report file goes to stdout, which then carries nothing else. */
bool output__to_stdout(const struct gl_opts *o)
{
	return outfile__is_stdout(o->json_path) || outfile__is_stdout(o->folded_path) ||
	       outfile__is_stdout(o->svg_path) || outfile__is_stdout(o->pprof_path);
}

enum output { OUT_JSON, OUT_FOLDED, OUT_SVG, OUT_PPROF };

/* Writes one report file (none if path is NULL). Returns 0 or -errno, said on stderr. */
static int write_output(const struct snapshot *snap, enum output kind, const char *path)
{
	struct timespec wall;
	struct pprof_opts po = { .default_sample = PPROF_INUSE_SPACE };
	FILE *f;
	int err;

	if (!path)
		return 0;
	f = outfile__open(path);
	if (!f) {
		err = -errno;
		if (err == -ELOOP)
			log_error("cannot write %s: it is a symbolic link (not followed): name the "
				  "file it points to, or another path",
				  path);
		else if (err == -EMLINK)
			log_error("cannot write %s: it has other hard links: remove them, or name "
				  "another path",
				  path);
		else
			log_error("cannot write %s: %s: name a path in a writable directory", path,
				  strerror(-err));
		return err;
	}
	if (kind == OUT_JSON) {
		err = report__json(f, snap);
	} else if (kind == OUT_FOLDED) {
		err = report__folded(f, snap, &(struct folded_opts){ 0 });
	} else if (kind == OUT_SVG) {
		err = report__svg(f, snap, &(struct svg_opts){ 0 });
	} else {
		clock_gettime(CLOCK_REALTIME, &wall);
		po.time_ns = wall.tv_sec * 1000000000ULL + wall.tv_nsec;
		err = report__pprof(f, snap, &po);
	}
	err = outfile__close(f) ?: err;
	if (err)
		log_error("writing %s failed: %s: free space there, or name another path", path,
			  strerror(-err));
	return err;
}

int output__write_files(const struct snapshot *snap, const struct gl_opts *o)
{
	const char *paths[] = { [OUT_JSON] = o->json_path,
				[OUT_FOLDED] = o->folded_path,
				[OUT_SVG] = o->svg_path,
				[OUT_PPROF] = o->pprof_path };
	int err = 0;

	for (int i = OUT_JSON; i <= OUT_PPROF; i++)
		err = write_output(snap, i, paths[i]) ?: err;
	return err;
}
