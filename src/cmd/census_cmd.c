// SPDX-License-Identifier: BSD-2-Clause
/*
 * census_cmd.c - `gpuleak census PID`: finds the process's interpreter, holds
 * its threads still (unless --no-pause), walks its heap (census/), lets it
 * go, and prints every tensor and what holds it, as text or JSON.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "census_cmd.h"
#include "commands.h"
#include "census/census.h"
#include "agent/serve.h"
#include "census/join.h"
#include "census/livemem.h"
#include "model/snapshot.h"
#include "census/pause.h"
#include "model/opts.h"
#include "report/census_report.h"
#include "report/formats.h"
#include "stacks/python/pyoffsets.h"
#include "stacks/python/pyproc.h"
#include "util/log.h"
#include "util/outfile.h"

/* What the walk needs from the interpreter of pid. */
static int find_python(int pid, struct census_py *py)
{
	struct py_target tgt;
	struct py_layout l;
	uint64_t hex = 0;
	int minor, err;

	err = pyproc__find(pid, &tgt);
	if (err == -ESRCH) {
		log_error("census: no process %d", pid);
		return err;
	}
	if (err) {
		log_error("census: no CPython interpreter found in process %d (no mapped python "
			  "or libpython defines _PyRuntime): %s",
			  pid, strerror(-err));
		return err;
	}
	minor = tgt.minor;
	if (tgt.version_addr && pyproc__read(pid, tgt.version_addr, &hex, 8) == 8 &&
	    (hex >> 24) == 3)
		minor = (hex >> 16) & 0xff;
	if (minor >= 13) {
		uint8_t buf[PY_DEBUG_OFFSETS_BYTES];
		ssize_t n = pyproc__read(pid, tgt.runtime, buf, sizeof(buf));

		err = n < 0 ? (int)n : pyoffsets__from_debug(buf, n, &l);
	} else {
		err = pyoffsets__table(minor, (uint32_t)hex, &l);
	}
	if (err || minor < 11) {
		log_error("census: CPython 3.%d in %s: the census reads CPython 3.11 to 3.13",
			  minor, tgt.path);
		return -ENOTSUP;
	}
	memset(py, 0, sizeof(*py));
	py->minor = minor;
	if (pyproc__read(pid, tgt.runtime + l.walk.rt_interp_head, &py->interp, 8) != 8 ||
	    !py->interp) {
		log_error("census: cannot read the interpreter state of process %d (is it still "
			  "starting?)",
			  pid);
		return -EFAULT;
	}
	py->str_type = tgt.str_type;
	py->is_threads_head = l.walk.is_threads_head;
	py->ts_next = l.walk.ts_next;
	py->ts_frame = l.walk.ts_frame;
	if (l.walk.flags & GL_PY_F_NATIVE_TID)
		py->ts_native_tid = l.walk.ts_native_tid;
	py->cframe = l.walk.flags & GL_PY_F_CFRAME;
	py->cf_frame = l.walk.cf_frame;
	py->fr_previous = l.walk.fr_previous;
	py->fr_code = l.walk.fr_code;
	py->fr_owner = l.walk.fr_owner;
	py->owner_shim = l.walk.owner_shim;
	py->co_name = l.co_name;
	py->str_ascii_data = l.str_ascii_data;
	return 0;
}

static int pause_error(int pid, int err)
{
	if (err == -EPERM) {
		log_error("census: not allowed to pause process %d with ptrace: run as root or "
			  "with CAP_SYS_PTRACE (or use --no-pause, which still needs the right to "
			  "read its memory)",
			  pid);
		return EXIT_PRIV;
	}
	if (err == -ETIMEDOUT)
		log_error("census: a thread of process %d did not stop within 2 s (in an "
			  "uninterruptible wait?): try again, or use --no-pause",
			  pid);
	else if (err == -EBUSY)
		log_error("census: process %d is traced by another tool (a debugger?): detach it "
			  "or use --no-pause",
			  pid);
	else
		log_error("census: cannot pause process %d: %s", pid, strerror(-err));
	return EXIT_RUNTIME;
}

/* The census summed up for the reports: its largest holders, each with its allocation line. */
static void summarize(const struct census_report *o, const struct census *c,
		      const struct census_pause *p, struct snap_census *sum)
{
	const struct census_joined *jd = &o->joined;

	*sum = (struct snap_census){ .pid = o->pid, .valid = c->layout_ok };
	if (!c->layout_ok)
		return;
	sum->tensors = c->nr_tensors;
	sum->storages = c->nr_storages;
	sum->bytes = c->bytes;
	sum->orphan_tensors = c->orphan_tensors;
	sum->orphan_bytes = c->orphan_bytes;
	sum->pre_attach_tensors = jd->pre_attach_tensors;
	sum->pre_attach_bytes = jd->pre_attach_bytes;
	sum->paused = o->pause;
	sum->pause_ns = o->pause ? p->ns : 0;
	for (size_t g = 0; g < c->nr_groups; g++) {
		struct snap_census_row row = { .kind = c->groups[g].kind,
					       .tensors = c->groups[g].tensors,
					       .bytes = c->groups[g].bytes };
		uint32_t at = sum->nrows;

		for (size_t i = 0; i < c->nr_tensors && jd->tensors && !row.site; i++)
			if (c->tensors[i].group == (int)g && jd->tensors[i].book) {
				row.site = strdup(jd->tensors[i].book->site);
				row.leak = jd->tensors[i].book->leak;
			}
		/* the largest holders, largest first */
		while (at > 0 && sum->rows[at - 1].bytes < row.bytes)
			at--;
		if (at == SNAP_CENSUS_ROWS) {
			sum->more_rows++;
			free(row.site);
			continue;
		}
		if (sum->nrows == SNAP_CENSUS_ROWS) {
			free(sum->rows[SNAP_CENSUS_ROWS - 1].holder);
			free(sum->rows[SNAP_CENSUS_ROWS - 1].site);
			sum->nrows--;
			sum->more_rows++;
		}
		memmove(&sum->rows[at + 1], &sum->rows[at], (sum->nrows - at) * sizeof(row));
		row.holder = strdup(c->groups[g].path);
		sum->rows[at] = row;
		sum->nrows++;
	}
}

