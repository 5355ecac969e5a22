// SPDX-License-Identifier: BSD-2-Clause
/*
 * session.c - one tracing session.
 *
 * It owns the tracer (BPF side), the books and the tables behind them, the
 * list of targets and their state (waiting for libcuda, attached, exited),
 * the main loop, and the final report.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "books/books.h"
#include "books/snapshot.h"
#include "report/report.h"
#include "session.h"
#include "session_int.h"
#include "tiers.h"
#include "stacks/python.h"
#include "stacks/symbolize.h"
#include "stacks/unwind.h"
#include "trace/libcuda.h"
#include "trace/loader.h"
#include "trace/probes.h"
#include "util/log.h"
#include "util/nvml.h"
#include "util/outfile.h"
#include "util/procfs.h"

#define POLL_MS 100
#define RESCAN_ALL_NS 5000000000ULL
#define NVML_TIMEOUT_MS 3000

static volatile sig_atomic_t stop_signal;

static volatile sig_atomic_t tensor_request;

static void on_tensor_request(int sig)
{
	(void)sig;
	tensor_request = 1;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;

	books__apply(s->books, data, size);
	return 0;
}

static void on_proc_end(void *ctx, struct proc *proc, uint32_t event)
{
	struct session *s = ctx;
	struct target *t = targets__find(s, proc->pid);
	char b[32];

	if (event == GL_PROC_EXIT)
		tracer__forget_proc(s->tracer, proc->pid, proc->start_time);
	if (!s->o->no_python) {
		/* a new image has its own interpreter, or none */
		python__detach(s->python, s->tracer, proc->pid);
		if (event == GL_PROC_EXEC)
			python__attach(s->python, s->tracer, proc->pid);
	}
	if (event == GL_PROC_EXEC) {
		if (proc->bytes[GL_CLASS_DEVICE])
			log_info("PID %d exec'd holding %s of device memory; its books start over",
				 proc->pid, fmt_bytes(proc->bytes[GL_CLASS_DEVICE], b, sizeof(b)));
		return;
	}
	if (t && t->state != T_EXITED) {
		t->state = T_EXITED;
		log_info("PID %d (%s) exited", proc->pid, proc->comm);
	}
}

static void on_proc_new(void *ctx, struct proc *proc)
{
	struct session *s = ctx;

	if (!s->o->no_python)
		python__attach(s->python, s->tracer, proc->pid);
}

/* The innermost frame of a stack that is not in the CUDA driver, for one-line messages. */
static void describe_stack(struct session *s, uint32_t id, char *buf, size_t len)
{
	uint32_t n;
	const struct frame *fr = stacks__get(s->stacks, id, &n);
	struct sym_result r;

	snprintf(buf, len, "an unknown site");
	for (uint32_t i = 0; i < n; i++) {
		const struct module_info *mi;

		if (fr[i].kind == FRAME_PYTHON) {
			const char *fn, *file;

			python__code_info(s->python, fr[i].mod, &fn, &file);
			snprintf(buf, len, "%s (%s:%llu)", fn ? fn : "?", file ? file : "?",
				 (unsigned long long)fr[i].addr);
			return;
		}
		if (fr[i].kind != FRAME_NATIVE)
			continue;
		mi = modules__info(s->mods, fr[i].mod);
		if (mi && libcuda__is_driver_name(mi->path))
			continue;
		if (symbolizer__lookup(s->sym, fr[i].mod, fr[i].addr, &r) == 0 && r.function) {
			snprintf(buf, len, "%s", r.function);
			return;
		}
	}
}

static void on_failure(void *ctx, struct proc *proc, const struct failure *f)
{
	struct session *s = ctx;
	char b1[32], b2[32], b3[32], site[256], holder[256];

	describe_stack(s, f->stack, site, sizeof(site));
	if (!f->nr_holders) {
		log_warn("PID %d (%s): %s of %s at %s failed with %s while %s of device memory was "
			 "held", proc->pid, proc->comm, probe__name(f->api),
			 fmt_bytes(f->bytes, b1, sizeof(b1)), site, cuda__error_name(f->rc),
			 fmt_bytes(f->held_device, b2, sizeof(b2)));
		return;
	}
	describe_stack(s, f->holders[0].stack, holder, sizeof(holder));
	log_warn("PID %d (%s): %s of %s at %s failed with %s; %s of device memory held, the "
		 "most (%s) by %s", proc->pid, proc->comm, probe__name(f->api),
		 fmt_bytes(f->bytes, b1, sizeof(b1)), site, cuda__error_name(f->rc),
		 fmt_bytes(f->held_device, b2, sizeof(b2)),
		 fmt_bytes(f->holders[0].bytes, b3, sizeof(b3)), holder);
}

