// SPDX-License-Identifier: BSD-2-Clause
/*
 * python.c - CPython frames of traced processes.
 *
 * It owns, per process, what was learned about its interpreter (pyproc.h,
 * pyoffsets.h) and the BPF configuration made from it (map py_procs); per
 * (process, code object), the code's name, file and line table, read once
 * (pycode.h); and the table of (function, file) pairs behind Python code ids.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pycode.h"
#include "pyline.h"
#include "pyoffsets.h"
#include "pyproc.h"
#include "python.h"
#include "stacks/modules.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/procfs.h"

#define MAX_MERGED 512
#define ATTACH_RETRIES 8	    /* a process may load libpython or exec after attach */
#define ATTACH_RETRY_NS 10000000ULL /* between retries, at stack records */

struct py_proc {
	int pid;
	bool python; /* a supported CPython, configured in BPF */
	uint64_t start_ticks;
	uint32_t mod; /* module id of the interpreter's file, 0 until one of its frames is seen */
	uint32_t retries;  /* attempts left to find an interpreter that was not there */
	uint64_t tried_ns; /* CLOCK_MONOTONIC of the last attempt */
	struct py_target tgt;
	struct py_layout layout;
};

struct code_key {
	uint64_t start_time; /* with pid: the process */
	uint64_t code;
	int32_t pid;
	uint32_t pad;
};

struct code_val {
	uint8_t *table;
	uint32_t len;
	uint32_t id; /* code id, 0 if the code object could not be read */
	int32_t firstlineno;
	uint32_t pad;
};

struct code_name {
	char *function, *file;
	uint32_t next; /* next id with the same hash, 0 = none */
};

struct python {
	struct modules *mods;
	struct py_publisher pub; /* where BPF's settings go; .set NULL: nowhere */
	struct htab *procs;	 /* pid -> struct py_proc * */
	struct htab *codes;	 /* code_key -> code_val */
	struct htab *by_hash;	 /* hash of (function, file) -> first code id */
	struct code_name *names; /* index = code id - 1 */
	uint32_t nr_names, cap_names;
	uint64_t status[GL_PY_NR_STATUS];
	uint64_t inferred; /* walks that took another thread's frames */
};

void python__set_publisher(struct python *py, const struct py_publisher *pub)
{
	py->pub = pub ? *pub : (struct py_publisher){ 0 };
}

struct python *python__new(struct modules *m)
{
	struct python *py = calloc(1, sizeof(*py));

	if (!py)
		return NULL;
	py->mods = m;
	py->procs = htab__new(sizeof(int32_t), sizeof(struct py_proc *));
	py->codes = htab__new(sizeof(struct code_key), sizeof(struct code_val));
	py->by_hash = htab__new(sizeof(uint64_t), sizeof(uint32_t));
	if (!py->procs || !py->codes || !py->by_hash) {
		python__free(py);
		errno = ENOMEM;
		return NULL;
	}
	return py;
}

void python__free(struct python *py)
{
	struct py_proc **pp;
	struct code_val *cv;
	size_t it = 0;

	if (!py)
		return;
	if (py->status[0] || py->nr_names)
		log_debug(
			"python: %u code names; walks ended ok %llu, no thread %llu, no runtime "
			"%llu, fault %llu, truncated %llu, loop %llu, many threads %llu, stale %llu",
			py->nr_names, (unsigned long long)py->status[GL_PY_OK],
			(unsigned long long)py->status[GL_PY_NO_THREAD],
			(unsigned long long)py->status[GL_PY_NO_RUNTIME],
			(unsigned long long)py->status[GL_PY_FAULT],
			(unsigned long long)py->status[GL_PY_TRUNCATED],
			(unsigned long long)py->status[GL_PY_LOOP],
			(unsigned long long)py->status[GL_PY_MANY_THREADS],
			(unsigned long long)py->status[GL_PY_STALE]);
	if (py->status[GL_PY_AMBIGUOUS] || py->inferred)
		log_debug("python: callers of threads without Python: inferred %llu, several "
			  "candidates %llu",
			  (unsigned long long)py->inferred,
			  (unsigned long long)py->status[GL_PY_AMBIGUOUS]);
	while (py->procs && (pp = htab__next(py->procs, &it, NULL)))
		free(*pp);
	it = 0;
	while (py->codes && (cv = htab__next(py->codes, &it, NULL)))
		free(cv->table);
	for (uint32_t i = 0; i < py->nr_names; i++) {
		free(py->names[i].function);
		free(py->names[i].file);
	}
	free(py->names);
	htab__free(py->procs);
	htab__free(py->codes);
	htab__free(py->by_hash);
	free(py);
}

