// SPDX-License-Identifier: BSD-2-Clause
/*
 * record_cmd.c - `gpuleak record`: a tracing session (as attach or run)
 * whose books feed a recorder through hooks chained in front of the
 * session's own, and the tensor windows through the session's tier hook. No
 * report is printed: `gpuleak report FILE` makes it (--json FILE writes the
 * session's own final report too, which the recording's report equals). On a
 * terminal, a progress line on stderr; an existing recording is replaced only
 * with --force.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "books/books.h"
#include "session/session.h"
#include "model/snapshot.h"
#include "session/tiers.h"
#include "offline.h"
#include "agent/incidents.h"
#include "census_cmd.h"
#include "attach.h"
#include "output.h"
#include "recording/record.h"
#include "stacks/python/python.h"
#include "trace/loader.h"
#include "util/clock.h"
#include "util/fmt.h"
#include "util/log.h"

#define STEP_MS 100
#define PROGRESS_NS 500000000ULL

struct rec_cmd {
	struct recorder *rec;
	struct python *python;
	struct output_files files; /* --json */
};

/* The recording keeps the tiers' numbers as they are. */
_Static_assert((int)GLR_WINDOW_OPEN == (int)TIER_OPEN && (int)GLR_WINDOW_TAIL == (int)TIER_TAIL &&
		       (int)GLR_WINDOW_CLOSE == (int)TIER_CLOSE &&
		       (int)GLR_WINDOW_STOP == (int)TIER_STOP,
	       "window events");
_Static_assert(GLR_WHY_NR == TIER_NR_WHY && TIER_WHY_START == 0 && TIER_WHY_REQUEST == 4,
	       "why a window opened");

static void on_proc_new(void *ctx, struct proc *proc)
{
	struct rec_cmd *rc = ctx;

	recorder__proc_new(rc->rec, proc);
}

static void on_proc_exit(void *ctx, struct proc *proc)
{
	struct rec_cmd *rc = ctx;

	recorder__proc_exit(rc->rec, proc);
}

static void on_applied(void *ctx, const void *data, size_t size, uint32_t stack)
{
	struct rec_cmd *rc = ctx;

	recorder__applied(rc->rec, data, size, stack);
}

static void on_window(void *ctx, int pid, enum tier_event ev, enum tier_why why, uint64_t ts,
		      bool forgot)
{
	struct rec_cmd *rc = ctx;

	recorder__window(rc->rec, pid, ev, ev == TIER_OPEN ? why : 0, ts, forgot);
}

static void code_info(void *ctx, uint32_t id, const char **function, const char **file)
{
	struct rec_cmd *rc = ctx;

	python__code_info(rc->python, id, function, file);
}

static void explain_create_error(const char *path, int err)
{
	if (err == ELOOP)
		log_error("cannot record to %s: it is a symbolic link (not followed): name "
			  "another -o FILE",
			  path);
	else if (err == EMLINK)
		log_error("cannot record to %s: it has other hard links: name another -o FILE",
			  path);
	else if (err == EINVAL)
		log_error("cannot record to %s: not a regular file: name a file with -o", path);
	else if (err == EBUSY)
		log_error("cannot record to %s: another gpuleak record is writing it: name "
			  "another -o FILE",
			  path);
	else if (err == EEXIST)
		log_error("cannot record to %s: a recording appeared there meanwhile: add --force "
			  "to replace it, or name another -o FILE",
			  path);
	else if (err == EPERM)
		log_error("cannot record to %s: it belongs to another user: name another -o "
			  "FILE",
			  path);
	else
		log_error("cannot record to %s: %s: name a path in a writable directory", path,
			  strerror(err));
}

/*
 * The end: BPF's counters and books, drained and compared as for a final
 * report, which --json writes.
 */
static int finish(struct session *s, struct rec_cmd *rc, const struct gl_opts *o)
{
	struct books *b = session__books(s);
	struct snapshot *snap;
	int err, out_err = 0;

	/* the recording's books end here: the drain reads the ring to its end */
	tracer__stop(session__tracer(s));
	snap = session__snapshot(s, o->out[REPORT_JSON] ? 0 : 1, true);

	if (!snap)
		return -ENOMEM;
	if (o->out[REPORT_JSON])
		out_err = output__write_files(snap, &rc->files);
	for (uint32_t i = 0; i < snap->nprocs; i++) {
		const struct snap_proc *p = &snap->procs[i];

		if (!p->exited && p->bpf_valid)
			recorder__bpf_proc(rc->rec, p->pid, &p->bpf);
	}
	err = recorder__finish(rc->rec, snap->now_ns, snap->stats, books__counters(b)->malformed,
			       tracer__nr_probes(session__tracer(s)));
	snapshot__free(snap);
	return err ?: out_err;
}

/* "recording job.glr: 12.5 s, 4211 events, 1.20 MiB, 0 lost", redrawn in place. */
static void progress(const struct rec_cmd *rc, const struct gl_opts *o, uint64_t elapsed_ns,
		     const uint64_t *stats)
{
	uint64_t lost =
		stats[GL_STAT_LOST_STACK] + stats[GL_STAT_LOST_CALL] + stats[GL_STAT_LOST_PROC];
	char b[32];

	fprintf(stderr, "\rrecording %s: %.1f s, %llu events, %s, %llu lost\033[K", o->record_path,
		elapsed_ns / 1e9, (unsigned long long)recorder__calls(rc->rec),
		fmt_bytes(recorder__size(rc->rec), b, sizeof(b)), (unsigned long long)lost);
	fflush(stderr);
}