static int tracer_stats_cb(void *ctx, int pid, struct gl_proc_stats *out)
{
	return tracer__proc_stats(ctx, pid, out);
}

static const char *stack_mode_name(enum gl_stack_mode m)
{
	return m == GL_STACK_DWARF ? "dwarf" : m == GL_STACK_FP ? "fp" : "none";
}

/* NVML's view of the devices for a report; NULL when there is none. */
const struct nvml_sample *session__sample_nvml(struct session *s)
{
	int err;

	if (s->nvml_off || !procs__count(books__procs(s->books)))
		return NULL;
	if (!s->nvml)
		s->nvml = malloc(sizeof(*s->nvml));
	err = s->nvml ? nvml__sample_isolated(NULL, NVML_TIMEOUT_MS, s->nvml) : -ENOMEM;
	if (!err)
		return s->nvml;
	log_debug("no NVML figures (GPU capacity, memory held before attach): %s", strerror(-err));
	s->nvml_off = true;
	return NULL;
}

/*
 * Processes whose exit record was lost (ring buffer full): BPF keeps their
 * final books marked exited; take them now.
 */
static void reconcile_exits(struct session *s)
{
	struct procs *procs = books__procs(s->books);
	struct gl_proc_stats st;
	struct proc *proc;

	for (uint32_t i = 0; (proc = procs__at(procs, i)); i++) {
		if (proc->exited || tracer__proc_stats(s->tracer, proc->pid, &st) ||
		    st.start_time != proc->start_time || !st.exit_time)
			continue;
		books__exited(s->books, proc, &st, st.exit_time);
	}
}

static struct snapshot *take_snapshot(struct session *s, uint32_t max_stacks)
{
	uint64_t stats[GL_NR_STATS] = {}, calls[GL_NR_APIS] = {};
	struct snapshot_opts so = {
		.now_ns = now_ns(),
		.start_ns = s->start_ns,
		.max_stacks = max_stacks,
		.stats = stats,
		.api_calls = calls,
		.bpf_stats = tracer_stats_cb,
		.bpf_ctx = s->tracer,
		.python = s->python,
		.stack_mode = stack_mode_name(s->o->stack_mode),
		.nr_probes = tracer__nr_probes(s->tracer),
		.nvml = session__sample_nvml(s),
		.tensors = s->tiers ? tiers__view(s->tiers, now_ns()) : NULL,
		.cap_allocs = s->o->max_allocs,
		.cap_stacks = s->o->max_stacks,
	};
	struct snapshot *snap = NULL;

	/* a call between its kernel-side update and its record can make the two
	 * books differ for an instant: drain and look again before saying so */
	for (int attempt = 0; attempt < 3; attempt++) {
		tracer__drain(s->tracer);
		reconcile_exits(s);
		tracer__stats(s->tracer, stats);
		tracer__api_calls(s->tracer, calls);
		snapshot__free(snap);
		snap = snapshot__build(s->books, s->sym, &so);
		if (!snap || snap->complete || snap->lost_events)
			break;
		usleep(20000);
	}
	/* run: the launchers and shells in front of the job are no part of its report */
	if (snap && s->o->cmd == CMD_RUN)
		snapshot__hide_idle(snap);
	return snap;
}

/* Whether a report file goes to stdout, which then carries nothing else. */
bool session__report_on_stdout(const struct gl_opts *o)
{
	return outfile__is_stdout(o->json_path) || outfile__is_stdout(o->folded_path) ||
	       outfile__is_stdout(o->svg_path) || outfile__is_stdout(o->pprof_path);
}

static void print_summary(struct session *s)
{
	struct text_opts to = { .max_stacks = 3, .max_frames = 6 };
	struct snapshot *snap;

	if (session__report_on_stdout(s->o))
		return;
	snap = take_snapshot(s, 3);
	if (!snap)
		return;
	printf("--- %.1f s ---\n", (now_ns() - s->start_ns) / 1e9);
	report__text(stdout, snap, &to);
	snapshot__free(snap);
}