static struct py_proc *proc_lookup(struct python *py, int pid)
{
	int32_t key = pid;
	struct py_proc **pp = htab__lookup(py->procs, &key);

	return pp ? *pp : NULL;
}

/* The interpreter's version and layout: from Py_Version and the table, or from _Py_DebugOffsets. */
static int layout_of(int pid, const struct py_target *tgt, struct py_layout *l, int *minor_out)
{
	uint8_t *buf = NULL;
	uint64_t hex = 0;
	int minor = tgt->minor, err;
	ssize_t n;

	if (tgt->version_addr && pyproc__read(pid, tgt->version_addr, &hex, sizeof(hex)) == 8 &&
	    (hex >> 24) == 3)
		minor = (hex >> 16) & 0xff;
	else
		hex = 0;
	*minor_out = minor;
	if (minor >= 13) {
		buf = malloc(PY_DEBUG_OFFSETS_BYTES);
		if (!buf)
			return -ENOMEM;
		n = pyproc__read(pid, tgt->runtime, buf, PY_DEBUG_OFFSETS_BYTES);
		err = n < 0 ? (int)n : pyoffsets__from_debug(buf, n, l);
		free(buf);
		return err;
	}
	return pyoffsets__table(minor, (uint32_t)hex, l);
}

/*
 * When the interpreter is running, its first thread state must point back at
 * its interpreter: a cheap proof that the offsets fit this build.
 */
static bool layout_fits(int pid, const struct py_target *tgt, const struct py_layout *l)
{
	uint64_t interp = 0, tstate = 0, back = 0;

	if (pyproc__read(pid, tgt->runtime + l->walk.rt_interp_head, &interp, 8) != 8 || !interp)
		return true; /* not initialized yet: nothing to check */
	if (pyproc__read(pid, interp + l->walk.is_threads_head, &tstate, 8) != 8)
		return false;
	if (!tstate)
		return true;
	return pyproc__read(pid, tstate + l->ts_interp, &back, 8) == 8 && back == interp;
}

static int configure(const struct py_publisher *pub, struct py_proc *pp)
{
	struct gl_py_proc walk;
	long tck = sysconf(_SC_CLK_TCK);
	int err, minor;

	err = pyproc__find(pp->pid, &pp->tgt);
	if (err)
		return err;
	err = layout_of(pp->pid, &pp->tgt, &pp->layout, &minor);
	if (err) {
		if (minor)
			log_warn("PID %d runs CPython 3.%d (%s), whose frames gpuleak cannot walk: "
				 "%s",
				 pp->pid, minor, pp->tgt.path, strerror(-err));
		else
			log_warn("PID %d runs a CPython of unknown version (%s): no Python frames",
				 pp->pid, pp->tgt.path);
		return -ENOTSUP;
	}
	if (!layout_fits(pp->pid, &pp->tgt, &pp->layout))
		log_warn(
			"PID %d: CPython 3.%d in %s is not laid out as gpuleak expects; its Python "
			"frames may be missing",
			pp->pid, pp->layout.minor, pp->tgt.path);
	walk = pp->layout.walk;
	walk.runtime = pp->tgt.runtime;
	walk.start_ticks = pp->start_ticks;
	walk.tick_ns = tck > 0 ? 1000000000 / tck : 10000000;
	if (pub->set) {
		err = pub->set(pub->ctx, pp->pid, &walk);
		if (err) {
			/* a full table is said once, by its writer */
			if (err != -E2BIG)
				log_warn("PID %d: cannot enable Python frames: %s", pp->pid,
					 strerror(-err));
			return err;
		}
	}
	pp->python = true;
	if (pp->layout.hexversion)
		log_info("PID %d runs CPython 3.%d.%d (%s): Python frames enabled", pp->pid,
			 pp->layout.minor, (pp->layout.hexversion >> 8) & 0xff, pp->tgt.path);
	else
		log_info("PID %d runs CPython 3.%d (%s): Python frames enabled", pp->pid,
			 pp->layout.minor, pp->tgt.path);
	return 0;
}

