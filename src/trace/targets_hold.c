// SPDX-License-Identifier: BSD-2-Clause
/*
 * targets_hold.c - a process BPF holds (stopped) at its mapping of a libcuda,
 * libc10_cuda or libpython: waiting until it is stopped, attaching what it
 * maps, releasing it, and saying when it ran on before its probes were in.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include "loader.h"
#include "targets_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procfs.h"

/* A held process is stopped as its mmap returns: waited for at most this long. */
#define HOLD_STOP_NS 200000000ULL

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
	bool found, stopped, by_kernel, released;

	if (r->lib.kind == GL_LIB_CUDA)
		tracer__lib_mapped(s->tracer, r->lib.dev, r->lib.ino, pid);
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
	err = targets__scan_pid(s, pid);
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
	released = tracer__release(s->tracer, pid);
	/* released by this tracer, but past its deadline: another gpuleak's guard (the book
	 * of holds) let it go meanwhile, or is about to */
	if (released && now_ns() - since > tracer__hold_timeout(s->tracer)) {
		s->holds_expired++;
		log_warn("PID %d (%s) maps %s and was held %.1f s, past the hold's deadline, "
			 "before gpuleak could attach it: another gpuleak's guard let it go; its "
			 "first calls may be missed, and its figures say so",
			 pid, r->comm, name, (now_ns() - since) / 1e9);
		return true;
	}
	if (!released) {
		if (!tracer__hold_expired(s->tracer, pid, &since, &by_kernel))
			return false;
		s->holds_expired++;
		log_warn("PID %d (%s) maps %s and was held %.1f s, past the hold's deadline, "
			 "before gpuleak could attach it: %s let it go; its first calls may be "
			 "missed, and its figures say so",
			 pid, r->comm, name, (now_ns() - since) / 1e9,
			 by_kernel ? "the kernel side (a BPF timer)" :
				     "the guard (this gpuleak's or another's)");
		return true;
	}
	if (found && !stopped) {
		log_warn("PID %d (%s) maps %s and was held, but ran on before its probes were in "
			 "(continued by another tracer or a SIGCONT): its first calls may be "
			 "missed, and its figures say so",
			 pid, r->comm, name);
		return true;
	}
	if (found) {
		log_debug("PID %d was held %.1f ms at its mapping of %s until the probes were in",
			  pid, (now_ns() - since) / 1e6, name);
	} else if (procfs__start_ticks(pid, &(uint64_t){ 0 }) == 0) {
		log_debug("PID %d (%s) mapped %s, which is not in /proc/%d/maps (the mapping "
			  "failed or was undone): released; its next mapping of it is held again",
			  pid, r->comm, name, pid);
	} else {
		/* held, then let go by someone else and ended before this gpuleak could look */
		log_warn("PID %d (%s) maps %s and was held, but ran on and exited before its "
			 "probes were in (continued by another tracer or a SIGCONT): its calls "
			 "are missing, and the report says so",
			 pid, r->comm, name);
		return true;
	}
	return false;
}
