// SPDX-License-Identifier: BSD-2-Clause
/*
 * targets.c - what a session traces: the processes named on the command
 * line (waiting for them to load libcuda), the child of `run`, or every
 * process with -a; finding their libcuda, PyTorch and Python and attaching
 * to them, including libraries mapped later; liveness of the targets.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "loader.h"
#include "probes.h"
#include "reasons.h"
#include "stacks/python/python.h"
#include "targets.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procfs.h"

#define LIVENESS_NS 250000000ULL
#define RESCAN_ALL_NS 5000000000ULL
#define EXIT_GRACE_NS 1000000000ULL
/* A held process is stopped as its mmap returns: waited for at most this long. */
#define HOLD_STOP_NS 200000000ULL

static void unreadable_lib(struct targets *s, int pid, const struct cuda_lib *lib);
/* A library change is scanned at once and once more this much later. */
#define PENDING_FOLLOW_UP_NS 100000000ULL

enum target_state { T_WAITING, T_ATTACHED, T_EXITED };

struct pending_scan {
	int pid;
	bool scanned; /* the first scan is done; the follow-up is due at due_ns */
	uint64_t due_ns;
};

struct lib_id {
	dev_t dev;
	ino_t ino;
};

struct target {
	int pid;
	uint64_t start_ticks;
	enum target_state state;
	uint64_t gone_ns; /* when /proc said it was gone */
	bool torch_done;  /* its libc10_cuda.so was found (attached or not) */
	bool tried;	  /* its libcuda was looked for once */
};

struct targets {
	struct targets_opts o;
	struct tracer *tracer;
	struct python *python;
	void (*seen)(void *ctx, int pid);
	void *seen_ctx;
	struct target targets[TARGETS_MAX];
	int nr_targets;
	pid_t child;
	int child_status;
	bool child_done;
	uint64_t wait_deadline_ns, next_liveness_ns, next_rescan_ns;
	struct pending_scan pending[64];
	int nr_pending;
	struct lib_id torch_denied[16]; /* serve: PyTorch libraries refused for privileges */
	int nr_torch_denied;
	struct lib_id bad_libs[16]; /* libcuda files that cannot be read: said once */
	int nr_bad_libs;
	bool hold_eperm; /* attaching for a held process was refused: stop */
};

static struct target *find_target(struct targets *s, int pid)
{
	for (int i = 0; i < s->nr_targets; i++)
		if (s->targets[i].pid == pid)
			return &s->targets[i];
	return NULL;
}

