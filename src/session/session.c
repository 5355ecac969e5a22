// SPDX-License-Identifier: BSD-2-Clause
/*
 * session.c - one tracing session.
 *
 * It owns the tracer (BPF side), the books and the tables behind them, the
 * list of targets and their state (waiting for libcuda, attached, exited),
 * and one step of the main loop; snapshots.c makes the snapshot every command
 * reports from.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "books/analysis.h"
#include "books/books.h"
#include "books/explain.h"
#include "census/join.h"
#include "gpu/sampler.h"
#include "session.h"
#include "session_int.h"
#include "model/site.h"
#include "model/snapshot.h"
#include "stacks/modstore.h"
#include "stacks/native/symbolize.h"
#include "stacks/native/unwind.h"
#include "stacks/python/python.h"
#include "tiers.h"
#include "trace/event.h"
#include "trace/libcuda.h"
#include "trace/loader.h"
#include "trace/probes.h"
#include "trace/pyprocs.h"
#include "trace/scache.h"
#include "trace/targets.h"
#include "util/clock.h"
#include "model/timeline.h"
#include "model/mvtrace.h"
#include "util/fmt.h"
#include "util/log.h"
#include "util/procfs.h"

#define CUDA_OOM 2 /* CUDA_ERROR_OUT_OF_MEMORY */
/* --perfetto: changes closer than this keep the last; past this many points in all, the
 * resolution doubles (model/timeline.h) */
#define TIMELINE_RES_NS 1000000ULL
#define TIMELINE_MAX_POINTS (1U << 20)
#define GPU_SAMPLE_AGE_SERVE_NS 10000000000ULL

static volatile sig_atomic_t stop_signal;

static volatile sig_atomic_t tensor_request;

static void on_tensor_request(int sig)
{
	(void)sig;
	tensor_request = 1;
}

/* Whether the stop signal was sent by a process (kill), not by the terminal. */
static volatile sig_atomic_t stop_by_kill;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	stop_signal = sig;
	stop_by_kill = si && si->si_code <= 0; /* SI_USER, SI_QUEUE, SI_TKILL */
}

static int on_record(void *ctx, const struct event *ev)
{
	struct session *s = ctx;

	if (ev->type == GL_REC_PROC && ev->proc->event == GL_PROC_LIBLOAD &&
	    targets__lib_mapped(s->targets, ev->proc))
		books__note_unheld(s->books, ev->proc);
	books__apply(s->books, ev);
	return 0;
}

void session__set_incident_hook(struct session *s, session_incident_fn fn, void *ctx)
{
	s->incident_fn = fn;
	s->incident_ctx = ctx;
}

/* The books as they are now (drained first where drain), only_pid's alone where > 0;
 * judge_pid's verdicts as of judge_ns where that is not 0. Below. */

/* The flight recorder is told, with the books as they are now; pid's verdicts as of
 * judge_ns where it is not 0 (its failure: a census's pause is no part of its history). */
static void tell_incident(struct session *s, enum incident_cause cause, int pid, const char *what,
			  uint64_t judge_ns, struct incident_census *ic)
{
	struct snapshot *snap = session__snapshot_of(s, 0, true, false, 0, pid, judge_ns);

	if (!snap) {
		log_warn("PID %d: %s: no incident written: out of memory", pid, what);
		return;
	}
	/* the census's summary becomes the snapshot's, for the bundle's reports */
	if (ic->sum && !snapshot__add_census(snap, ic->sum))
		ic->sum = NULL;
	s->incident_fn(s->incident_ctx, cause, pid, what, snap, ic);
	snapshot__free(snap);
}

/* --census-on-oom: the census of pid, held by BPF at its failure, into ic; then pid goes
 * on (or stays with another gpuleak that holds it too). Below. */
static void census_held(struct session *s, int pid, struct incident_census *ic);