static void forget_codes(struct python *py, int pid)
{
	const struct code_key *k;
	struct code_key *drop;
	struct code_val *v;
	size_t it = 0, n = 0;

	drop = malloc((htab__count(py->codes) + 1) * sizeof(*drop));
	if (!drop)
		return;
	while ((v = htab__next(py->codes, &it, (const void **)&k))) {
		if (k->pid != pid)
			continue;
		free(v->table);
		drop[n++] = *k;
	}
	for (size_t i = 0; i < n; i++)
		htab__delete(py->codes, &drop[i]);
	free(drop);
}

void python__detach(struct python *py, int pid)
{
	struct py_proc *pp = proc_lookup(py, pid);
	int32_t key = pid;

	if (!pp)
		return;
	if (py->pub.clear && pp->python)
		py->pub.clear(py->pub.ctx, pid);
	forget_codes(py, pid);
	htab__delete(py->procs, &key);
	free(pp);
}

int python__attach(struct python *py, int pid)
{
	struct py_proc *pp = proc_lookup(py, pid), **slot;
	int32_t key = pid;
	uint64_t ticks;
	int err;

	if (procfs__start_ticks(pid, &ticks))
		return -ESRCH;
	if (pp && pp->start_ticks == ticks)
		return pp->python ? 0 : -ENOENT;
	python__detach(py, pid);
	pp = calloc(1, sizeof(*pp));
	if (!pp)
		return -ENOMEM;
	pp->pid = pid;
	pp->start_ticks = ticks;
	slot = htab__upsert(py->procs, &key, NULL);
	if (!slot) {
		free(pp);
		return -ENOMEM;
	}
	*slot = pp;
	pp->tried_ns = now_ns();
	err = configure(&py->pub, pp);
	if (err == -ENOENT)
		pp->retries = ATTACH_RETRIES;
	else if (err)
		log_debug("PID %d: no Python frames: %s", pid, strerror(-err));
	return err;
}

/* A process without an interpreter may load one later (dlopen, exec): look again, a few times. */
static void retry_attach(struct python *py, struct py_proc *pp, uint64_t now)
{
	int err;

	if (pp->python || !pp->retries || now - pp->tried_ns < ATTACH_RETRY_NS)
		return;
	pp->retries--;
	pp->tried_ns = now;
	err = configure(&py->pub, pp);
	if (err && err != -ENOENT)
		pp->retries = 0;
}

/* Code id of (function, file), interned; 0 on allocation failure. */
static uint32_t intern_name(struct python *py, const char *function, const char *file)
{
	uint64_t h = hash_bytes(function, strlen(function), hash_bytes(file, strlen(file), 7));
	struct code_name *n;
	uint32_t *head, id;
	bool created;

	head = htab__upsert(py->by_hash, &h, &created);
	if (!head)
		return 0;
	for (id = created ? 0 : *head; id; id = py->names[id - 1].next)
		if (!strcmp(py->names[id - 1].function, function) &&
		    !strcmp(py->names[id - 1].file, file))
			return id;
	if (py->nr_names == py->cap_names) {
		uint32_t cap = py->cap_names ? 2 * py->cap_names : 256;
		struct code_name *names = realloc(py->names, cap * sizeof(*names));

		if (!names)
			goto fail;
		py->names = names;
		py->cap_names = cap;
	}
	n = &py->names[py->nr_names];
	n->function = strdup(function);
	n->file = strdup(file);
	if (!n->function || !n->file) {
		free(n->function);
		free(n->file);
		goto fail;
	}
	n->next = created ? 0 : *head;
	*head = ++py->nr_names;
	return *head;
fail:
	if (created)
		htab__delete(py->by_hash, &h);
	return 0;
}

static const struct code_val *code_of(struct python *py, const struct py_proc *pp,
				      const struct stack_owner *proc, uint64_t code)
{
	struct code_key k = { .start_time = proc->start_time, .code = code, .pid = proc->pid };
	struct code_val *v = htab__lookup(py->codes, &k);
	struct py_code c;
	bool created;

	if (v)
		return v;
	v = htab__upsert(py->codes, &k, &created);
	if (!v)
		return NULL;
	if (pycode__read(pp->pid, &pp->layout, &pp->tgt, code, &c) == 0) {
		v->id = intern_name(py, c.function, c.file);
		v->firstlineno = c.firstlineno;
		v->table = c.table;
		v->len = c.len;
		c.table = NULL;
		pycode__clear(&c);
	}
	return v;
}

