// SPDX-License-Identifier: BSD-2-Clause
/*
 * attach.c - attach and run: drive a session until its targets exit, the
 * duration ends or a signal comes, with a summary every --interval, then the
 * final report on stdout and in the files the command line names.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "attach.h"
#include "model/session.h"
#include "model/snapshot.h"
#include "output.h"
#include "report/report.h"
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

static int final_report(struct session *s, const struct gl_opts *o)
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
		err = report__text(stdout, snap, &to);
	err = output__write_files(snap, o) ?: err;
	if (snap->lost_events)
		log_warn("%llu events were lost: figures are incomplete (raise --ringbuf-size)",
			 (unsigned long long)snap->lost_events);
	else if (!snap->complete)
		log_warn("%s", report__incomplete_why(snap, why, sizeof(why)));
	snapshot__free(snap);
	return err ? EXIT_RUNTIME : EXIT_OK;
}

int session__run(const struct gl_opts *o)
{
	uint64_t start_ns, next_summary_ns, now;
	struct session *s;
	bool done = false;
	int status;

	s = session__new(o, &status);
	if (!s)
		return status;
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
		status = final_report(s, o);
	status = session__exit_status(s, status);
	session__free(s);
	return status;
}