/* A bundle without a census says why, and how to have one next time. */
static void census_not_taken(struct session *s, enum incident_cause cause,
			     struct incident_census *ic)
{
	*ic = (struct incident_census){ 0 };
	if (cause != INCIDENT_OOM)
		snprintf(ic->note, sizeof(ic->note),
			 "not taken: the process had ended when gpuleak learned of it");
	else if (!s->o->census_on_oom)
		snprintf(ic->note, sizeof(ic->note),
			 "not taken: gpuleak holds a process at its failure only with "
			 "--census-on-oom; run with it to see what holds the tensors next time "
			 "(or 'gpuleak census PID' while the process lives)");
	else
		snprintf(ic->note, sizeof(ic->note),
			 "not taken: the process could not be held at its failure (held by this "
			 "gpuleak already, or the kernel refused the signal)");
}

/* Bytes held at exit under stacks judged to leak (their verdict as of the exit). */
static uint64_t leaking_at_exit(const struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	const struct agg_key *k;
	const struct agg *a;
	struct verdict_info vi;
	uint64_t bytes = 0;
	size_t it = 0;

	while ((a = proc__next_agg(proc, &it, &k))) {
		if (!a->bytes || k->cls == GL_CLASS_ADDRESS || k->cls == GL_CLASS_IMPORTED)
			continue;
		series__classify(a->series, t->exit_ns, &vi);
		if (vi.verdict == VERDICT_LEAK)
			bytes += a->bytes;
	}
	return bytes;
}

/* A process that ended badly: killed by a signal, or holding memory where it leaked. */
static void exit_incident(struct session *s, struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	int sig = t->exit_code & 0x7f;
	struct incident_census ic;
	uint64_t leaking;
	char what[256], b[32];

	if (sig && sig != 0x7f) {
		snprintf(what, sizeof(what), "killed by signal %d (%s)%s", sig, strsignal(sig),
			 sig == SIGKILL ? ": the kernel's OOM killer, or a kill -9" : "");
		census_not_taken(s, INCIDENT_KILLED, &ic);
		tell_incident(s, INCIDENT_KILLED, t->pid, what, 0, &ic);
	} else if ((leaking = leaking_at_exit(proc))) {
		snprintf(what, sizeof(what),
			 "exited (status %d) holding %s at stacks judged to leak",
			 (t->exit_code >> 8) & 0xff, fmt_bytes(leaking, b, sizeof(b)));
		census_not_taken(s, INCIDENT_LEAK_AT_EXIT, &ic);
		tell_incident(s, INCIDENT_LEAK_AT_EXIT, t->pid, what, 0, &ic);
	}
}

static void on_proc_end(void *ctx, struct proc *proc, uint32_t event)
{
	const struct proc_totals *t = proc__totals(proc);
	struct session *s = ctx;
	char b[32];

	if (event == GL_PROC_EXIT && s->sink.proc_exit)
		s->sink.proc_exit(s->sink.ctx, proc);
	if (event == GL_PROC_EXIT)
		tracer__forget_proc(s->tracer, t->pid, t->start_time);
	if (event == GL_PROC_EXEC) {
		if (t->bytes[GL_CLASS_DEVICE])
			log_info("PID %d exec'd holding %s of device memory; its books start over",
				 t->pid, fmt_bytes(t->bytes[GL_CLASS_DEVICE], b, sizeof(b)));
		return;
	}
	if (s->incident_fn)
		exit_incident(s, proc);
	targets__exited(s->targets, t->pid, t->comm);
}

static void on_libs_changed(void *ctx, int pid)
{
	struct session *s = ctx;

	targets__libs_changed(s->targets, pid);
}

static void prefetch_maps(void *ctx, int pid)
{
	books__prefetch_maps(ctx, pid);
}

/* An exit status from a targets__* result. */
static int exit_status(int err)
{
	/* run's command not found (127) or found and not runnable (126), as a shell says */
	if (err == -ENOENT || err == -ENOEXEC)
		return err == -ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
	return err == -EPERM ? EXIT_PRIV : err ? EXIT_RUNTIME : EXIT_OK;
}

static void on_proc_new(void *ctx, struct proc *proc)
{
	struct session *s = ctx;

	if (s->sink.proc_new)
		s->sink.proc_new(s->sink.ctx, proc);
}