enum output { OUT_JSON, OUT_FOLDED, OUT_SVG, OUT_PPROF };

/* Writes one report file (none if path is NULL). Returns 0 or -errno, said on stderr. */
static int write_output(const struct snapshot *snap, enum output kind, const char *path)
{
	struct timespec wall;
	struct pprof_opts po = { .default_sample = PPROF_INUSE_SPACE };
	FILE *f;
	int err;

	if (!path)
		return 0;
	f = outfile__open(path);
	if (!f) {
		err = -errno;
		if (err == -ELOOP)
			log_error("cannot write %s: it is a symbolic link (not followed): name the "
				  "file it points to, or another path", path);
		else if (err == -EMLINK)
			log_error("cannot write %s: it has other hard links: remove them, or name "
				  "another path", path);
		else
			log_error("cannot write %s: %s: name a path in a writable directory", path,
				  strerror(-err));
		return err;
	}
	if (kind == OUT_JSON) {
		err = report__json(f, snap);
	} else if (kind == OUT_FOLDED) {
		err = report__folded(f, snap, &(struct folded_opts){ 0 });
	} else if (kind == OUT_SVG) {
		err = report__svg(f, snap, &(struct svg_opts){ 0 });
	} else {
		clock_gettime(CLOCK_REALTIME, &wall);
		po.time_ns = wall.tv_sec * 1000000000ULL + wall.tv_nsec;
		err = report__pprof(f, snap, &po);
	}
	err = outfile__close(f) ?: err;
	if (err)
		log_error("writing %s failed: %s: free space there, or name another path", path,
			  strerror(-err));
	return err;
}

int session__write_files(const struct snapshot *snap, const struct gl_opts *o)
{
	const char *paths[] = { [OUT_JSON] = o->json_path, [OUT_FOLDED] = o->folded_path,
				[OUT_SVG] = o->svg_path, [OUT_PPROF] = o->pprof_path };
	int err = 0;

	for (int i = OUT_JSON; i <= OUT_PPROF; i++)
		err = write_output(snap, i, paths[i]) ?: err;
	return err;
}

static int final_report(struct session *s)
{
	const struct gl_opts *o = s->o;
	struct text_opts to = { .max_stacks = o->top, .max_frames = o->frames };
	struct snapshot *snap = take_snapshot(s, 0);
	char why[320];
	int err = 0;

	if (!snap) {
		log_error("failed to build the report: %s (free memory and run again)",
			  strerror(errno));
		return EXIT_RUNTIME;
	}
	if (!session__report_on_stdout(o))
		err = report__text(stdout, snap, &to);
	err = session__write_files(snap, o) ?: err;
	if (snap->lost_events)
		log_warn("%llu events were lost: figures are incomplete (raise --ringbuf-size)",
			 (unsigned long long)snap->lost_events);
	else if (!snap->complete)
		log_warn("%s", report__incomplete_why(snap, why, sizeof(why)));
	snapshot__free(snap);
	return err ? EXIT_RUNTIME : EXIT_OK;
}


int session__step(struct session *s, int timeout_ms, bool *done)
{
	const struct gl_opts *o = s->o;
	int status = EXIT_OK, n;
	uint64_t now;

	*done = false;
	n = tracer__poll(s->tracer, s->nr_pending && timeout_ms > 20 ? 20 : timeout_ms);
	if (n < 0) {
		log_error("reading the ring buffer failed: %s (run again with -vv and report it)",
			  strerror(-n));
		*done = true;
		return EXIT_RUNTIME;
	}
	now = now_ns();
	if (stop_signal) {
		if (stop_signal == SIGTERM)
			targets__signal_child(s, SIGTERM);
		log_info("stopping (signal %d)", (int)stop_signal);
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
		reconcile_exits(s);
		s->next_reconcile_ns = now + 1000000000ULL;
	}
	modstore__sync(s->keep, s->stacks, s->mods);
	if (targets__step(s, now, &status)) {
		*done = true;
		return status;
	}
	if (s->deadline_ns && now >= s->deadline_ns) {
		*done = true;
		return EXIT_OK;
	}
	if (o->interval_ms && o->cmd != CMD_SERVE && o->cmd != CMD_TOP &&
	    now >= s->next_summary_ns) {
		print_summary(s);
		s->next_summary_ns = now + o->interval_ms * 1000000ULL;
	}
	return EXIT_OK;
}

