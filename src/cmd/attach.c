// SPDX-License-Identifier: BSD-2-Clause
/*
 * attach.c - attach and run: drive a session until its targets exit, the
 * duration ends or a signal comes, with a summary every --interval, then the
 * final report on stdout and in the files the command line names.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "attach.h"
#include "census_cmd.h"
#include "census/join.h"
#include "model/session.h"
#include "model/snapshot.h"
#include "output.h"
#include "report/report.h"
#include "trace/loader.h"
#include "util/clock.h"
#include "util/log.h"

#define POLL_MS 100

static void print_summary(struct session *s, const struct gl_opts *o, uint64_t start_ns)
{
	struct text_opts to = { .max_stacks = 3, .max_frames = 6 };
	struct snapshot *snap;

	if (output__to_stdout(o))
		return;
	snap = session__snapshot(s, 3, true);
	if (!snap)
		return;
	printf("--- %.1f s ---\n", (now_ns() - start_ns) / 1e9);
	report__text(stdout, snap, &to);
	snapshot__free(snap);
}

static int final_report(struct session *s, const struct gl_opts *o, struct output_files *files)
{
	struct text_opts to = { .max_stacks = o->top, .max_frames = o->frames };
	struct snapshot *snap = session__snapshot(s, 0, true);
	char why[320];
	int err = 0;

	if (!snap) {
		log_error("failed to build the report: %s (free memory and run again)",
			  strerror(errno));
		return EXIT_RUNTIME;
	}
	if (!output__to_stdout(o))
		err = o->cmd == CMD_EXPLAIN ? report__explain(stdout, snap) :
					      report__text(stdout, snap, &to);
	err = output__write_files(snap, files) ?: err;
	if (snap->lost_events)
		log_warn("%llu events were lost: figures are incomplete (raise --ringbuf-size)",
			 (unsigned long long)snap->lost_events);
	else if (!snap->complete)
		log_warn("%s", report__incomplete_why(snap, why, sizeof(why)));
	snapshot__free(snap);
	return err ? EXIT_RUNTIME : EXIT_OK;
}

/*
 * --census: what holds the tensors of each target still alive, after the report,
 * joined with the session's books (the line that allocated each tensor's memory).
 */
static void census_targets(struct session *s, const struct gl_opts *o)
{
	struct census_caps caps;

	census_cmd__default_caps(&caps);
	for (int i = 0; i < o->nr_pids; i++) {
		struct census_books books;

		if (kill(o->pids[i], 0) && errno == ESRCH)
			continue;
		tracer__drain(session__tracer(s));
		if (session__census_books(s, o->pids[i], &books)) {
			log_error("census: out of memory reading the books of process %d",
				  o->pids[i]);
			continue;
		}
		putchar('\n');
		census_cmd__one(o->pids[i], stdout, NULL, true, &caps, &books);
		session__census_books_free(&books);
	}
}

int session__run(const struct gl_opts *o)
{
	uint64_t start_ns, next_summary_ns, now;
	struct output_files files;
	struct session *s;
	bool done = false;
	int status;

	if (o->census && output__to_stdout(o)) {
		log_error("--census prints its text on stdout after the report: write the "
			  "reports to files, not to '-'");
		return EXIT_USAGE;
	}
	/* every report is opened and checked before anything is traced */
	if (output__open_files(o, &files))
		return EXIT_RUNTIME;
	s = session__new(o, &status);
	if (!s) {
		output__close_files(&files);
		return status;
	}
	status = session__start(s);
	start_ns = now_ns();
	next_summary_ns = start_ns + o->interval_ms * 1000000ULL;
	while (!status && !done) {
		status = session__step(s, POLL_MS, &done);
		now = now_ns();
		if (!status && !done && o->interval_ms && now >= next_summary_ns) {
			print_summary(s, o, start_ns);
			next_summary_ns = now + o->interval_ms * 1000000ULL;
		}
	}
	if (status == EXIT_OK)
		status = final_report(s, o, &files);
	status = session__exit_status(s, status);
	if (o->census)
		census_targets(s, o);
	session__free(s);
	output__close_files(&files);
	return status;
}