static int record_loop(struct session *s, struct rec_cmd *rc, const struct gl_opts *o)
{
	bool tty = o->verbosity >= 0 && isatty(STDERR_FILENO);
	uint64_t stats[GL_NR_STATS], start = now_ns(), next = start;
	bool done = false, said = false;
	int status = EXIT_OK;
	char b[32];

	while (!status && !done) {
		uint64_t now;

		status = session__step(s, STEP_MS, &done);
		if (tracer__stats(session__tracer(s), stats))
			memset(stats, 0, sizeof(stats));
		now = now_ns();
		if (recorder__tick(rc->rec, now, stats))
			status = EXIT_RUNTIME;
		if (tty && (now >= next || done)) {
			progress(rc, o, now - start, stats);
			next = now + PROGRESS_NS;
		}
		if (recorder__truncated(rc->rec) && !said) {
			log_warn("%s reached --max-size (%s): recording stopped", o->record_path,
				 fmt_bytes(o->max_size, b, sizeof(b)));
			said = done = true;
		}
	}
	if (tty)
		fputc('\n', stderr); /* the last progress line stays */
	return status;
}

/*
 * An existing recording is not replaced without --force: a second run with the
 * same -o must not lose the first. Devices and FIFOs are written as they are.
 */
static int check_replace(const struct gl_opts *o)
{
	struct stat st;

	if (o->force || lstat(o->record_path, &st) || !S_ISREG(st.st_mode) || !st.st_size)
		return 0;
	log_error("%s exists (%lld bytes): add --force to replace it, or name another -o FILE",
		  o->record_path, (long long)st.st_size);
	return -EEXIST;
}

int record_cmd__run(const struct gl_opts *o)
{
	struct gl_opts so = *o;
	struct rec_cmd rc = {};
	struct session_sink sink = {
		.proc_new = on_proc_new,
		.proc_exit = on_proc_exit,
		.applied = on_applied,
		.ctx = &rc,
	};
	struct recorder_opts ro = { .max_size = o->max_size,
				    .code_info = code_info,
				    .code_ctx = &rc };
	struct tier_hook tier_hook = { .window = on_window, .ctx = &rc };
	const struct snap_tensors *tl;
	struct incidents *in = NULL;
	struct session *s;
	struct books *b;
	int status;
	char sz[32];

	so.cmd = o->argv ? CMD_RUN : CMD_ATTACH;
	so.interval_ms = 0;
	ro.stack_mode = o->stack_mode;
	ro.ran_command = o->argv != NULL;
	ro.replace = o->force;
	/* the file first: a bad -o costs no BPF load */
	if (check_replace(o) || output__open_files(o, &rc.files))
		return EXIT_RUNTIME;
	if (o->incident_dir && !(in = attach__open_incidents(o))) {
		output__close_files(&rc.files);
		return EXIT_RUNTIME;
	}
	rc.rec = recorder__new(o->record_path, &ro);
	if (!rc.rec) {
		explain_create_error(o->record_path, errno);
		output__close_files(&rc.files);
		return EXIT_RUNTIME;
	}
	s = session__new(&so, &status);
	if (!s) {
		recorder__discard(rc.rec); /* nothing was recorded */
		output__close_files(&rc.files);
		incidents__free(in);
		return status;
	}
	if (in)
		session__set_incident_hook(s, incidents__hook, in);
	if (o->census_on_oom)
		session__set_census_hook(s, census_cmd__one);
	b = session__books(s);
	rc.python = books__python(b);
	if (session__set_sink(s, &sink)) {
		log_error("out of memory");
		status = EXIT_RUNTIME;
		recorder__discard(rc.rec);
		rc.rec = NULL;
		goto cleanup;
	}
	status = session__start(s);
	if (status) {
		recorder__discard(rc.rec); /* nothing was recorded */
		rc.rec = NULL;
		goto cleanup;
	}
	/* records reach the books from the first step on; times count from the session's start */
	recorder__begin(rc.rec, books__modules(b), books__stacks(b), session__start_ns(s),
			books__opts(b)->series_width_ns);
	tl = session__tensors(s);
	if (tl)
		recorder__tensor_level(rc.rec, tl->mode, tl->sample_bytes);
	session__set_tier_hook(s, &tier_hook); /* the first windows, open now, are told at once */
	status = record_loop(s, &rc, o);
	if (!recorder__failed(rc.rec) && finish(s, &rc, o) && status == EXIT_OK)
		status = EXIT_RUNTIME;
	if (recorder__failed(rc.rec) && status == EXIT_OK)
		status = EXIT_RUNTIME;
	if (status == EXIT_OK)
		log_info("recorded %llu calls to %s (%s)%s",
			 (unsigned long long)recorder__calls(rc.rec), o->record_path,
			 fmt_bytes(recorder__size(rc.rec), sz, sizeof(sz)),
			 recorder__truncated(rc.rec) ? ", truncated at --max-size" : "");
	status = session__exit_status(s, status);
cleanup:
	session__unset_sink(s);
	recorder__free(rc.rec);
	session__free(s);
	incidents__free(in);
	output__close_files(&rc.files);
	return status;
}