int census_cmd__one(int pid, FILE *text, FILE *json, bool pause, const struct census_caps *caps,
		    const struct census_books *books, struct snap_census *sum)
{
	struct census_report o = { .pid = pid, .pause = pause, .caps = *caps, .books = books };
	struct census_pause *p = calloc(1, sizeof(*p));
	struct census_live *live = NULL;
	struct census c = { 0 };
	struct census_mem mem;
	struct census_py py;
	int status, err;

	if (!p)
		return EXIT_RUNTIME;
	if (find_python(o.pid, &py)) {
		free(p);
		return EXIT_RUNTIME;
	}
	/* pages are cached only while the process is paused (else they would go stale) */
	live = census_live__new(o.pid, o.pause ? o.caps.max_read_bytes : 0);
	if (!live) {
		free(p);
		return EXIT_RUNTIME;
	}
	mem = census_live__mem(live);
	if (o.pause) {
		err = census_pause__stop(o.pid, p);
		if (err) {
			census_live__free(live);
			free(p);
			return pause_error(o.pid, err);
		}
	}
	err = census__walk(&mem, &py, &o.caps, &c);
	if (o.pause)
		census_pause__resume(p);
	status = EXIT_OK;
	if (err) {
		log_error("census: cannot walk the heap of process %d: %s", o.pid,
			  c.layout_error[0] ? c.layout_error : strerror(-err));
		status = err == -EPERM ? EXIT_PRIV : EXIT_RUNTIME;
	} else if (census__join(&c, books, &o.joined)) {
		log_error("census: out of memory joining the census of process %d with the books",
			  o.pid);
		status = EXIT_RUNTIME;
	} else {
		if (sum)
			summarize(&o, &c, p, sum);
		if (json)
			report__census_json(json, &o, &c, p);
		if (text)
			report__census_text(text, &o, &c, p);
		if ((json && (fflush(json) || ferror(json))) ||
		    (text && (fflush(text) || ferror(text)))) {
			log_error("census: failed to write the census of process %d: %s", o.pid,
				  strerror(errno ?: EIO));
			status = EXIT_RUNTIME;
		}
		if (c.nr_tensors && !c.layout_ok) {
			log_error(
				"census: PyTorch's layout in process %d could not be verified, so "
				"no tensor figure is shown: %s",
				o.pid, c.layout_error);
			status = EXIT_RUNTIME;
		}
	}
	census__joined_free(&o.joined);
	census__free(&c);
	census_live__free(live);
	free(p);
	return status;
}

void census_cmd__default_caps(struct census_caps *caps)
{
	*caps = (struct census_caps){ .max_objects = 4000000,
				      .max_read_bytes = 1ULL << 30,
				      .max_ns = 10000ULL * 1000000 };
}

int census_cmd__run(const struct gl_opts *o)
{
	struct census_caps caps;
	FILE *json = NULL;
	int status;

	census_cmd__default_caps(&caps);
	if (o->census_max_objects)
		caps.max_objects = o->census_max_objects;
	if (o->census_max_read)
		caps.max_read_bytes = o->census_max_read;
	if (o->census_max_ms)
		caps.max_ns = o->census_max_ms * 1000000ULL;
	if (o->out[REPORT_JSON]) {
		json = outfile__open(o->out[REPORT_JSON]);
		if (!json) {
			log_error("census: cannot write %s: %s", o->out[REPORT_JSON],
				  outfile__strerror(errno));
			return EXIT_RUNTIME;
		}
	}
	status = census_cmd__one(o->pids[0], json && json == stdout ? NULL : stdout, json,
				 !o->census_no_pause, &caps, NULL, NULL);
	if (json && outfile__close(json) && status == EXIT_OK) {
		log_error("census: failed to write %s (disk full?)", o->out[REPORT_JSON]);
		status = EXIT_RUNTIME;
	}
	return status;
}

int census_cmd__joined(int pid, FILE *text, FILE *json, bool pause, const struct census_caps *caps,
		       const struct census_books *books)
{
	return census_cmd__one(pid, text, json, pause, caps, books, NULL);
}

int census_cmd__serve(const struct gl_opts *o)
{
	return serve__run(o, census_cmd__joined, census_cmd__one);
}
