// SPDX-License-Identifier: BSD-2-Clause
/*
 * report_cmd.c - `gpuleak report FILE`: the books rebuilt from a recording,
 * then the same reports a live session prints at its end, preceded by what
 * the recording is and followed by what it lacks.
 *
 * Exit status: 0 for a report, partial ones included (they say so); 3
 * (EXIT_BADFILE) when FILE cannot be read as a gpuleak recording at all.
 */
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "offline.h"
#include "output.h"
#include "recording/recread.h"
#include "recording/replay.h"
#include "report/report.h"
#include "util/fmt.h"
#include "util/log.h"

#define SYSTEM_DEBUG_DIR "/usr/lib/debug/.build-id"

static void print_header(FILE *f, const struct snap_recording *r, const struct snapshot *snap)
{
	time_t secs = r->wall_start_ns / 1000000000ULL;
	char when[64] = "an unknown time";
	struct tm tm;

	if (r->wall_start_ns && gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	fprintf(f, "recording %s: made on %s at %s, %.1f s, %llu calls\n\n", r->file,
		r->host[0] ? r->host : "an unknown host", when, snap->duration_s,
		(unsigned long long)r->calls);
}

/* One thing the recording lacks: a line of the text report (f may be NULL) and a warning. */
__attribute__((format(printf, 3, 4))) static void gap(FILE *f, bool warn, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (f)
		fprintf(f, "%s: %s\n", warn ? "WARNING" : "note", line);
	log_msg(warn ? LOG_WARN : LOG_INFO, "%s", line);
}

static void print_gaps(FILE *f, const struct snap_recording *r, const struct rr_counts *c)
{
	char b[32];

	if (r->truncated)
		gap(f, true,
		    "the recording was truncated at --max-size (%s): later events are "
		    "missing",
		    fmt_bytes(r->max_size, b, sizeof(b)));
	else if (!r->ended)
		gap(f, true,
		    "the recording has no end record (gpuleak record was killed, or still "
		    "runs): up to its last second is missing, and BPF's final counters with it");
	if (r->skipped_bytes || r->bad_chunks || r->bad_records || c->header_damaged)
		gap(f, true,
		    "damaged recording: %llu bytes skipped (%llu damaged chunks%s), %llu "
		    "malformed records skipped%s",
		    (unsigned long long)r->skipped_bytes, (unsigned long long)r->bad_chunks,
		    r->cut ? ", the end of the file cut" : "", (unsigned long long)r->bad_records,
		    c->header_damaged ? ", header damaged (read as version 1)" : "");
	if (r->unknown_records)
		gap(NULL, false, "%llu records of a later format version skipped",
		    (unsigned long long)r->unknown_records);
	if (r->modules_missing)
		gap(f, false,
		    "%u of %u modules not found by path or build-id: their frames are "
		    "module+offset (see --debug-dir)",
		    r->modules_missing, r->modules);
}

/* Copies a bundle's file to f; returns 0 or -errno. */
static int cat_file(int dfd, const char *name, FILE *f)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char buf[16384];
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, n, f) != (size_t)n)
			break;
	close(fd);
	return n < 0 ? -EIO : 0;
}

/*
 * gpuleak report BUNDLE: an incident bundle (a directory with incident.json) is shown as
 * its incident, then its text report; its other files are named. Returns EXIT_*, or -1
 * when path is no bundle (a recording, then).
 */
static int report_bundle(const struct gl_opts *o)
{
	static const char *const files[] = { "report.json", "profile.pb.gz", "flame.svg",
					     "history.trace.json" };
	int dfd = open(o->record_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (dfd < 0)
		return -1;
	if (fstatat(dfd, "incident.json", &st, AT_SYMLINK_NOFOLLOW)) {
		close(dfd);
		log_error("%s is a directory but no incident bundle (no incident.json in it): "
			  "gpuleak report reads a recording or a bundle",
			  o->record_path);
		return EXIT_BADFILE;
	}
	if (output__named(o)) {
		close(dfd);
		log_error("a bundle holds its reports already (report.json, profile.pb.gz, "
			  "flame.svg, history.trace.json in %s): copy them",
			  o->record_path);
		return EXIT_USAGE;
	}
	printf("incident (%s/incident.json):\n", o->record_path);
	if (cat_file(dfd, "incident.json", stdout) || putchar('\n') == EOF ||
	    cat_file(dfd, "report.txt", stdout)) {
		close(dfd);
		log_error("%s: cannot read the bundle: %s", o->record_path, strerror(errno));
		return EXIT_BADFILE;
	}
	printf("\nalso in the bundle:");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!fstatat(dfd, files[i], &st, AT_SYMLINK_NOFOLLOW))
			printf(" %s", files[i]);
	printf("\n");
	close(dfd);
	return fflush(stdout) ? EXIT_RUNTIME : EXIT_OK;
}

int report_cmd__run(const struct gl_opts *o)
{
	const char *dirs[GL_MAX_DEBUG_DIRS + 1];
	struct replay_opts ro = { .dirs = dirs,
				  .timeline = o->needs & GL_NEED_TIMELINE,
				  .histories = o->needs & GL_NEED_HISTORIES,
				  .memory_events = o->needs & GL_NEED_MEMORY_EVENTS };
	struct text_opts to = { .max_stacks = o->top,
				.max_frames = o->frames,
				.full_stacks = o->full_stacks };
	bool text = !output__to_stdout(o);
	struct rec_reader *rr = NULL;
	struct replay *rp = NULL;
	struct snapshot *snap = NULL;
	struct output_files files;
	int status = EXIT_OK, err;
	char why[256];

	if ((status = report_bundle(o)) >= 0)
		return status;
	status = EXIT_OK;
	for (int i = 0; i < o->nr_debug_dirs; i++)
		dirs[ro.ndirs++] = o->debug_dirs[i];
	dirs[ro.ndirs++] = SYSTEM_DEBUG_DIR;
	if (output__open_files(o, &files))
		return EXIT_RUNTIME;
	err = recread__open(o->record_path, &rr, why, sizeof(why));
	if (err) {
		log_error("%s: %s (gpuleak report reads what gpuleak record -o wrote)",
			  o->record_path, why);
		output__close_files(&files);
		return err == -ENOMEM ? EXIT_RUNTIME : EXIT_BADFILE;
	}
	rp = replay__new(&ro);
	if (!rp) {
		log_error("out of memory (free memory and run again)");
		status = EXIT_RUNTIME;
		goto cleanup;
	}
	err = replay__read(rp, rr, o->record_path);
	if (err)
		log_warn("reading %s failed part-way: %s; the report covers what was read",
			 o->record_path, strerror(-err));
	snap = replay__snapshot(rp, 0);
	if (!snap) {
		log_error("failed to build the report: %s (free memory and run again)",
			  strerror(errno));
		status = EXIT_RUNTIME;
		goto cleanup;
	}
	if (text) {
		print_header(stdout, replay__info(rp), snap);
		if (report__text(stdout, snap, &to))
			status = EXIT_RUNTIME;
	}
	print_gaps(text ? stdout : NULL, replay__info(rp), recread__counts(rr));
	if (output__write_files(snap, &files))
		status = EXIT_RUNTIME;
	if (text && fflush(stdout))
		status = EXIT_RUNTIME;
cleanup:
	output__close_files(&files);
	snapshot__free(snap);
	replay__free(rp);
	recread__free(rr);
	return status;
}
