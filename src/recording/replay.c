// SPDX-License-Identifier: BSD-2-Clause
/*
 * replay.c - rebuilding the books from a recording.
 *
 * Recorded ids (modules, stacks, Python code objects) are mapped to this
 * replay's own tables; a reference to a definition the recording lost
 * (damaged chunk) degrades the frame or the stack, never the byte counts.
 * Only process and call records reach the books, each checked by them as a
 * ring-buffer record would be, and the tensor windows' effects on them: the
 * forgetting of the last window's blocks as a window opens and the end of
 * PyTorch's whole map at its first tail, where the live books had them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "books/books.h"
#include "model/snapshot.h"
#include "model/mvtrace.h"
#include "model/timeline.h"
#include "model/winlog.h"
#include "recread.h"
#include "replay.h"
#include "stacks/modstore.h"
#include "stacks/native/symbolize.h"
#include "trace/probes.h"
#include "util/htab.h"

#define DEFAULT_WIDTH_NS 1000000000ULL
#define MAX_WIDTH_NS 3600000000000ULL

struct proc_id {
	uint64_t start_time;
	uint32_t pid;
	uint32_t pad;
};

struct proc_info {
	uint64_t first_ns;
	int32_t ns_pid;
	char comm[16];
};

struct pycode {
	char *function, *file;
};

struct replay {
	struct replay_opts o;
	struct modules *mods;
	struct stacks *stacks;
	struct symbolizer *sym;
	struct books *books;
	struct timeline *timeline; /* o.timeline */
	struct mvtrace *mvtrace;   /* o.memory_events */
	struct htab *mod_ids;	   /* recorded id -> local id */
	struct htab *stack_ids;	   /* recorded id -> local id */
	struct htab *code_ids;	   /* recorded id -> index in codes */
	struct pycode *codes;	   /* codes[0]: unknown */
	uint32_t nr_codes, cap_codes;
	struct htab *procinfo; /* proc_id -> proc_info */
	struct htab *bpf;      /* pid -> gl_proc_stats */
	uint64_t stats[GL_NR_STATS];
	bool have_stats, have_session;
	uint64_t start_ns, end_ns, first_ts, last_ts, width_ns, malformed;
	uint32_t nr_probes;
	uint8_t stack_mode;
	bool ran_command; /* GLR_SESSION_COMMAND: the report leaves out idle processes */
	char host[GLR_STR_MAX + 1];
	char *file;
	struct snap_recording info;
	struct winlog windows; /* valid when have_tensors: every process's (older recordings) */
	bool have_tensors;
	const char *tensor_mode; /* static */
	uint64_t tensor_sample;
	struct pid_winlog {
		int pid;
		struct winlog log;
	} * pwins; /* each process's own windows */
	uint32_t nr_pwins, cap_pwins;
	struct snap_tensors tensors;
	struct frame frames[GLR_FRAMES_MAX]; /* a stack being translated */
};

static void on_proc_new(void *ctx, struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	struct replay *rp = ctx;
	struct proc_id k = { .start_time = t->start_time, .pid = (uint32_t)t->pid };
	struct proc_info *pi = htab__lookup(rp->procinfo, &k);

	if (!pi)
		return;
	books__set_identity(proc, pi->comm, pi->ns_pid, pi->first_ns);
}

static int add_code(struct replay *rp, const char *function, const char *file)
{
	struct pycode *c;

	if (rp->nr_codes == rp->cap_codes) {
		uint32_t cap = rp->cap_codes ? 2 * rp->cap_codes : 64;
		struct pycode *codes = realloc(rp->codes, cap * sizeof(*codes));

		if (!codes)
			return -ENOMEM;
		rp->codes = codes;
		rp->cap_codes = cap;
	}
	c = &rp->codes[rp->nr_codes];
	c->function = strdup(function);
	c->file = strdup(file);
	if (!c->function || !c->file) {
		free(c->function);
		free(c->file);
		return -ENOMEM;
	}
	rp->nr_codes++;
	return 0;
}