static bool is_eval_frame(struct python *py, struct py_proc *pp, const struct frame *f)
{
	const struct module_info *mi;

	if (f->kind != FRAME_NATIVE || f->addr < pp->tgt.eval_start || f->addr >= pp->tgt.eval_end)
		return false;
	if (!pp->mod) {
		mi = modules__info(py->mods, f->mod);
		if (!mi || (uint64_t)mi->dev != pp->tgt.dev || (uint64_t)mi->ino != pp->tgt.ino)
			return false;
		pp->mod = f->mod;
	}
	return f->mod == pp->mod;
}

int python__merge_frames(const struct frame *native, const bool *is_eval, int n,
			 const struct frame *pyf, const uint32_t *flags, int npy, struct frame *out,
			 int max)
{
	int k = 0, next = 0;

	for (int i = 0; i < n && k < max; i++) {
		if (!is_eval[i] || next >= npy) {
			out[k++] = native[i];
			continue;
		}
		/* the frames this eval-loop call runs: up to and including its entry frame */
		while (next < npy && k < max) {
			out[k++] = pyf[next];
			if (flags[next++] & GL_PY_ENTRY)
				break;
		}
	}
	while (next < npy && k < max)
		out[k++] = pyf[next++];
	return k;
}

/* A thread of a Python process that runs no Python: why its stack has no Python caller. */
static int note_no_caller(uint16_t status, struct frame *frames, int n, int max)
{
	uint32_t note = status == GL_PY_NO_THREAD ? NOTE_PY_NONE :
			status == GL_PY_AMBIGUOUS ? NOTE_PY_AMBIGUOUS :
						    0;

	if (note && n < max && n < MAX_MERGED)
		frames[n++] = (struct frame){ .mod = note, .kind = FRAME_NOTE };
	return n;
}

int python__merge(struct python *py, const struct stack_owner *proc, const struct stack_view *v,
		  struct frame *frames, int n, int max)
{
	struct frame pyf[GL_MAX_PY_FRAMES], out[MAX_MERGED];
	uint32_t flags[GL_MAX_PY_FRAMES];
	bool is_eval[MAX_MERGED] = { false };
	int npy = v->rec->nr_py, k;
	struct py_proc *pp;

	py->status[v->rec->py_status < GL_PY_NR_STATUS ? v->rec->py_status : GL_PY_FAULT]++;
	pp = proc_lookup(py, proc->pid);
	if (pp && !pp->python)
		retry_attach(py, pp, now_ns());
	if (!pp || !pp->python || npy > GL_MAX_PY_FRAMES || n > MAX_MERGED)
		return n;
	if (!npy)
		return note_no_caller(v->rec->py_status, frames, n, max);
	for (int i = 0; i < npy; i++) {
		const struct gl_py_frame *f = &v->py[i];
		const struct code_val *cv = code_of(py, pp, proc, f->code);
		int line = 0;

		if (cv && cv->id)
			line = pyline__line(pp->layout.minor, cv->table, cv->len, cv->firstlineno,
					    f->lasti);
		pyf[i] = (struct frame){ .addr = line,
					 .mod = cv ? cv->id : 0,
					 .kind = FRAME_PYTHON };
		flags[i] = f->flags;
	}
	if (max > MAX_MERGED)
		max = MAX_MERGED;
	if (flags[0] & GL_PY_INFERRED) {
		/* another thread's frames: after this thread's own, behind the note */
		py->inferred++;
		if (n < max)
			frames[n++] = (struct frame){ .mod = NOTE_PY_INFERRED, .kind = FRAME_NOTE };
		for (int i = 0; i < npy && n < max; i++)
			frames[n++] = pyf[i];
		return n;
	}
	for (int i = 0; i < n; i++)
		is_eval[i] = is_eval_frame(py, pp, &frames[i]);
	k = python__merge_frames(frames, is_eval, n, pyf, flags, npy, out, max);
	memcpy(frames, out, k * sizeof(*out));
	return k;
}

void python__code_info(struct python *py, uint32_t id, const char **function, const char **file)
{
	if (!py || id == 0 || id > py->nr_names) {
		*function = NULL;
		*file = NULL;
		return;
	}
	*function = py->names[id - 1].function;
	*file = py->names[id - 1].file;
}
