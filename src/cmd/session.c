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
#include "stacks/python.h"
#include "stacks/symbolize.h"
#include "stacks/unwind.h"
#include "trace/libcuda.h"
#include "trace/loader.h"
#include "trace/probes.h"
#include "util/log.h"
#include "util/outfile.h"
#include "util/procfs.h"

#define POLL_MS 100
#define LIVENESS_NS 250000000ULL
#define RESCAN_ALL_NS 5000000000ULL
#define EXIT_GRACE_NS 1000000000ULL

enum target_state { T_WAITING, T_ATTACHED, T_EXITED };

struct target {
	int pid;
	uint64_t start_ticks;
	enum target_state state;
	uint64_t gone_ns; /* when /proc said it was gone */
};

struct session {
	const struct gl_opts *o;
	struct tracer *tracer;
	struct modules *mods;
	struct stacks *stacks;
	struct unwinder *unwinder;
	struct symbolizer *sym;
	struct python *python;
	struct books *books;
	struct target targets[GL_MAX_PIDS];
	int nr_targets;
	pid_t child;
	int child_status;
	bool child_done;
	uint64_t start_ns, deadline_ns, next_summary_ns, next_liveness_ns, next_rescan_ns;
	uint64_t wait_deadline_ns;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t now_ns(void)
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

static struct target *find_target(struct session *s, int pid)
{
	for (int i = 0; i < s->nr_targets; i++)
		if (s->targets[i].pid == pid)
			return &s->targets[i];
	return NULL;
}

static void on_proc_end(void *ctx, struct proc *proc, uint32_t event)
{
	struct session *s = ctx;
	struct target *t = find_target(s, proc->pid);
	char b[32];

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

static void on_failure(void *ctx, struct proc *proc, const struct failure *f)
{
	char b1[32], b2[32];

	(void)ctx;
	log_warn("PID %d (%s): %s of %s failed with %s while %s of device memory was held",
		 proc->pid, proc->comm, probe__name(f->api), fmt_bytes(f->bytes, b1, sizeof(b1)),
		 cuda__error_name(f->rc), fmt_bytes(f->held_device, b2, sizeof(b2)));
}

static int tracer_stats_cb(void *ctx, int pid, struct gl_proc_stats *out)
{
	return tracer__proc_stats(ctx, pid, out);
}

static const char *stack_mode_name(enum gl_stack_mode m)
{
	return m == GL_STACK_DWARF ? "dwarf" : m == GL_STACK_FP ? "fp" : "none";
}

static struct snapshot *take_snapshot(struct session *s, uint32_t max_stacks)
{
	uint64_t stats[GL_NR_STATS] = {};
	struct snapshot_opts so = {
		.now_ns = now_ns(),
		.start_ns = s->start_ns,
		.max_stacks = max_stacks,
		.stats = stats,
		.bpf_stats = tracer_stats_cb,
		.bpf_ctx = s->tracer,
		.python = s->python,
		.stack_mode = stack_mode_name(s->o->stack_mode),
		.nr_probes = tracer__nr_probes(s->tracer),
	};
	struct snapshot *snap = NULL;

	/* a call between its kernel-side update and its record can make the two
	 * books differ for an instant: drain and look again before saying so */
	for (int attempt = 0; attempt < 3; attempt++) {
		tracer__drain(s->tracer);
		tracer__stats(s->tracer, stats);
		snapshot__free(snap);
		snap = snapshot__build(s->books, s->sym, &so);
		if (!snap || snap->complete || snap->lost_events)
			break;
		usleep(20000);
	}
	return snap;
}

/* Whether a report file goes to stdout, which then carries nothing else. */
static bool report_on_stdout(const struct gl_opts *o)
{
	return outfile__is_stdout(o->json_path) || outfile__is_stdout(o->folded_path) ||
	       outfile__is_stdout(o->svg_path) || outfile__is_stdout(o->pprof_path);
}

static void print_summary(struct session *s)
{
	struct text_opts to = { .max_stacks = 3, .max_frames = 6 };
	struct snapshot *snap;

	if (report_on_stdout(s->o))
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
			log_error("cannot write %s: it is a symbolic link (not followed)", path);
		else if (err == -EMLINK)
			log_error("cannot write %s: it has other hard links", path);
		else
			log_error("cannot write %s: %s", path, strerror(-err));
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
		log_error("writing %s failed: %s", path, strerror(-err));
	return err;
}

static int final_report(struct session *s)
{
	const struct gl_opts *o = s->o;
	struct text_opts to = { .max_stacks = o->top, .max_frames = o->frames };
	struct snapshot *snap = take_snapshot(s, 0);
	const char *paths[] = { [OUT_JSON] = o->json_path, [OUT_FOLDED] = o->folded_path,
				[OUT_SVG] = o->svg_path, [OUT_PPROF] = o->pprof_path };
	int err = 0;

	if (!snap) {
		log_error("failed to build the report: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	if (!report_on_stdout(o))
		err = report__text(stdout, snap, &to);
	for (int i = OUT_JSON; i <= OUT_PPROF; i++)
		err = write_output(snap, i, paths[i]) ?: err;
	if (snap->lost_events)
		log_warn("%llu events were lost: figures are incomplete (raise --ringbuf-size)",
			 (unsigned long long)snap->lost_events);
	else if (!snap->complete)
		log_warn("the books disagree with the kernel's exact counters: figures are "
			 "incomplete (see \"stats\" and \"bpf\" in --json)");
	snapshot__free(snap);
	return err ? EXIT_RUNTIME : EXIT_OK;
}

static void report_attached(struct session *s, const struct cuda_lib *lib, int n, int pid)
{
	char missing[2048];
	char comm[32] = "";

	if (pid > 0 && procfs__comm(pid, comm, sizeof(comm)))
		comm[0] = '\0';
	libcuda__missing(lib, true, missing, sizeof(missing));
	if (missing[0])
		log_warn("%s lacks %s: those calls are not traced", lib->display, missing);
	libcuda__missing(lib, false, missing, sizeof(missing));
	if (missing[0])
		log_debug("%s does not export: %s", lib->display, missing);
	if (pid > 0)
		log_info("attached to PID %d (%s): %d functions in %s (%d probes)", pid, comm, n,
			 lib->display, tracer__nr_probes(s->tracer));
	else
		log_info("attached: %d functions in %s (%d probes)", n, lib->display,
			 tracer__nr_probes(s->tracer));
}

/* Attaches to the library if it is new. Returns 0, or -errno (-EPERM: privileges). */
static int attach_lib(struct session *s, const struct cuda_lib *lib, int pid)
{
	int n;

	if (tracer__has_lib(s->tracer, lib->dev, lib->ino)) {
		if (pid > 0)
			log_info("attached to PID %d through %s", pid, lib->display);
		return 0;
	}
	n = tracer__attach_lib(s->tracer, lib);
	if (n < 0)
		return n; /* explained by the tracer */
	report_attached(s, lib, n, pid);
	return 0;
}

/* Looks for the target's libcuda; attaches when found. Returns 0, 1 (not yet) or -errno. */
static int try_attach_target(struct session *s, struct target *t)
{
	struct cuda_lib *lib = malloc(sizeof(*lib));
	int err;

	if (!lib)
		return -ENOMEM;
	err = libcuda__find_in_process(t->pid, lib);
	if (err == -ENOENT) {
		err = 1;
	} else if (err == 0) {
		err = attach_lib(s, lib, t->pid);
		if (!err) {
			t->state = T_ATTACHED;
			if (!s->o->no_python)
				python__attach(s->python, s->tracer, t->pid);
		}
	} else if (err == -EACCES || err == -EPERM) {
		log_error("cannot read /proc/%d/maps: Permission denied (needs CAP_SYS_PTRACE, or "
			  "to run as the target's user)", t->pid);
		err = -EPERM;
	} else if (err != -ESRCH) {
		log_error("cannot read the libraries of PID %d: %s", t->pid, strerror(-err));
	}
	free(lib);
	return err;
}

static bool target_alive(const struct target *t)
{
	uint64_t ticks;

	return procfs__start_ticks(t->pid, &ticks) == 0 && ticks == t->start_ticks;
}

static int add_targets(struct session *s)
{
	const struct gl_opts *o = s->o;

	for (int i = 0; i < o->nr_pids; i++) {
		struct target *t = &s->targets[s->nr_targets];
		int err;

		if (find_target(s, o->pids[i]))
			continue;
		t->pid = o->pids[i];
		if (procfs__start_ticks(t->pid, &t->start_ticks)) {
			log_error("no such process: %d", t->pid);
			return EXIT_RUNTIME;
		}
		err = tracer__add_target(s->tracer, t->pid);
		if (err) {
			log_error("failed to add PID %d to the targets: %s", t->pid, strerror(-err));
			return EXIT_RUNTIME;
		}
		s->nr_targets++;
		err = try_attach_target(s, t);
		if (err == -EPERM)
			return EXIT_PRIV;
		if (err < 0 && !target_alive(t)) {
			log_error("process %d exited before gpuleak could attach", t->pid);
			return EXIT_RUNTIME;
		}
		if (err < 0)
			return EXIT_RUNTIME;
		if (err == 1)
			log_info("PID %d has not loaded libcuda yet; waiting up to %.0f s", t->pid,
				 o->wait_ms / 1e3);
	}
	return EXIT_OK;
}

struct scan_ctx {
	struct session *s;
	int attached, err;
};

static int scan_one(int pid, void *data)
{
	struct scan_ctx *sc = data;
	struct cuda_lib *lib;

	if (pid == getpid())
		return 0;
	lib = malloc(sizeof(*lib));
	if (!lib)
		return -ENOMEM;
	if (libcuda__find_in_process(pid, lib) == 0 &&
	    !tracer__has_lib(sc->s->tracer, lib->dev, lib->ino)) {
		int err = attach_lib(sc->s, lib, -1);

		if (err == -EPERM) {
			free(lib);
			sc->err = err;
			return err;
		}
		sc->attached += !err;
	}
	free(lib);
	return 0;
}

/* -a: attach to every libcuda any process maps. */
static int scan_all(struct session *s)
{
	struct scan_ctx sc = { .s = s };

	procfs__for_each_pid(scan_one, &sc);
	return sc.err;
}

static int start_child(struct session *s)
{
	char path[4096];
	struct cuda_lib *lib;
	int pipefd[2], err = 0;
	char go = 1;

	if (pipe2(pipefd, O_CLOEXEC)) {
		log_error("pipe: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	s->child = fork();
	if (s->child < 0) {
		log_error("fork: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	if (s->child == 0) {
		/* wait until the probes are attached; EOF means the tracer died */
		close(pipefd[1]);
		if (read(pipefd[0], &go, 1) != 1)
			_exit(127);
		execvp(s->o->argv[0], s->o->argv);
		fprintf(stderr, "gpuleak: cannot run %s: %s\n", s->o->argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[0]);
	s->targets[0] = (struct target){ .pid = s->child, .state = T_WAITING };
	s->nr_targets = 1;
	procfs__start_ticks(s->child, &s->targets[0].start_ticks);
	err = tracer__add_target(s->tracer, s->child);
	lib = malloc(sizeof(*lib));
	if (!err && lib) {
		if (s->o->libcuda)
			snprintf(path, sizeof(path), "%s", s->o->libcuda);
		if (!s->o->libcuda && libcuda__search(s->o->argv[0], getenv("LD_LIBRARY_PATH"), path,
						  sizeof(path))) {
			log_warn("libcuda.so.1 is not on the library path; gpuleak will attach when "
				 "%s loads one (calls before that are not seen)", s->o->argv[0]);
		} else if ((err = libcuda__open(path, path, lib))) {
			log_error("cannot read %s: %s", path, strerror(-err));
		} else {
			err = attach_lib(s, lib, -1);
			if (!err)
				s->targets[0].state = T_ATTACHED;
		}
	}
	free(lib);
	if (err) {
		close(pipefd[1]);
		kill(s->child, SIGKILL);
		waitpid(s->child, NULL, 0);
		return err == -EPERM ? EXIT_PRIV : EXIT_RUNTIME;
	}
	if (write(pipefd[1], &go, 1) != 1)
		log_warn("could not release %s: %s", s->o->argv[0], strerror(errno));
	close(pipefd[1]);
	return EXIT_OK;
}

static void reap_child(struct session *s)
{
	int status;

	if (s->child <= 0 || s->child_done)
		return;
	if (waitpid(s->child, &status, WNOHANG) != s->child)
		return;
	s->child_done = true;
	s->child_status = status;
	if (WIFEXITED(status))
		log_info("%s exited with status %d", s->o->argv[0], WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		log_info("%s was killed by signal %d", s->o->argv[0], WTERMSIG(status));
}

/* Liveness and libcuda checks; returns true when every target is done. */
static bool check_targets(struct session *s, uint64_t now, int *status)
{
	bool all_done = s->nr_targets > 0;

	for (int i = 0; i < s->nr_targets; i++) {
		struct target *t = &s->targets[i];

		if (t->state == T_EXITED)
			continue;
		if (!target_alive(t) && !(s->child == t->pid && !s->child_done)) {
			/* wait a moment for its exit record, then take /proc's word */
			if (!t->gone_ns)
				t->gone_ns = now;
			else if (now - t->gone_ns > EXIT_GRACE_NS)
				t->state = T_EXITED;
			all_done &= t->state == T_EXITED;
			continue;
		}
		all_done = false;
		if (t->state != T_WAITING)
			continue;
		if (try_attach_target(s, t) == -EPERM) {
			*status = EXIT_PRIV;
			return true;
		}
		if (t->state == T_WAITING && s->wait_deadline_ns && now > s->wait_deadline_ns &&
		    s->child != t->pid) {
			log_error("process %d did not load libcuda within %.0f s", t->pid,
				  s->o->wait_ms / 1e3);
			*status = EXIT_RUNTIME;
			return true;
		}
	}
	return all_done;
}

static int main_loop(struct session *s)
{
	const struct gl_opts *o = s->o;
	int status = EXIT_OK;

	for (;;) {
		uint64_t now;
		int n = tracer__poll(s->tracer, POLL_MS);

		if (n < 0) {
			log_error("reading the ring buffer failed: %s", strerror(-n));
			return EXIT_RUNTIME;
		}
		now = now_ns();
		reap_child(s);
		if (stop_signal) {
			if (s->child > 0 && !s->child_done && stop_signal == SIGTERM)
				kill(s->child, SIGTERM);
			log_info("stopping (signal %d)", (int)stop_signal);
			break;
		}
		if (s->deadline_ns && now >= s->deadline_ns)
			break;
		if (o->interval_ms && now >= s->next_summary_ns) {
			print_summary(s);
			s->next_summary_ns = now + o->interval_ms * 1000000ULL;
		}
		if (o->all && now >= s->next_rescan_ns) {
			if (scan_all(s) == -EPERM)
				return EXIT_PRIV;
			s->next_rescan_ns = now + RESCAN_ALL_NS;
		}
		if (!o->all && now >= s->next_liveness_ns) {
			s->next_liveness_ns = now + LIVENESS_NS;
			if (check_targets(s, now, &status))
				break;
		}
	}
	return status;
}

static void session_free(struct session *s)
{
	books__free(s->books);
	tracer__free(s->tracer);
	symbolizer__free(s->sym);
	python__free(s->python);
	unwinder__free(s->unwinder);
	stacks__free(s->stacks);
	modules__free(s->mods);
	if (s->child > 0 && !s->child_done)
		waitpid(s->child, NULL, 0);
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
		.ringbuf_bytes = o->ringbuf_bytes,
		.max_allocs = o->max_allocs,
		.max_procs = 8192,
	};
	struct books_opts bo = { .series_width_ns = 1000000000ULL };
	struct books_hooks hooks = {
		.proc_new = on_proc_new,
		.proc_end = on_proc_end,
		.failure = on_failure,
		.ctx = s,
	};

	raise_fd_limit();
	s->mods = modules__new();
	s->stacks = stacks__new();
	s->unwinder = s->mods ? unwinder__new(s->mods, o->stack_mode) : NULL;
	s->sym = s->mods ? symbolizer__new(s->mods) : NULL;
	s->python = s->mods ? python__new(s->mods) : NULL;
	s->books = s->unwinder ? books__new(s->mods, s->stacks, s->unwinder, s->python, &bo) : NULL;
	if (!s->mods || !s->stacks || !s->unwinder || !s->sym || !s->python || !s->books) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	books__set_hooks(s->books, &hooks);
	s->tracer = tracer__new(&to, on_record, s);
	if (!s->tracer)
		return errno == EPERM ? EXIT_PRIV : EXIT_RUNTIME;
	return EXIT_OK;
}

int session__run(const struct gl_opts *o)
{
	struct session s = { .o = o };
	struct sigaction sa = { .sa_handler = on_signal };
	int status;

	s.start_ns = now_ns();
	status = setup(&s);
	if (status)
		goto cleanup;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (o->cmd == CMD_RUN) {
		status = start_child(&s);
	} else if (o->all) {
		status = scan_all(&s) == -EPERM ? EXIT_PRIV : EXIT_OK;
		if (!status)
			log_info("tracing every process that uses CUDA (%d libcuda attached)",
				 tracer__nr_libs(s.tracer));
	} else {
		status = add_targets(&s);
	}
	if (status)
		goto cleanup;

	s.start_ns = now_ns();
	s.deadline_ns = o->duration_ms ? s.start_ns + o->duration_ms * 1000000ULL : 0;
	s.wait_deadline_ns = s.start_ns + o->wait_ms * 1000000ULL;
	s.next_summary_ns = s.start_ns + o->interval_ms * 1000000ULL;
	s.next_rescan_ns = s.start_ns + RESCAN_ALL_NS;
	status = main_loop(&s);
	if (status == EXIT_OK)
		status = final_report(&s);
cleanup:
	session_free(&s);
	return status;
}