struct replay *replay__new(const struct replay_opts *o)
{
	struct replay *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return NULL;
	rp->o = *o;
	rp->width_ns = DEFAULT_WIDTH_NS;
	rp->mods = modules__new();
	rp->stacks = stacks__new();
	rp->sym = rp->mods ? symbolizer__new(rp->mods) : NULL;
	rp->mod_ids = htab__new(sizeof(uint32_t), sizeof(uint32_t));
	rp->stack_ids = htab__new(sizeof(uint32_t), sizeof(uint32_t));
	rp->code_ids = htab__new(sizeof(uint32_t), sizeof(uint32_t));
	rp->procinfo = htab__new(sizeof(struct proc_id), sizeof(struct proc_info));
	rp->bpf = htab__new(sizeof(uint32_t), sizeof(struct gl_proc_stats));
	if (!rp->stacks || !rp->sym || !rp->mod_ids || !rp->stack_ids || !rp->code_ids ||
	    !rp->procinfo || !rp->bpf || add_code(rp, "?", "?")) {
		replay__free(rp);
		errno = ENOMEM;
		return NULL;
	}
	return rp;
}

void replay__free(struct replay *rp)
{
	if (!rp)
		return;
	timeline__free(rp->timeline);
	mvtrace__free(rp->mvtrace);
	books__free(rp->books);
	symbolizer__free(rp->sym);
	stacks__free(rp->stacks);
	modules__free(rp->mods);
	htab__free(rp->mod_ids);
	htab__free(rp->stack_ids);
	htab__free(rp->code_ids);
	htab__free(rp->procinfo);
	htab__free(rp->bpf);
	for (uint32_t i = 0; i < rp->nr_codes; i++) {
		free(rp->codes[i].function);
		free(rp->codes[i].file);
	}
	free(rp->codes);
	free(rp->pwins);
	free(rp->file);
	free(rp);
}

/* The books, made at the first record that needs them (after the session record). */
static struct books *books_of(struct replay *rp)
{
	struct books_opts bo = { .series_width_ns = rp->width_ns,
				 .no_proc_files = true,
				 .keep_at_exit = rp->o.histories || rp->o.memory_events };
	struct books_hooks hooks = { .proc_new = on_proc_new, .ctx = rp };

	if (rp->books)
		return rp->books;
	rp->books = books__new(rp->mods, rp->stacks, NULL, NULL, &bo);
	if (rp->books)
		books__set_hooks(rp->books, &hooks);
	/* as a live session follows it (session.c): 1 ms, at most 2^20 points */
	if (rp->books && rp->o.timeline && !rp->timeline)
		rp->timeline = timeline__new(rp->books, 1000000ULL, 1U << 20);
	if (rp->books && rp->o.memory_events && !rp->mvtrace)
		rp->mvtrace = mvtrace__new(rp->books, MVTRACE_MAX_EVENTS);
	return rp->books;
}

static uint32_t map_id(const struct htab *h, uint32_t id)
{
	const uint32_t *v = htab__lookup(h, &id);

	return v ? *v : 0;
}

static int set_id(struct htab *h, uint32_t id, uint32_t local)
{
	uint32_t *v = htab__upsert(h, &id, NULL);

	if (!v)
		return -ENOMEM;
	*v = local;
	return 0;
}

static int on_module(struct replay *rp, const struct rr_item *it)
{
	uint32_t before = modules__count(rp->mods), local;
	int fd;

	local = modules__add(rp->mods, it->u.module.dev, it->u.module.ino, it->u.module.path,
			     it->u.module.build_id);
	if (!local)
		return -ENOMEM;
	if (modules__count(rp->mods) != before) {
		rp->info.modules++;
		fd = rp->o.no_files ?
			     -1 :
			     modstore__open_module(it->u.module.path, it->u.module.build_id,
						   it->u.module.dev, it->u.module.ino, rp->o.dirs,
						   rp->o.ndirs, NULL, 0);
		if (fd >= 0)
			modules__set_fd(rp->mods, local, fd);
		else
			rp->info.modules_missing++;
	}
	return set_id(rp->mod_ids, it->u.module.id, local);
}