/* NVML's figures at an out-of-memory failure: the device (or the only one), the process,
 * the other processes. */
static void on_oom_nvml(void *ctx, int pid, int dev, struct oom_facts *facts)
{
	struct session *s = ctx;
	const struct nvml_sample *n = gpu_sampler__get(s->gpus);
	uint64_t used, others;

	if (!n || !n->ndevices)
		return;
	if (dev < 0 && n->ndevices != 1)
		return; /* which device is not known: NVML cannot tell more than the books */
	if (dev < 0)
		dev = 0;
	if (!nvml_sample__proc_on(n, pid, (uint32_t)dev, &used, &others))
		return;
	facts->nvml = true;
	facts->dev_total = n->devs[dev].total;
	facts->dev_free = n->devs[dev].free;
	facts->others_used = others;
	facts->proc_listed = used != NVML_UNKNOWN;
	facts->proc_used = facts->proc_listed ? used : 0;
}

/* The cause of an out-of-memory failure, as the report will give it. */
static void say_cause(const struct proc *proc, const struct failure *f)
{
	const struct proc_totals *t = proc__totals(proc);
	struct oom_explain ex;

	if (!f->has_facts)
		return;
	oom__classify(&f->facts, &ex);
	log_warn("PID %d (%s): %sout of memory: %s: %s; try: %s", t->pid, t->comm,
		 f->is_retry ? "PyTorch's retry after freeing its cache ran " : "",
		 oom__cause_name(ex.cause), ex.why, ex.action);
}

/* Out of memory that reaches the program: not PyTorch's first request, which its retry
 * after freeing the cache may save (an incident then if the retry fails too). A process
 * BPF holds at the failure (--census-on-oom) goes on at once for a first request, else
 * after its census. */
static void oom_incident(struct session *s, struct proc *proc, const struct failure *f,
			 const char *site)
{
	const struct proc_totals *t = proc__totals(proc);
	char what[512], b[32], cause[64] = "";
	struct incident_census ic;
	struct oom_explain ex;

	if (!s->incident_fn || f->rc != CUDA_OOM || f->retry == RETRY_PENDING) {
		if (f->stopped && tracer__release(s->tracer, t->pid))
			log_debug("PID %d: held at an out-of-memory failure that PyTorch's retry "
				  "may save: released at once",
				  t->pid);
		return;
	}
	if (f->has_facts) {
		oom__classify(&f->facts, &ex);
		snprintf(cause, sizeof(cause), " (%s)", oom__cause_name(ex.cause));
	}
	snprintf(what, sizeof(what), "out of memory%s: %s of %s at %s%s", cause,
		 probe__name(f->api), fmt_bytes(f->bytes, b, sizeof(b)), site,
		 f->is_retry ? ", PyTorch's retry after freeing its cache failed too" : "");
	census_not_taken(s, INCIDENT_OOM, &ic);
	if (f->stopped)
		census_held(s, t->pid, &ic);
	tell_incident(s, INCIDENT_OOM, t->pid, what, f->ts, &ic);
	free(ic.json);
	free(ic.text);
	snap_census__free(ic.sum);
}

static void on_failure(void *ctx, struct proc *proc, const struct failure *f)
{
	const struct proc_totals *t = proc__totals(proc);
	struct session *s = ctx;
	char b1[32], b2[32], b3[32], site[256], holder[256];

	say_cause(proc, f);
	site[0] = '\0';
	if (s->incident_fn)
		session__describe_site(s, f->stack, site, sizeof(site));
	oom_incident(s, proc, f, site); /* also lets a held process go */

	session__describe_site(s, f->stack, site, sizeof(site));
	if (!f->nr_holders) {
		log_warn("PID %d (%s): %s of %s at %s failed with %s while %s of device memory was "
			 "held",
			 t->pid, t->comm, probe__name(f->api), fmt_bytes(f->bytes, b1, sizeof(b1)),
			 site, cuda__error_name(f->rc), fmt_bytes(f->held_device, b2, sizeof(b2)));
		return;
	}
	session__describe_site(s, f->holders[0].stack, holder, sizeof(holder));
	log_warn("PID %d (%s): %s of %s at %s failed with %s; %s of device memory held, the "
		 "most (%s) by %s",
		 t->pid, t->comm, probe__name(f->api), fmt_bytes(f->bytes, b1, sizeof(b1)), site,
		 cuda__error_name(f->rc), fmt_bytes(f->held_device, b2, sizeof(b2)),
		 fmt_bytes(f->holders[0].bytes, b3, sizeof(b3)), holder);
}

