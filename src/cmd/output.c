// SPDX-License-Identifier: BSD-2-Clause
/*
 * output.c - the report files a command line names (report/formats.h): opened
 * and checked before tracing, written from one snapshot by attach, run and
 * report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "output.h"
#include "util/log.h"
#include "util/outfile.h"

bool output__named(const struct gl_opts *o)
{
	for (int i = 0; i < REPORT_NR_FORMATS; i++)
		if (o->out[i])
			return true;
	return false;
}

/* Whether a report file goes to stdout, which then carries nothing else. */
bool output__to_stdout(const struct gl_opts *o)
{
	for (int i = 0; i < REPORT_NR_FORMATS; i++)
		if (outfile__is_stdout(o->out[i]))
			return true;
	return false;
}

int output__open_files(const struct gl_opts *o, struct output_files *rf)
{
	struct stat st;
	int err = 0;

	memset(rf, 0, sizeof(*rf));
	for (int i = 0; i < REPORT_NR_FORMATS && !err; i++) {
		const char *path = rf->path[i] = o->out[i];

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
			log_error(
				"--%s %s and --%s %s are the same file: each report needs its own",
				report_formats[j].option, rf->path[j], report_formats[i].option,
				path);
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
	for (int i = 0; i < REPORT_NR_FORMATS; i++) {
		if (!rf->f[i])
			continue;
		outfile__close(rf->f[i]);
		/* a report never written leaves no empty file behind */
		if (rf->created[i])
			unlink(rf->path[i]);
		rf->f[i] = NULL;
	}
}

/* Writes one report into f (from output__open_files; none if NULL) and closes it.
 * Returns 0 or -errno, said on stderr. */
static int write_output(const struct snapshot *snap, enum report_format kind, const char *path,
			FILE *f)
{
	int err;

	if (!f)
		return 0;
	err = outfile__begin(f);
	if (err) {
		log_error("cannot write %s: %s", path, strerror(-err));
		outfile__close(f);
		return err;
	}
	err = report_formats[kind].write(f, snap, path);
	err = outfile__close(f) ?: err;
	if (err)
		log_error("writing %s failed: %s: free space there, or name another path", path,
			  strerror(-err));
	return err;
}

int output__write_files(const struct snapshot *snap, struct output_files *rf)
{
	int err = 0;

	for (int i = 0; i < REPORT_NR_FORMATS; i++) {
		err = write_output(snap, i, rf->path[i], rf->f[i]) ?: err;
		rf->f[i] = NULL;
	}
	return err;
}