static int on_stack(struct replay *rp, const struct rr_item *it)
{
	struct frame *frames = rp->frames;
	uint32_t n = it->u.stack.n, local;

	for (uint32_t i = 0; i < n; i++) {
		const struct rr_frame *rf = &it->u.stack.frames[i];
		struct frame *f = &frames[i];

		*f = (struct frame){ .addr = rf->addr, .mod = rf->mod, .kind = rf->kind };
		if (rf->kind == GLR_FRAME_NATIVE) {
			f->mod = map_id(rp->mod_ids, rf->mod);
			if (!f->mod)
				f->kind = FRAME_UNKNOWN; /* its module's definition was lost */
		} else if (rf->kind == GLR_FRAME_PYTHON) {
			f->mod = map_id(rp->code_ids, rf->mod);
		}
	}
	local = stacks__intern(rp->stacks, frames, n);
	return local ? set_id(rp->stack_ids, it->u.stack.id, local) : -ENOMEM;
}

static void see_ts(struct replay *rp, uint64_t ts)
{
	if (!rp->first_ts || ts < rp->first_ts)
		rp->first_ts = ts;
	if (ts > rp->last_ts)
		rp->last_ts = ts;
}

static int on_call(struct replay *rp, const struct rr_item *it)
{
	struct books *b = books_of(rp);
	uint32_t stack = it->u.call.stack ? map_id(rp->stack_ids, it->u.call.stack) : 0;

	if (!b)
		return -ENOMEM;
	if (books__replay_call(b, &it->u.call.call, stack) == 0) {
		rp->info.calls++;
		see_ts(rp, it->u.call.call.hdr.ts);
	}
	return 0;
}

static int on_proc(struct replay *rp, const struct rr_item *it)
{
	struct books *b = books_of(rp);

	if (!b)
		return -ENOMEM;
	/* only process records: anything else would need the live process */
	if (it->u.proc.hdr.type == GL_REC_PROC &&
	    books__apply_bytes(b, &it->u.proc, sizeof(it->u.proc)) == 0)
		see_ts(rp, it->u.proc.hdr.ts);
	return 0;
}

/* The tensor level's mode; a window before it (the mode record was lost) means windowed. */
static void on_tensors(struct replay *rp, const char *mode, uint64_t sample_bytes)
{
	if (rp->have_tensors)
		return;
	rp->have_tensors = true;
	rp->tensor_mode = mode;
	rp->tensor_sample = sample_bytes;
	winlog__init(&rp->windows, mode, sample_bytes, rp->have_session ? rp->start_ns : 0);
}

static struct winlog *pid_log(struct replay *rp, int pid)
{
	for (uint32_t i = 0; i < rp->nr_pwins; i++)
		if (rp->pwins[i].pid == pid)
			return &rp->pwins[i].log;
	return NULL;
}

/* Process pid's log of windows (its first window: a new one, as the live tiers start it). */
static struct winlog *window_log(struct replay *rp, int pid, bool first)
{
	struct winlog *w = pid_log(rp, pid);

	if (w && !first)
		return w;
	if (!w) {
		if (rp->nr_pwins == rp->cap_pwins) {
			uint32_t cap = rp->cap_pwins ? 2 * rp->cap_pwins : 16;
			struct pid_winlog *np = realloc(rp->pwins, cap * sizeof(*np));

			if (!np)
				return NULL;
			rp->pwins = np;
			rp->cap_pwins = cap;
		}
		rp->pwins[rp->nr_pwins].pid = pid;
		w = &rp->pwins[rp->nr_pwins++].log;
	}
	winlog__init(w, rp->tensor_mode, rp->tensor_sample, rp->have_session ? rp->start_ns : 0);
	return w;
}

static int on_window(struct replay *rp, const struct rr_item *it)
{
	struct books *b = books_of(rp);
	uint64_t ts = it->u.window.ts;
	int pid = (int)it->u.window.pid;
	struct winlog *w = &rp->windows;

	if (!b)
		return -ENOMEM;
	on_tensors(rp, "windowed", 0);
	see_ts(rp, ts);
	if (pid > 0) {
		w = window_log(rp, pid,
			       it->u.window.event == GLR_WINDOW_OPEN &&
				       it->u.window.why == TIER_WHY_START);
		if (!w)
			return -ENOMEM;
	}
	switch (it->u.window.event) {
	case GLR_WINDOW_OPEN:
		/* as the live books did: the last window's blocks go, with their history */
		if ((it->u.window.flags & GLR_WINDOW_FORGOT) &&
		    books__forget_kind_pid(b, GL_KIND_TORCH, pid, ts, NULL))
			return -ENOMEM;
		winlog__open(w, ts, it->u.window.why);
		break;
	case GLR_WINDOW_TAIL:
		books__torch_map_partial(b);
		winlog__tail(w);
		break;
	case GLR_WINDOW_CLOSE: winlog__close(w, ts); break;
	default: winlog__stop(w); break;
	}
	return 0;
}