/* NVML's view of the devices; NULL when there is none, or nothing is traced yet. */
const struct nvml_sample *session__sample_nvml(struct session *s)
{
	/* a machine with nothing traced needs no child process for NVML */
	if (!procs__count(books__procs(s->books)))
		return NULL;
	return gpu_sampler__get(s->gpus);
}

/*
 * Processes whose exit record was lost (ring buffer full): BPF keeps their
 * final books marked exited; take them now. Only those that exited before the
 * reader's position: BPF books an exit before its calls' records are read.
 */
void session__reconcile_exits(struct session *s)
{
	struct procs *procs = books__procs(s->books);
	uint64_t read_ns = tracer__read_ns(s->tracer);
	struct gl_proc_stats st;
	struct proc *proc;

	for (uint32_t i = 0; (proc = procs__at(procs, i)); i++) {
		const struct proc_totals *t = proc__totals(proc);

		if (t->exited || tracer__proc_stats(s->tracer, t->pid, &st) ||
		    st.start_time != t->start_time || !st.exit_time || st.exit_time >= read_ns)
			continue;
		books__exited(s->books, proc, &st, st.exit_time);
	}
}

int session__step(struct session *s, int timeout_ms, bool *done)
{
	int err = 0, n;
	uint64_t now;

	*done = false;
	if (targets__scanning(s->targets) && timeout_ms > 20)
		timeout_ms = 20;
	n = tracer__poll(s->tracer, timeout_ms);
	if (n < 0) {
		log_error("reading the ring buffer failed: %s (run again with -vv and report it)",
			  strerror(-n));
		*done = true;
		return EXIT_RUNTIME;
	}
	now = now_ns();
	if (stop_signal) {
		/* run's child gets what gpuleak got, unless the terminal sent it to both */
		if (stop_signal != SIGINT || stop_by_kill)
			targets__signal_child(s->targets, stop_signal);
		log_info("stopping (signal %d)", (int)stop_signal);
		/* the report's books end here: what is in the ring is read to its end */
		tracer__stop(s->tracer);
		*done = true;
		return EXIT_OK;
	}
	if (tensor_request) {
		tensor_request = 0;
		log_info("signal %d: a tensor window is asked for", SIGUSR1);
		tiers__request(s->tiers);
	}
	if (s->tiers && tiers__step(s->tiers, now) == -ENOMEM) {
		log_error("out of memory");
		*done = true;
		return EXIT_RUNTIME;
	}
	if (now >= s->next_reconcile_ns) {
		session__reconcile_exits(s);
		s->next_reconcile_ns = now + 1000000000ULL;
	}
	modstore__sync(s->keep, s->stacks, s->mods);
	if (targets__step(s->targets, now, &err)) {
		*done = true;
		return exit_status(err);
	}
	if (s->deadline_ns && now >= s->deadline_ns) {
		tracer__stop(s->tracer);
		*done = true;
		return EXIT_OK;
	}
	return EXIT_OK;
}

int session__exit_status(struct session *s, int status)
{
	int st = 0, err;

	if (status != EXIT_OK)
		return status;
	err = targets__wait_child(s->targets, &st);
	if (err == -ENOENT)
		return status;
	if (err)
		return EXIT_RUNTIME;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return EXIT_SIGNAL + WTERMSIG(st);
	return EXIT_RUNTIME;
}

