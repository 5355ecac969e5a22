// SPDX-License-Identifier: BSD-2-Clause
/*
 * targets.c - what a session traces: the processes named on the command
 * line (waiting for them to load libcuda), the child of `run`, or every
 * process with -a; the scans due after a library change; liveness of the
 * targets. Attaching is in targets_attach.c, holds at a mapping in
 * targets_hold.c, run's child in targets_child.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "loader.h"
#include "reasons.h"
#include "stacks/python/python.h"
#include "targets_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procfs.h"

#define LIVENESS_NS 250000000ULL
#define RESCAN_ALL_NS 5000000000ULL
/* ... reading only PIDs new since the last one, and every one this often by default */
#define FULL_RESCAN_NS 60000000000ULL
#define EXIT_GRACE_NS 1000000000ULL
/* A library change is scanned at once and once more this much later. */
#define PENDING_FOLLOW_UP_NS 100000000ULL

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

		if (targets__find(s, o->pids[i]))
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
		err = targets__try_attach(s, t);
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
	if (s->nr_pending == s->cap_pending) {
		int cap = s->cap_pending ? 2 * s->cap_pending : 64;
		struct pending_scan *p = realloc(s->pending, cap * sizeof(*p));

		if (!p) {
			/* no room to remember it: scan now, without the follow-up */
			targets__scan_pid(s, pid);
			return;
		}
		s->pending = p;
		s->cap_pending = cap;
	}
	s->pending[s->nr_pending++] = (struct pending_scan){ .pid = pid };
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
		if (targets__scan_pid(s, ps.pid) == -EPERM)
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
			r = targets__attach_torch(s, t->pid);
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
		r = targets__try_attach(s, t);
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
		return targets__start_child(s);
	if (!o->all)
		return add_targets(s);
	err = targets__attach_system_lib(s);
	if (!err)
		err = targets__scan_all(s, true);
	if (!err)
		log_info("tracing every process that uses CUDA (%d libcuda attached)",
			 tracer__nr_libs(s->tracer));
	return err;
}

static uint64_t full_rescan_ns(const struct targets *s)
{
	return s->o.rescan_ms ? s->o.rescan_ms * 1000000ULL : FULL_RESCAN_NS;
}

/* New processes are looked for this often: every RESCAN_ALL_NS, or each full rescan. */
static uint64_t rescan_ns(const struct targets *s)
{
	return full_rescan_ns(s) < RESCAN_ALL_NS ? full_rescan_ns(s) : RESCAN_ALL_NS;
}

/*
 * After a full rescan that began at now: library files no process was seen mapping
 * since the one before began (one whole interval) are detached.
 */
static void detach_unused(struct targets *s, uint64_t now)
{
	uint64_t stats[GL_NR_STATS] = {};
	bool lost;
	int n;

	/* a mapping's record lost: a file's users may not all be known; none is let go */
	tracer__stats(s->tracer, stats);
	lost = stats[GL_STAT_LOST_PROC] != s->lost_proc_records;
	s->lost_proc_records = stats[GL_STAT_LOST_PROC];
	n = s->last_full_scan_ns && !lost ? tracer__detach_unused(s->tracer, s->last_full_scan_ns) :
					    0;
	s->last_full_scan_ns = now;
	if (n)
		log_info("let go of %d libcuda file%s no process maps (%d attached)", n,
			 n == 1 ? "" : "s", tracer__nr_libs(s->tracer));
}

int targets__start(struct targets *s)
{
	int err = start(s);
	uint64_t now = now_ns();

	s->wait_deadline_ns = now + s->o.wait_ms * 1000000ULL;
	s->next_rescan_ns = now + rescan_ns(s);
	s->next_full_rescan_ns = now + full_rescan_ns(s);
	s->last_full_scan_ns = now;
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
			bool full = now >= s->next_full_rescan_ns;

			s->next_rescan_ns = now + rescan_ns(s);
			if (full)
				s->next_full_rescan_ns = now + full_rescan_ns(s);
			if (targets__scan_all(s, full) == -EPERM) {
				*err = -EPERM;
				return true;
			}
			if (full)
				detach_unused(s, now);
		}
		return false;
	}
	if (now < s->next_liveness_ns)
		return false;
	s->next_liveness_ns = now + LIVENESS_NS;
	return check_targets(s, now, err);
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
	free(s->pending);
	free(s->listed);
	free(s->listing);
	free(s);
}

void targets__exited(struct targets *s, int pid, const char *comm)
{
	struct target *t = targets__find(s, pid);

	if (t && t->state != T_EXITED) {
		t->state = T_EXITED;
		log_info("PID %d (%s) exited", pid, comm);
	}
}

bool targets__scanning(const struct targets *s)
{
	return s->nr_pending > 0;
}

void targets__limits(const struct targets *s, uint64_t *libs_refused, uint64_t *holds_expired)
{
	*libs_refused = s->libs_refused;
	*holds_expired = s->holds_expired;
}