/* A process's windows in the snapshot: its own, or (none, older recordings) every process's. */
static void proc_tensors(void *ctx, int pid, uint64_t now, struct snap_tensors *out)
{
	struct replay *rp = ctx;
	struct winlog *w = pid_log(rp, pid);

	winlog__view(w ? w : &rp->windows, now, out);
}

static void on_session(struct replay *rp, const struct rr_item *it)
{
	if (rp->have_session)
		return;
	rp->have_session = true;
	rp->start_ns = it->u.session.start_ns;
	rp->info.wall_start_ns = it->u.session.wall_ns;
	rp->stack_mode = it->u.session.stack_mode;
	rp->ran_command = it->u.session.flags & GLR_SESSION_COMMAND;
	snprintf(rp->host, sizeof(rp->host), "%s", it->u.session.host);
	if (!rp->books && it->u.session.series_width_ns &&
	    it->u.session.series_width_ns <= MAX_WIDTH_NS)
		rp->width_ns = it->u.session.series_width_ns;
}

static int on_item(void *ctx, const struct rr_item *it)
{
	struct replay *rp = ctx;
	struct proc_id pk = {};
	struct proc_info *pi;
	uint32_t code;

	switch (it->type) {
	case GLR_SESSION: on_session(rp, it); return 0;
	case GLR_MODULE: return on_module(rp, it);
	case GLR_PYCODE:
		code = rp->nr_codes;
		if (add_code(rp, it->u.pycode.function, it->u.pycode.file))
			return -ENOMEM;
		return set_id(rp->code_ids, it->u.pycode.id, code);
	case GLR_STACK: return on_stack(rp, it);
	case GLR_PROCINFO:
		pk.pid = it->u.procinfo.pid;
		pk.start_time = it->u.procinfo.start_time;
		pi = htab__upsert(rp->procinfo, &pk, NULL);
		if (!pi)
			return -ENOMEM;
		pi->first_ns = it->u.procinfo.first_ns;
		pi->ns_pid = (int32_t)it->u.procinfo.ns_pid;
		memcpy(pi->comm, it->u.procinfo.comm, sizeof(pi->comm));
		return 0;
	case GLR_CALL: return on_call(rp, it);
	case GLR_PROC: return on_proc(rp, it);
	case GLR_STATS:
		memcpy(rp->stats, it->u.stats.stats, sizeof(rp->stats));
		rp->have_stats = true;
		return 0;
	case GLR_BPF_PROC: {
		struct gl_proc_stats *st = htab__upsert(rp->bpf, &it->u.bpf_proc.pid, NULL);

		if (!st)
			return -ENOMEM;
		*st = it->u.bpf_proc.st;
		return 0;
	}
	case GLR_TRUNCATED:
		rp->info.truncated = true;
		rp->info.max_size = it->u.truncated.max_size;
		return 0;
	case GLR_TENSORS:
		on_tensors(rp, record__tensor_mode_name(it->u.tensors.mode),
			   it->u.tensors.sample_bytes);
		return 0;
	case GLR_WINDOW: return on_window(rp, it);
	case GLR_END:
		rp->info.ended = true;
		rp->end_ns = it->u.end.end_ns;
		rp->malformed = it->u.end.malformed;
		rp->nr_probes = it->u.end.nr_probes;
		return 0;
	}
	return 0;
}

int replay__read(struct replay *rp, struct rec_reader *rr, const char *file)
{
	const struct rr_counts *c;
	int err;

	free(rp->file);
	rp->file = strdup(file ? file : "");
	err = recread__each(rr, on_item, rp);
	c = recread__counts(rr);
	rp->info.file = rp->file ? rp->file : "";
	rp->info.host = rp->host;
	rp->info.version = recread__version(rr);
	rp->info.cut = c->cut;
	rp->info.bytes = c->file_bytes;
	rp->info.skipped_bytes = c->skipped_bytes;
	rp->info.bad_chunks = c->bad_chunks;
	rp->info.bad_records = c->bad_records;
	rp->info.unknown_records = c->unknown_records;
	rp->info.complete = rp->info.ended && !rp->info.truncated && !c->cut && !c->bad_chunks &&
			    !c->bad_records && !c->skipped_bytes && !c->header_damaged && !err;
	return err;
}