static void report_attached(struct targets *s, const struct cuda_lib *lib, int n, int pid)
{
	char missing[2048];
	char comm[32] = "";

	if (pid > 0 && procfs__comm(pid, comm, sizeof(comm)))
		comm[0] = '\0';
	libcuda__missing(lib, true, missing, sizeof(missing));
	if (missing[0])
		log_warn(
			"%s lacks %s: those calls are not traced (a driver older than gpuleak expects: "
			"memory they allocate shows up in NVML's figure only)",
			lib->display, missing);
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
static int attach_lib(struct targets *s, const struct cuda_lib *lib, int pid)
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

/*
 * Attaches to PyTorch's allocator probes if pid maps libc10_cuda.so. Returns
 * 1 when the library was found (attached or without probes), 0 when pid maps
 * none (yet), -EPERM on privileges.
 */
static int attach_torch(struct targets *s, int pid)
{
	char path[PATH_MAX], display[PATH_MAX];
	dev_t dev;
	ino_t ino;
	int err;

	if (s->o.no_torch)
		return 1;
	if (libcuda__find_torch(pid, path, sizeof(path), display, sizeof(display), &dev, &ino))
		return 0;
	if (tracer__has_torch(s->tracer, dev, ino))
		return 1;
	for (int i = 0; i < s->nr_torch_denied; i++)
		if (s->torch_denied[i].dev == dev && s->torch_denied[i].ino == ino)
			return 1;
	err = tracer__attach_torch(s->tracer, path, dev, ino);
	if (err == -EPERM && s->o.keep_going) {
		/* the agent goes on: tensor blocks are then not traced in this library */
		log_warn("no permission to attach PyTorch's allocator probes in %s: driver-level "
			 "accounting only",
			 display);
		if (s->nr_torch_denied <
		    (int)(sizeof(s->torch_denied) / sizeof(s->torch_denied[0])))
			s->torch_denied[s->nr_torch_denied++] = (struct lib_id){ dev, ino };
		return 1;
	}
	if (err == -EPERM) {
		tracer__explain_eperm("failed to attach PyTorch's allocator probes");
		return -EPERM;
	}
	if (err == -ENOENT || err == -ESRCH)
		log_msg(s->o.torch ? LOG_WARN : LOG_INFO,
			"%s has no pytorch:malloc/free probes: tensor blocks are not traced, "
			"driver-level accounting only",
			display);
	else if (err)
		log_warn(
			"failed to attach PyTorch's allocator probes in %s: %s (tensor blocks are not "
			"traced; rerun with -v for the loader's reason, or pass --no-torch)",
			display, strerror(-err));
	else
		log_info("attached PyTorch's allocator probes in %s (tensor blocks: torch_block)",
			 display);
	return 1;
}

static int find_xla(const struct map_entry *e, void *ctx)
{
	const char **found = ctx;

	if (!e->path[0] || !libcuda__is_xla_path(e->path))
		return 0;
	*found = strdup(e->path);
	return 1;
}

/*
 * A target that ran CUDA before gpuleak attached and has XLA loaded: JAX's
 * default pool, preallocated at its start, was not seen. Said once, on stderr.
 */
static void warn_xla_before_attach(int pid)
{
	char *path = NULL;

	if (procfs__for_each_map(pid, find_xla, &path) != 1 || !path)
		goto cleanup;
	log_warn("PID %d has XLA loaded (%s) and used CUDA before gpuleak attached: a pool XLA "
		 "preallocated then (JAX's default: 75%% of each device in one block) is not "
		 "seen, and growth inside such a pool never is; to see each buffer at its Python "
		 "line, run the job with XLA_PYTHON_CLIENT_PREALLOCATE=false "
		 "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
		 pid, path);
cleanup:
	free(path);
}

/* Looks for the target's libcuda; attaches when found. Returns 0, 1 (not yet) or -errno. */
static int try_attach_target(struct targets *s, struct target *t)
{
	struct cuda_lib *lib = malloc(sizeof(*lib));
	bool first = !t->tried; /* found now: it used CUDA before gpuleak started */
	int err;

	if (!lib)
		return -ENOMEM;
	t->tried = true;
	err = libcuda__find_in_process(t->pid, lib);
	if (err == -ENOENT) {
		err = 1;
	} else if (err == 0) {
		/* Python frames and PyTorch's probes first: what is allocated once
		 * "attached to PID" is said must be seen with them */
		if (!s->o.no_python)
			python__attach(s->python, t->pid);
		if (!t->torch_done) {
			err = attach_torch(s, t->pid);
			t->torch_done = err == 1;
		}
		if (err >= 0)
			err = attach_lib(s, lib, t->pid);
		if (!err)
			t->state = T_ATTACHED;
		if (!err && first)
			warn_xla_before_attach(t->pid);
	} else if (err == -EACCES || err == -EPERM) {
		err = reasons__maps_refused(t->pid);
	} else if (err == -ENOEXEC) {
		unreadable_lib(s, t->pid, lib);
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

static int add_targets(struct targets *s)
{
	const struct targets_opts *o = &s->o;

	for (int i = 0; i < o->nr_pids; i++) {
		struct target *t = &s->targets[s->nr_targets];
		int err;

		if (find_target(s, o->pids[i]))
			continue;
		t->pid = o->pids[i];
		if (procfs__start_ticks(t->pid, &t->start_ticks)) {
			log_error(
				"no such process: %d (list the ones using a GPU with `nvidia-smi "
				"--query-compute-apps=pid,name --format=csv`, or trace all with -a)",
				t->pid);
			return -EIO;
		}
		if (!reasons__traceable(t->pid))
			return -EIO;
		err = tracer__add_target(s->tracer, t->pid);
		if (err) {
			log_error(
				"failed to add PID %d to the targets: %s (the BPF target map is full or "
				"unreadable: name fewer PIDs, or trace all with -a)",
				t->pid, strerror(-err));
			return -EIO;
		}
		s->nr_targets++;
		err = try_attach_target(s, t);
		if (err == -EPERM)
			return -EPERM;
		if (err < 0 && !target_alive(t)) {
			log_error(
				"process %d exited before gpuleak could attach (to see a short job from "
				"its start, use `gpuleak run -- COMMAND`)",
				t->pid);
			return -EIO;
		}
		if (err < 0)
			return -EIO;
		if (err == 1)
			log_info("PID %d has not loaded libcuda yet; waiting up to %.0f s", t->pid,
				 o->wait_ms / 1e3);
	}
	return 0;
}

/* A libcuda pid maps but gpuleak cannot read: said once per file. */
static void unreadable_lib(struct targets *s, int pid, const struct cuda_lib *lib)
{
	struct stat st;
	int n = (int)(sizeof(s->bad_libs) / sizeof(s->bad_libs[0]));

	if (stat(lib->path, &st))
		return;
	for (int i = 0; i < s->nr_bad_libs; i++)
		if (s->bad_libs[i].dev == st.st_dev && s->bad_libs[i].ino == st.st_ino)
			return;
	if (s->nr_bad_libs < n)
		s->bad_libs[s->nr_bad_libs++] = (struct lib_id){ st.st_dev, st.st_ino };
	log_error("PID %d maps %s, which gpuleak cannot read: %s; its calls are not traced (check "
		  "the file with `readelf -d`, and that gpuleak runs as root in the target's mount "
		  "namespace)",
		  pid, lib->display, lib->why ? lib->why : "unknown");
}

/*
 * Attaches to whatever pid maps that is not attached yet: its libcuda,
 * PyTorch's probes, its Python. Returns 1 if it maps a libcuda, 0 if not,
 * -ENOEXEC if it maps one gpuleak cannot read (said), -EPERM on privileges.
 */
static int scan_pid(struct targets *s, int pid)
{
	struct cuda_lib *lib = malloc(sizeof(*lib));
	struct target *t = find_target(s, pid);
	int ret = 0, err;

	if (!lib)
		return 0;
	if (!s->o.no_python)
		python__attach(s->python, pid);
	err = libcuda__find_in_process(pid, lib);
	if (err == -ENOEXEC) {
		unreadable_lib(s, pid, lib);
		free(lib);
		return -ENOEXEC;
	}
	if (err == 0) {
		ret = 1;
		if (s->seen)
			s->seen(s->seen_ctx, pid);
		if (!tracer__has_lib(s->tracer, lib->dev, lib->ino))
			err = attach_lib(s, lib, t ? pid : -1);
		if (!err && t && t->state == T_WAITING)
			t->state = T_ATTACHED;
	} else {
		err = 0; /* none mapped (yet), or the process is gone */
	}
	free(lib);
	if (!err && attach_torch(s, pid) < 0)
		err = -EPERM;
	return err == -EPERM ? -EPERM : ret;
}

static int scan_one(int pid, void *data)
{
	struct targets *s = data;

	if (pid == getpid())
		return 0;
	return scan_pid(s, pid) == -EPERM ? -EPERM : 0;
}

/* -a: attach to every libcuda any process maps. */
static int scan_all(struct targets *s)
{
	return procfs__for_each_pid(scan_one, s) == -EPERM ? -EPERM : 0;
}

/*
 * -a: the libcuda new processes would load (--libcuda, else the dynamic
 * loader's choice) is attached before any process maps it, so that they are
 * traced from their first call.
 */
static int attach_system_lib(struct targets *s)
{
	struct cuda_lib *lib;
	char path[PATH_MAX];
	int err = 0;

	if (s->o.libcuda)
		snprintf(path, sizeof(path), "%s", s->o.libcuda);
	else if (libcuda__search(NULL, getenv("LD_LIBRARY_PATH"), path, sizeof(path)))
		return 0;
	lib = malloc(sizeof(*lib));
	if (!lib)
		return -EIO;
	err = libcuda__open(path, path, lib);
	if (err)
		log_msg(s->o.libcuda ? LOG_ERROR : LOG_DEBUG, "cannot read %s: %s", path,
			libcuda__strerror(lib, err));
	else
		err = attach_lib(s, lib, -1);
	free(lib);
	if (err == -EPERM)
		return -EPERM;
	return err && s->o.libcuda ? -EIO : 0;
}

/*
 * The dynamic loader of pid changed its libraries: scan it at the next step
 * and once more a little later, so that a burst of loads (an import) costs
 * two scans and a library mapped during the first is not missed.
 */
void targets__libs_changed(struct targets *s, int pid)
{
	for (int i = 0; i < s->nr_pending; i++) {
		if (s->pending[i].pid == pid) {
			if (s->pending[i].scanned)
				s->pending[i].due_ns = now_ns() + PENDING_FOLLOW_UP_NS;
			return;
		}
	}
	if (s->nr_pending < (int)(sizeof(s->pending) / sizeof(s->pending[0])))
		s->pending[s->nr_pending++] = (struct pending_scan){ .pid = pid };
}

static bool maps_torch(int pid)
{
	char path[PATH_MAX], display[PATH_MAX];
	dev_t dev;
	ino_t ino;

	return !libcuda__find_torch(pid, path, sizeof(path), display, sizeof(display), &dev, &ino);
}

/* pid's state letter from /proc/PID/stat, or 'X' once it is gone. */
static char proc_state(int pid)
{
	char state = 'X';
	int ppid;

	return procfs__stat(pid, &ppid, &state) ? 'X' : state;
}

/* Whether a state is stopped (by our SIGSTOP, or by a tracer's ptrace), or over. */
static bool still(char state)
{
	return state == 'T' || state == 't' || state == 'Z' || state == 'X';
}

/*
 * Waits until pid is stopped (or gone), at most HOLD_STOP_NS: its mapping is then
 * complete. Returns whether it is.
 */
static bool wait_stopped(int pid)
{
	uint64_t until = now_ns() + HOLD_STOP_NS;

	while (!still(proc_state(pid))) {
		if (now_ns() >= until)
			return false;
		usleep(200);
	}
	return true;
}

/*
 * A target mapped a libcuda, libc10_cuda or libpython (a GL_PROC_LIBLOAD
 * record). When BPF holds it (stopped at that mapping), it is attached here
 * and released at once; otherwise it is scanned at the next step.
 */
bool targets__lib_mapped(struct targets *s, const struct gl_proc *r)
{
	int pid = r->hdr.pid, err;
	uint64_t t0 = now_ns(), since;
	char name[sizeof(r->lib.name) + 1];
	bool found, stopped;

	if (r->lib.held == 2) {
		log_warn("PID %d (%s) maps %.*s, not attached yet, and could not be held (more "
			 "than --max-held held at once, or the signal was refused): its first "
			 "calls may be missed, and its figures say so",
			 pid, r->comm, (int)sizeof(r->lib.name), r->lib.name);
		return true; /* the books' hook schedules a scan */
	}
	if (r->lib.held != 1)
		return false; /* the books' hook schedules a scan */
	memcpy(name, r->lib.name, sizeof(r->lib.name));
	name[sizeof(r->lib.name)] = '\0';
	stopped = wait_stopped(pid);
	err = scan_pid(s, pid);
	/* continued before its probes were in (another tracer's release, a SIGCONT sent to
	 * it), or never stopped: its code may have run untraced */
	stopped = stopped && still(proc_state(pid));
	if (err == -EPERM)
		s->hold_eperm = true;
	/* an unreadable library was said already */
	found = r->lib.kind == GL_LIB_CUDA ? err == 1 || err == -ENOEXEC : maps_torch(pid);
	/* attached, or one that cannot be: this file holds no process again. One not in
	 * the maps (its mmap failed after the hold, or was undone at once) holds the next
	 * process that maps it, this one included */
	if (found || err == -EPERM)
		tracer__lib_handled(s->tracer, r->lib.dev, r->lib.ino);
	if (tracer__held_since(s->tracer, pid, &since))
		since = t0;
	if (!tracer__release(s->tracer, pid))
		return false;
	if (found && !stopped) {
		log_warn("PID %d (%s) maps %s and was held, but ran on before its probes were in "
			 "(continued by another tracer or a SIGCONT): its first calls may be "
			 "missed, and its figures say so",
			 pid, r->comm, name);
		return true;
	}
	if (found)
		log_debug("PID %d was held %.1f ms at its mapping of %s until the probes were in",
			  pid, (now_ns() - since) / 1e6, name);
	else if (procfs__start_ticks(pid, &(uint64_t){ 0 }) == 0)
		log_debug("PID %d (%s) mapped %s, which is not in /proc/%d/maps (the mapping "
			  "failed or was undone): released; its next mapping of it is held again",
			  pid, r->comm, name, pid);
	return false;
}

/* Runs the scans that are due. Returns 0, or -EPERM on privileges. */
static int run_pending_scans(struct targets *s, uint64_t now)
{
	int kept = 0;

	for (int i = 0; i < s->nr_pending; i++) {
		struct pending_scan ps = s->pending[i];

		if (ps.scanned && now < ps.due_ns) {
			s->pending[kept++] = ps;
			continue;
		}
		if (scan_pid(s, ps.pid) == -EPERM)
			return -EPERM;
		if (!ps.scanned) {
			ps.scanned = true;
			ps.due_ns = now + PENDING_FOLLOW_UP_NS;
			s->pending[kept++] = ps;
		}
	}
	s->nr_pending = kept;
	return 0;
}

/*
 * Waits for the child's exec: EOF on fd means it succeeded. A command that
 * cannot be run is said in one line and ends the session with the shell's
 * status for it: -ENOENT (127: not found) or -ENOEXEC (126: found, cannot be run).
 */
static int child_exec_status(struct targets *s, int fd)
{
	int exec_errno = 0;
	ssize_t n;

	do
		n = read(fd, &exec_errno, sizeof(exec_errno));
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n != sizeof(exec_errno))
		return 0;
	log_error("cannot run %s: %s", s->o.argv[0], strerror(exec_errno));
	waitpid(s->child, NULL, 0);
	s->child_done = true;
	return exec_errno == ENOENT ? -ENOENT : -ENOEXEC;
}

static int start_child(struct targets *s)
{
	char path[4096];
	struct cuda_lib *lib;
	int pipefd[2], errfd[2], err = 0, exec_errno;
	char go = 1;

	if (pipe2(pipefd, O_CLOEXEC)) {
		log_error("pipe: %s", strerror(errno));
		return -EIO;
	}
	/* the child's exec error comes back here; a successful exec closes it */
	if (pipe2(errfd, O_CLOEXEC)) {
		log_error("pipe: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -EIO;
	}
	s->child = fork();
	if (s->child < 0) {
		log_error("fork: %s", strerror(errno));
		return -EIO;
	}
	if (s->child == 0) {
		/* wait until the probes are attached; EOF means the tracer died */
		close(pipefd[1]);
		close(errfd[0]);
		if (read(pipefd[0], &go, 1) != 1)
			_exit(127);
		execvp(s->o.argv[0], s->o.argv);
		exec_errno = errno;
		if (write(errfd[1], &exec_errno, sizeof(exec_errno)) != sizeof(exec_errno))
			_exit(127);
		_exit(exec_errno == ENOENT ? 127 : 126);
	}
	close(pipefd[0]);
	close(errfd[1]);
	s->targets[0] = (struct target){ .pid = s->child, .state = T_WAITING };
	s->nr_targets = 1;
	procfs__start_ticks(s->child, &s->targets[0].start_ticks);
	err = tracer__add_target(s->tracer, s->child);
	lib = malloc(sizeof(*lib));
	if (!err && lib) {
		/* a libcuda found by the search below is attached before the child runs; any
		 * other (a wrapper's exec, dlopen) holds the child at its mapping */
		if (s->o.libcuda)
			snprintf(path, sizeof(path), "%s", s->o.libcuda);
		if (!s->o.libcuda &&
		    libcuda__search(s->o.argv[0], getenv("LD_LIBRARY_PATH"), path, sizeof(path))) {
			log_debug(
				"libcuda.so.1 is not on the library path; gpuleak will attach when "
				"%s maps one (held at that mapping until the probes are in)",
				s->o.argv[0]);
		} else if ((err = libcuda__open(path, path, lib))) {
			log_error("cannot read %s: %s (name the driver with --libcuda PATH)", path,
				  libcuda__strerror(lib, err));
		} else {
			err = attach_lib(s, lib, -1);
			if (!err)
				s->targets[0].state = T_ATTACHED;
		}
	}
	free(lib);
	if (err) {
		close(pipefd[1]);
		close(errfd[0]);
		kill(s->child, SIGKILL);
		waitpid(s->child, NULL, 0);
		s->child_done = true;
		return err == -EPERM ? -EPERM : -EIO;
	}
	if (write(pipefd[1], &go, 1) != 1)
		log_warn("could not release %s: %s", s->o.argv[0], strerror(errno));
	close(pipefd[1]);
	return child_exec_status(s, errfd[0]);
}

void targets__reap_child(struct targets *s)
{
	int status;

	if (s->child <= 0 || s->child_done)
		return;
	if (waitpid(s->child, &status, WNOHANG) != s->child)
		return;
	s->child_done = true;
	s->child_status = status;
	if (WIFEXITED(status))
		log_info("%s exited with status %d", s->o.argv[0], WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		log_info("%s was killed by signal %d", s->o.argv[0], WTERMSIG(status));
}

int targets__wait_child(struct targets *s, int *wstatus)
{
	pid_t r;
	int st = 0;

	if (s->child <= 0)
		return -ENOENT;
	if (!s->child_done) {
		while ((r = waitpid(s->child, &st, 0)) < 0 && errno == EINTR)
			;
		if (r != s->child)
			return r < 0 ? -errno : -ECHILD;
		s->child_status = st;
		s->child_done = true;
	}
	*wstatus = s->child_status;
	return 0;
}

/* Liveness and libcuda checks; returns true when every target is done. */
static bool check_targets(struct targets *s, uint64_t now, int *err)
{
	bool all_done = s->nr_targets > 0;

	for (int i = 0; i < s->nr_targets; i++) {
		struct target *t = &s->targets[i];
		int r;

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
		if (t->state == T_ATTACHED && !t->torch_done) {
			r = attach_torch(s, t->pid);
			if (r == -EPERM) {
				*err = -EPERM;
				return true;
			}
			t->torch_done = r == 1;
			if (t->torch_done && !s->o.no_python)
				python__attach(s->python, t->pid);
		}
		if (t->state != T_WAITING)
			continue;
		r = try_attach_target(s, t);
		if (r == -EPERM || r == -ENOEXEC) {
			*err = r == -EPERM ? -EPERM : -EIO;
			return true;
		}
		if (t->state == T_WAITING && s->wait_deadline_ns && now > s->wait_deadline_ns &&
		    s->child != t->pid) {
			log_error(
				"process %d did not load libcuda within %.0f s (wait longer with --wait, or "
				"check that it uses the GPU: `grep libcuda /proc/%d/maps`)",
				t->pid, s->o.wait_ms / 1e3, t->pid);
			*err = -EIO;
			return true;
		}
	}
	return all_done;
}

static int start(struct targets *s)
{
	const struct targets_opts *o = &s->o;
	int err;

	if (o->argv)
		return start_child(s);
	if (!o->all)
		return add_targets(s);
	err = attach_system_lib(s);
	if (!err)
		err = scan_all(s);
	if (!err)
		log_info("tracing every process that uses CUDA (%d libcuda attached)",
			 tracer__nr_libs(s->tracer));
	return err;
}

int targets__start(struct targets *s)
{
	int err = start(s);
	uint64_t now = now_ns();

	s->wait_deadline_ns = now + s->o.wait_ms * 1000000ULL;
	s->next_rescan_ns = now + RESCAN_ALL_NS;
	return err;
}

bool targets__step(struct targets *s, uint64_t now, int *err)
{
	targets__reap_child(s);
	if (s->hold_eperm) {
		*err = -EPERM;
		return true;
	}
	if (s->nr_pending && run_pending_scans(s, now) == -EPERM) {
		*err = -EPERM;
		return true;
	}
	if (s->o.all) {
		if (now >= s->next_rescan_ns) {
			s->next_rescan_ns = now + RESCAN_ALL_NS;
			if (scan_all(s) == -EPERM) {
				*err = -EPERM;
				return true;
			}
		}
		return false;
	}
	if (now < s->next_liveness_ns)
		return false;
	s->next_liveness_ns = now + LIVENESS_NS;
	return check_targets(s, now, err);
}

void targets__signal_child(struct targets *s, int sig)
{
	if (s->child > 0 && !s->child_done)
		kill(s->child, sig);
}

struct targets *targets__new(const struct targets_opts *o, struct tracer *t, struct python *py,
			     void (*seen)(void *ctx, int pid), void *ctx)
{
	struct targets *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->o = *o;
	s->tracer = t;
	s->python = py;
	s->seen = seen;
	s->seen_ctx = ctx;
	return s;
}

void targets__free(struct targets *s)
{
	if (!s)
		return;
	if (s->child > 0 && !s->child_done)
		waitpid(s->child, NULL, 0);
	free(s);
}

void targets__exited(struct targets *s, int pid, const char *comm)
{
	struct target *t = find_target(s, pid);

	if (t && t->state != T_EXITED) {
		t->state = T_EXITED;
		log_info("PID %d (%s) exited", pid, comm);
	}
}

bool targets__scanning(const struct targets *s)
{
	return s->nr_pending > 0;
}