int session__exit_status(struct session *s, int status)
{
	pid_t r;
	int st = 0;

	if (status != EXIT_OK || s->child <= 0)
		return status;
	if (!s->child_done) {
		while ((r = waitpid(s->child, &st, 0)) < 0 && errno == EINTR)
			;
		if (r != s->child)
			return EXIT_RUNTIME;
		s->child_status = st;
		s->child_done = true;
	}
	if (WIFEXITED(s->child_status))
		return WEXITSTATUS(s->child_status);
	if (WIFSIGNALED(s->child_status))
		return EXIT_SIGNAL + WTERMSIG(s->child_status);
	return EXIT_RUNTIME;
}

void session__free(struct session *s)
{
	if (!s)
		return;
	modstore__sync(s->keep, s->stacks, s->mods);
	modstore__free(s->keep);
	tiers__free(s->tiers);
	books__free(s->books);
	free(s->nvml);
	tracer__free(s->tracer);
	symbolizer__free(s->sym);
	python__free(s->python);
	unwinder__free(s->unwinder);
	stacks__free(s->stacks);
	modules__free(s->mods);
	if (s->child > 0 && !s->child_done)
		waitpid(s->child, NULL, 0);
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
		.bench_floor = o->bench_floor,
		.sample_bytes = o->tensor_sample_bytes,
	};
	struct books_opts bo = { .series_width_ns = o->resolution_ms * 1000000ULL,
				 .sample_bytes = o->tensor_sample_bytes };
	struct books_hooks hooks = {
		.proc_new = on_proc_new,
		.proc_end = on_proc_end,
		.libs_changed = targets__libs_changed,
		.failure = on_failure,
		.ctx = s,
	};

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
	if (!s->mods || !s->stacks || !s->unwinder || !s->sym || !s->python || !s->books) {
		log_error("out of memory (free memory and run again)");
		return EXIT_RUNTIME;
	}
	books__set_hooks(s->books, &hooks);
	if (o->keep_dir && !(s->keep = modstore__new(o->keep_dir, o->keep_max))) {
		log_error("cannot keep modules in %s: %s: name a writable directory with "
			  "--keep-modules", o->keep_dir, strerror(errno));
		return EXIT_RUNTIME;
	}
	s->tracer = tracer__new(&to, on_record, s);
	if (!s->tracer)
		return errno == EPERM ? EXIT_PRIV : EXIT_RUNTIME;
	return EXIT_OK;
}

struct session *session__new(const struct gl_opts *o, int *status)
{
	struct session *s = calloc(1, sizeof(*s));
	struct sigaction sa = { .sa_handler = on_signal };

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
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_tensor_request;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return s;
}

int session__start(struct session *s)
{
	const struct gl_opts *o = s->o;
	int status = targets__start(s);

	s->start_ns = now_ns();
	s->deadline_ns = o->duration_ms ? s->start_ns + o->duration_ms * 1000000ULL : 0;
	s->wait_deadline_ns = s->start_ns + o->wait_ms * 1000000ULL;
	s->next_summary_ns = s->start_ns + o->interval_ms * 1000000ULL;
	s->next_rescan_ns = s->start_ns + RESCAN_ALL_NS;
	if (!status && !(s->tiers = tiers__new(s))) {
		log_error("out of memory");
		status = EXIT_RUNTIME;
	}
	return status;
}

struct snapshot *session__snapshot(struct session *s, uint32_t max_stacks)
{
	return take_snapshot(s, max_stacks);
}

struct tracer *session__tracer(struct session *s)
{
	return s->tracer;
}

const struct nvml_sample *session__nvml(const struct session *s)
{
	return s->nvml_off ? NULL : s->nvml;
}

struct books *session__books(struct session *s)
{
	return s->books;
}

int session__run(const struct gl_opts *o)
{
	struct session *s;
	bool done = false;
	int status;

	s = session__new(o, &status);
	if (!s)
		return status;
	status = session__start(s);
	while (!status && !done)
		status = session__step(s, POLL_MS, &done);
	if (status == EXIT_OK)
		status = final_report(s);
	status = session__exit_status(s, status);
	session__free(s);
	return status;
}