void session__free(struct session *s)
{
	if (!s)
		return;
	modstore__sync(s->keep, s->stacks, s->mods);
	modstore__free(s->keep);
	tiers__free(s->tiers);
	timeline__free(s->timeline);
	mvtrace__free(s->mvtrace);
	books__free(s->books);
	gpu_sampler__free(s->gpus);
	tracer__free(s->tracer);
	symbolizer__free(s->sym);
	python__free(s->python);
	unwinder__free(s->unwinder);
	stacks__free(s->stacks);
	modules__free(s->mods);
	targets__free(s->targets);
	free(s);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* What gpuleak holds beside its ring buffer once attached, about (books, stacks, libelf). */
#define RESIDENT_BESIDE_RING (48ULL << 20)

/*
 * The memory cgroup kills a gpuleak whose ring buffer does not fit in it at once,
 * with no message and an empty report: said before anything is loaded.
 */
static void warn_memory_limit(const struct gl_opts *o)
{
	uint64_t max, cur, need = o->ringbuf_bytes + RESIDENT_BESIDE_RING;
	char b1[32], b2[32], b3[32], b4[32];

	if (procfs__self_memory_limit(&max, &cur) || max > cur + need)
		return;
	log_warn("this memory cgroup allows %s and %s is used: the %s ring buffer and the "
		 "books need about %s more, and the kernel may kill gpuleak without a word "
		 "(lower --ringbuf-size, or raise the limit)",
		 fmt_bytes(max, b1, sizeof(b1)), fmt_bytes(cur, b2, sizeof(b2)),
		 fmt_bytes(o->ringbuf_bytes, b3, sizeof(b3)), fmt_bytes(need, b4, sizeof(b4)));
}

static int setup(struct session *s)
{
	const struct gl_opts *o = s->o;
	struct tracer_opts to = {
		.all = o->all,
		.follow_forks = o->follow_forks,
		.stack_mode = o->stack_mode,
		.stack_bytes = o->stack_bytes,
		.python = !o->no_python,
		.torch_python_only = o->torch_python_only,
		.ringbuf_bytes = o->ringbuf_bytes,
		.max_allocs = o->max_allocs,
		.max_procs = o->max_procs,
		.max_held = o->max_held,
		.hold_timeout_ns = o->hold_timeout_ms * 1000000ULL,
		.max_py_procs = o->max_py_procs,
		/* tensor windows are per process */
		.torch_per_pid = !o->no_torch && !o->tensors_full && !o->tensors_sampled,
		.bench_floor = o->bench_floor,
		.stop_on_oom = o->census_on_oom,
		.rank_env = o->ranks_env,
		.stack_cache = o->stack_mode == GL_STACK_DWARF && !o->no_stack_cache,
		.sample_bytes = o->tensor_sample_bytes,
	};
	struct books_opts bo = { .series_width_ns = o->resolution_ms * 1000000ULL,
				 .sample_bytes = o->tensor_sample_bytes,
				 .rank_env = o->ranks_env,
				 /* what the HTML page and the memory_viz snapshot show */
				 .keep_at_exit = o->needs & GL_NEED_KEEP_AT_EXIT,
				 .attach_python = !o->no_python };
	struct books_hooks hooks = {
		.proc_new = on_proc_new,
		.proc_end = on_proc_end,
		.libs_changed = on_libs_changed,
		.failure = on_failure,
		.oom_nvml = on_oom_nvml,
		.ctx = s,
	};
	struct targets_opts tgo = {
		.pids = o->pids,
		.nr_pids = o->nr_pids,
		.all = o->all,
		.argv = o->cmd == CMD_RUN ? o->argv : NULL,
		.libcuda = o->libcuda,
		.wait_ms = o->wait_ms,
		.no_python = o->no_python,
		.no_torch = o->no_torch,
		.torch = o->torch,
		.keep_going = o->cmd == CMD_SERVE,
		.rescan_ms = o->rescan_ms,
	};
	struct py_publisher pub;

	raise_fd_limit();
	if (o->bench_torch_lib)
		libcuda__set_torch_name(o->bench_torch_lib);
	s->mods = modules__new();
	s->stacks = stacks__new();
	if (s->stacks)
		stacks__set_max(s->stacks, o->max_stacks); /* bounds the books' memory */
	s->unwinder = s->mods ? unwinder__new(s->mods, o->stack_mode) : NULL;
	s->sym = s->mods ? symbolizer__new(s->mods) : NULL;
	s->python = s->mods ? python__new(s->mods) : NULL;
	s->books = s->unwinder ? books__new(s->mods, s->stacks, s->unwinder, s->python, &bo) : NULL;
	if (s->books)
		procs__set_max(books__procs(s->books), o->max_procs); /* -a: a host's worth */
	if (!s->mods || !s->stacks || !s->unwinder || !s->sym || !s->python || !s->books) {
		log_error("out of memory (free memory and run again)");
		return EXIT_RUNTIME;
	}
	books__set_hooks(s->books, &hooks);
	if ((o->needs & GL_NEED_TIMELINE) &&
	    !(s->timeline = timeline__new(s->books, TIMELINE_RES_NS, TIMELINE_MAX_POINTS))) {
		log_error("out of memory (free memory and run again)");
		return EXIT_RUNTIME;
	}
	if ((o->needs & GL_NEED_MEMORY_EVENTS) &&
	    !(s->mvtrace = mvtrace__new(s->books, MVTRACE_MAX_EVENTS))) {
		log_error("out of memory (free memory and run again)");
		return EXIT_RUNTIME;
	}
	if (o->keep_dir && !(s->keep = modstore__new(o->keep_dir, o->keep_max))) {
		log_error("cannot keep modules in %s: %s: name a writable directory with "
			  "--keep-modules",
			  o->keep_dir, strerror(errno));
		return EXIT_RUNTIME;
	}
	/* the agent answers scrapes: NVML's figures may be that old; a report samples anew */
	s->gpus = gpu_sampler__new(o->cmd == CMD_SERVE ? GPU_SAMPLE_AGE_SERVE_NS : 0);
	if (!s->gpus) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	warn_memory_limit(o);
	s->tracer = tracer__new(&to, on_record, s);
	if (!s->tracer)
		return errno == EPERM ? EXIT_PRIV : EXIT_RUNTIME;
	pub = pyprocs__publisher(s->tracer);
	python__set_publisher(s->python, &pub);
	if (to.stack_cache) {
		struct scache_publisher sp = scache__publisher(s->tracer);

		unwinder__set_publisher(s->unwinder, &sp);
	}
	s->targets = targets__new(&tgo, s->tracer, s->python, prefetch_maps, s->books);
	if (!s->targets) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

struct session *session__new(const struct gl_opts *o, int *status)
{
	struct session *s = calloc(1, sizeof(*s));
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO };

	if (!s) {
		*status = EXIT_RUNTIME;
		return NULL;
	}
	s->o = o;
	s->start_ns = now_ns();
	*status = setup(s);
	if (*status) {
		session__free(s);
		return NULL;
	}
	/* SIGHUP (a closed terminal, a supervisor) ends a session as SIGTERM does */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_flags = 0;
	sa.sa_handler = on_tensor_request;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return s;
}

int session__start(struct session *s)
{
	const struct gl_opts *o = s->o;
	int status = exit_status(targets__start(s->targets));

	s->start_ns = now_ns();
	s->deadline_ns = o->duration_ms ? s->start_ns + o->duration_ms * 1000000ULL : 0;
	if (!status && !(s->tiers = tiers__new(s))) {
		log_error("out of memory");
		status = EXIT_RUNTIME;
	}
	return status;
}

struct gpu_sampler *session__gpus(struct session *s)
{
	return s->gpus;
}

struct tracer *session__tracer(struct session *s)
{
	return s->tracer;
}

struct python *session__python(struct session *s)
{
	return s->python;
}

void session__request_tensors(struct session *s)
{
	if (s->tiers)
		tiers__request(s->tiers);
}

int session__set_sink(struct session *s, const struct session_sink *sink)
{
	int err = sink->applied ? books__observe(s->books, sink->applied, sink->ctx) : 0;

	if (!err)
		s->sink = *sink;
	return err;
}

void session__unset_sink(struct session *s)
{
	if (s->sink.applied)
		books__unobserve(s->books, s->sink.applied, s->sink.ctx);
	s->sink = (struct session_sink){ 0 };
}

void session__set_tier_hook(struct session *s, const struct tier_hook *hook)
{
	if (s->tiers)
		tiers__set_hook(s->tiers, hook);
}

const struct snap_tensors *session__tensors(struct session *s)
{
	return s->tiers ? tiers__view(s->tiers, now_ns()) : NULL;
}

uint64_t session__start_ns(const struct session *s)
{
	return s->start_ns;
}

bool session__scanning(const struct session *s)
{
	return targets__scanning(s->targets);
}

struct books *session__books(struct session *s)
{
	return s->books;
}

void session__set_census_hook(struct session *s, session_census_fn fn)
{
	s->census_fn = fn;
}

/* The census of pid into ic's memory (text and JSON); an exit status, -1 if not run. */
static int census_into(struct session *s, int pid, uint64_t max_ns, struct incident_census *ic)
{
	struct census_caps caps = { .max_objects = 4000000,
				    .max_read_bytes = 1ULL << 30,
				    .max_ns = max_ns };
	struct census_books books;
	FILE *text, *json;
	int status = -1;

	if (session__census_books(s, pid, &books))
		return -1;
	text = open_memstream(&ic->text, &ic->text_len);
	json = open_memstream(&ic->json, &ic->json_len);
	ic->sum = calloc(1, sizeof(*ic->sum));
	if (text && json && ic->sum)
		status = s->census_fn(pid, text, json, true, &caps, &books, ic->sum);
	if (text)
		fclose(text);
	if (json)
		fclose(json);
	session__census_books_free(&books);
	return status;
}

static void census_held(struct session *s, int pid, struct incident_census *ic)
{
	uint64_t timeout = tracer__hold_timeout(s->tracer), since = 0, ns;
	bool held, by_kernel = false;
	int status = -1;

	/* gone already: the hold's deadline let it go before gpuleak read the record (a
	 * gpuleak frozen, or far behind) */
	held = !tracer__held_since(s->tracer, pid, &since);
	if (!held)
		ic->past_deadline = tracer__hold_expired(s->tracer, pid, &ns, &by_kernel);
	/* half the deadline for the read of a held process: stopping the threads and writing
	 * take the rest; one the deadline let go already is read as it runs, and that read
	 * pauses it for nothing: the whole deadline (a slow read of a busy heap, a gpuleak
	 * behind on its CPU, which is why it was let go) */
	if (s->census_fn)
		status = census_into(s, pid, held ? timeout / 2 : timeout, ic);
	if (held && !tracer__release(s->tracer, pid))
		ic->past_deadline = tracer__hold_expired(s->tracer, pid, &ns, &by_kernel);
	ic->held = held || ic->past_deadline;
	ic->held_ns = held && !ic->past_deadline ? now_ns() - since : 0;
	ic->taken = status == 0 && ic->json_len;
	if (ic->past_deadline)
		snprintf(ic->note, sizeof(ic->note),
			 "%s: the process was held at its failure until the hold's deadline "
			 "(--hold-timeout %.1f s) let it go, before the census was done%s",
			 ic->taken ? "taken" : "not taken", timeout / 1e9,
			 ic->taken ? ": read while it ran on, it may be torn" : "");
	else if (ic->taken)
		snprintf(ic->note, sizeof(ic->note),
			 "taken while the process was held at its failure: held %.1f ms",
			 ic->held_ns / 1e6);
	else
		snprintf(ic->note, sizeof(ic->note),
			 "not taken: the census of the held process failed (gpuleak's log says "
			 "why: no CPython, or PyTorch's layout not verified); it was held %.1f ms",
			 ic->held_ns / 1e6);
	if (!ic->taken) {
		free(ic->json);
		free(ic->text);
		ic->json = ic->text = NULL;
		ic->json_len = ic->text_len = 0;
		snap_census__free(ic->sum);
		ic->sum = NULL;
	}
}
