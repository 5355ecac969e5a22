// SPDX-License-Identifier: BSD-2-Clause
/*
 * output.c - the report files a command line names (--json, --folded, --svg,
 * --pprof): opened and checked before tracing, written from one snapshot by
 * attach, run and report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "output.h"
#include "report/report.h"
#include "util/log.h"
#include "util/outfile.h"

/* Whether a report file goes to stdout, which then carries nothing else. */
bool output__to_stdout(const struct gl_opts *o)
{
	return outfile__is_stdout(o->json_path) || outfile__is_stdout(o->folded_path) ||
	       outfile__is_stdout(o->svg_path) || outfile__is_stdout(o->pprof_path) ||
	       outfile__is_stdout(o->memory_viz_path) || outfile__is_stdout(o->perfetto_path) ||
	       outfile__is_stdout(o->html_path);
}

enum output { OUT_JSON, OUT_FOLDED, OUT_SVG, OUT_PPROF, OUT_MEMVIZ, OUT_PERFETTO, OUT_HTML };

int output__open_files(const struct gl_opts *o, struct output_files *rf)
{
	static const char *const opts[] = { "--json",	    "--folded",	  "--svg", "--pprof",
					    "--memory-viz", "--perfetto", "--html" };
	struct stat st;
	int err = 0;

	memset(rf, 0, sizeof(*rf));
	rf->path[OUT_JSON] = o->json_path;
	rf->path[OUT_FOLDED] = o->folded_path;
	rf->path[OUT_SVG] = o->svg_path;
	rf->path[OUT_PPROF] = o->pprof_path;
	rf->path[OUT_MEMVIZ] = o->memory_viz_path;
	rf->path[OUT_PERFETTO] = o->perfetto_path;
	rf->path[OUT_HTML] = o->html_path;
	for (int i = 0; i < OUTPUT_NR_FILES && !err; i++) {
		const char *path = rf->path[i];

		if (!path)
			continue;
		rf->created[i] = !outfile__is_stdout(path) && lstat(path, &st) && errno == ENOENT;
		rf->f[i] = outfile__reserve(path);
		if (!rf->f[i]) {
			err = -errno;
			rf->created[i] = false;
			log_error("cannot write %s: %s: name another path", path,
				  outfile__strerror(-err));
			break;
		}
		for (int j = 0; j < i && !err; j++) {
			if (!outfile__same(rf->f[i], rf->f[j]))
				continue;
			log_error("%s %s and %s %s are the same file: each report needs its own",
				  opts[j], rf->path[j], opts[i], path);
			rf->created[i] = false; /* the one created first goes */
			err = -EINVAL;
		}
	}
	if (err)
		output__close_files(rf);
	return err;
}

void output__close_files(struct output_files *rf)
{
	for (int i = 0; i < OUTPUT_NR_FILES; i++) {
		if (!rf->f[i])
			continue;
		outfile__close(rf->f[i]);
		/* a report never written leaves no empty file behind */
		if (rf->created[i])
			unlink(rf->path[i]);
		rf->f[i] = NULL;
	}
}

/* The memory_viz snapshot of the process with the most PyTorch memory (others named). */
static int write_memory_viz(FILE *f, const struct snapshot *snap, const char *path)
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

/* Writes one report into f (from output__open_files; none if NULL) and closes it.
 * Returns 0 or -errno, said on stderr. */
static int write_output(const struct snapshot *snap, enum output kind, const char *path, FILE *f)
{
	struct timespec wall;
	struct pprof_opts po = { .default_sample = PPROF_INUSE_SPACE };
	int err;

	if (!f)
		return 0;
	err = outfile__begin(f);
	if (err) {
		log_error("cannot write %s: %s", path, strerror(-err));
		outfile__close(f);
		return err;
	}
	if (kind == OUT_JSON) {
		err = report__json(f, snap);
	} else if (kind == OUT_FOLDED) {
		err = report__folded(f, snap, &(struct folded_opts){ 0 });
	} else if (kind == OUT_SVG) {
		err = report__svg(f, snap, &(struct svg_opts){ 0 });
	} else if (kind == OUT_MEMVIZ) {
		err = write_memory_viz(f, snap, path);
	} else if (kind == OUT_PERFETTO) {
		err = report__perfetto(f, snap);
	} else if (kind == OUT_HTML) {
		err = report__html(f, snap, 0);
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

int output__write_files(const struct snapshot *snap, struct output_files *rf)
{
	int err = 0;

	for (int i = OUT_JSON; i <= OUT_HTML; i++) {
		err = write_output(snap, i, rf->path[i], rf->f[i]) ?: err;
		rf->f[i] = NULL;
	}
	return err;
}