const struct snap_recording *replay__info(const struct replay *rp)
{
	return &rp->info;
}

static int recorded_bpf(void *ctx, int pid, struct gl_proc_stats *out)
{
	struct replay *rp = ctx;
	uint32_t k = (uint32_t)pid;
	const struct gl_proc_stats *st = htab__lookup(rp->bpf, &k);

	if (!st)
		return -ENOENT;
	*out = *st;
	return 0;
}

/* Python frames carry their names in the recording, not in a live interpreter. */
static void name_python(struct replay *rp, struct snap_stack *st)
{
	uint32_t n;
	const struct frame *f = st ? stacks__get(rp->stacks, st->id, &n) : NULL;

	for (uint32_t i = 0; f && i < n && i < st->nframes; i++) {
		const struct pycode *code;

		if (f[i].kind != FRAME_PYTHON)
			continue;
		code = &rp->codes[f[i].mod < rp->nr_codes ? f[i].mod : 0];
		st->frames[i].function = code->function;
		st->frames[i].file = code->file;
	}
}

static void proc_timeline(void *ctx, int pid, uint64_t start_time, struct snap_timeline *out)
{
	timeline__proc(ctx, pid, start_time, out);
}

struct snapshot *replay__snapshot(struct replay *rp, uint32_t max_stacks)
{
	struct snapshot_opts so = {
		.now_ns = rp->info.ended ? rp->end_ns : rp->last_ts,
		.start_ns = rp->have_session ? rp->start_ns : rp->first_ts,
		.max_stacks = max_stacks,
		.stats = rp->have_stats ? rp->stats : NULL,
		.bpf_stats = recorded_bpf,
		.bpf_ctx = rp,
		.stack_mode = stack_mode__name(rp->stack_mode),
		.nr_probes = rp->nr_probes,
		.memory_map = true, /* report --memory-viz (a few bytes per block otherwise) */
		.proc_timeline = rp->timeline ? proc_timeline : NULL,
		.timeline_ctx = rp->timeline,
		.histories = rp->o.histories,
		.mvtrace = rp->mvtrace,
	};
	struct books *b = books_of(rp);
	struct snapshot *snap;

	if (!b)
		return NULL;
	if (rp->have_tensors) {
		/* the windows count from the session's start, known or not when the mode came */
		winlog__set_start(&rp->windows, so.start_ns);
		winlog__view(&rp->windows, so.now_ns, &rp->tensors);
		for (uint32_t i = 0; i < rp->nr_pwins; i++) {
			struct snap_tensors one;

			/* the session's, as the live tiers count it: every process's windows */
			winlog__set_start(&rp->pwins[i].log, so.start_ns);
			winlog__view(&rp->pwins[i].log, so.now_ns, &one);
			rp->tensors.armed |= one.armed;
			rp->tensors.windows_total += one.windows_total;
			rp->tensors.armed_s += one.armed_s;
		}
		so.tensors = &rp->tensors;
		so.proc_tensors = proc_tensors;
		so.tensors_ctx = rp;
	}
	snap = snapshot__build(b, rp->sym, &so);
	if (!snap)
		return NULL;
	/* as run's report: the launchers in front of a recorded command are counted, not
	 * listed */
	if (rp->ran_command)
		snapshot__hide_idle(snap);
	else
		snapshot__hide_idle_children(snap);
	snapshot__proc_imbalances(snap, so.imbalance_ratio);
	if (snapshot__group_jobs(snap, so.imbalance_ratio)) {
		snapshot__free(snap);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < snap->nprocs; i++) {
		struct snap_proc *p = &snap->procs[i];

		for (uint32_t j = 0; j < p->nstacks; j++)
			name_python(rp, &p->stacks[j]);
		for (uint32_t j = 0; j < p->nfailures; j++) {
			name_python(rp, p->failures_list[j].stack);
			for (uint32_t h = 0; h < p->failures_list[j].nholders; h++)
				name_python(rp, &p->failures_list[j].holders[h]);
		}
	}
	snap->malformed += rp->malformed;
	snap->complete = snap->complete && rp->malformed == 0 && rp->info.complete;
	snap->recording = &rp->info;
	return snap;
}
