// SPDX-License-Identifier: BSD-2-Clause
/*
 * attach.c - attach and run: drive a session until its targets exit, the
 * duration ends or a signal comes, with a summary every --interval, then the
 * final report on stdout and in the files the command line names.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/incidents.h"
#include "attach.h"
#include "census_cmd.h"
#include "census/join.h"
#include "session/session.h"
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

/*
 * --census: the census of each target still alive, joined with the session's books
 * (the line that allocated each tensor's memory), its text kept for after the report
 * (texts[i], malloc'd) and its summary added to the snapshot for the report files.
 */
static void census_targets(struct session *s, const struct gl_opts *o, struct snapshot *snap,
			   char **texts)
{
	struct census_caps caps;

	census_cmd__default_caps(&caps);
	snap->census = calloc(o->nr_pids ? o->nr_pids : 1, sizeof(*snap->census));
	if (!snap->census) {
		log_error("census: out of memory");
		return;
	}
	for (int i = 0; i < o->nr_pids; i++) {
		struct census_books books;
		size_t len = 0;
		FILE *f;

		if (kill(o->pids[i], 0) && errno == ESRCH)
			continue;
		tracer__drain(session__tracer(s));
		if (session__census_books(s, o->pids[i], &books)) {
			log_error("census: out of memory reading the books of process %d",
				  o->pids[i]);
			continue;
		}
		f = open_memstream(&texts[i], &len);
		if (f) {
			census_cmd__one(o->pids[i], f, NULL, true, &caps, &books,
					&snap->census[snap->ncensus]);
			if (fclose(f))
				log_error("census: out of memory keeping the census of process %d",
					  o->pids[i]);
			else if (snap->census[snap->ncensus].pid)
				snap->ncensus++;
		}
		session__census_books_free(&books);
	}
}

static int final_report(struct session *s, const struct gl_opts *o, struct output_files *files)
{
	struct text_opts to = { .max_stacks = o->top,
				.max_frames = o->frames,
				.full_stacks = o->full_stacks };
	struct snapshot *snap;
	char *texts[GL_MAX_PIDS] = { 0 };
	char why[320];
	int err = 0;

	/* the books end here (as at a signal, if the targets exited): the drain that
	 * follows reads the ring to its end, however long a load left it */
	tracer__stop(session__tracer(s));
	snap = session__snapshot(s, 0, true);
	if (!snap) {
		log_error("failed to build the report: %s (free memory and run again)",
			  strerror(errno));
		return EXIT_RUNTIME;
	}
	if (o->census)
		census_targets(s, o, snap, texts);
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
	for (int i = 0; i < o->nr_pids; i++) {
		if (texts[i] && fprintf(stdout, "\n%s", texts[i]) < 0)
			err = -EIO;
		free(texts[i]);
	}
	if (fflush(stdout))
		err = -EIO;
	return err ? EXIT_RUNTIME : EXIT_OK;
}

struct incidents *attach__open_incidents(const struct gl_opts *o)
{
	struct incidents_opts io = { .dir = o->incident_dir,
				     .max_count = o->incident_max,
				     .max_bytes = o->incident_max_bytes };
	struct incidents *in;

	if (!o->incident_dir)
		return NULL;
	in = incidents__open(&io);
	if (!in)
		log_error("cannot keep incidents in %s: %s (a directory of gpuleak's user or "
			  "root, not writable by others, that gpuleak can make or open)",
			  o->incident_dir, strerror(errno));
	return in;
}

int session__run(const struct gl_opts *o)
{
	uint64_t start_ns, next_summary_ns, now;
	struct output_files files;
	struct incidents *in = NULL;
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
	if (o->incident_dir && !(in = attach__open_incidents(o))) {
		output__close_files(&files);
		return EXIT_RUNTIME;
	}
	s = session__new(o, &status);
	if (!s) {
		output__close_files(&files);
		incidents__free(in);
		return status;
	}
	if (in)
		session__set_incident_hook(s, incidents__hook, in);
	if (o->census_on_oom)
		session__set_census_hook(s, census_cmd__one);
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
	session__free(s);
	incidents__free(in);
	output__close_files(&files);
	return status;
}
