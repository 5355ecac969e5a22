// SPDX-License-Identifier: BSD-2-Clause
/*
 * tiers.c - the tensor level's windows (see tiers.h): a small state machine
 * per process, stepped by the session's loop, attaching and detaching that
 * process's allocator probes through the tracer and keeping the list of
 * windows the reports name.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "books/books.h"
#include "gpu/nvml.h"
#include "gpu/sampler.h"
#include "session_int.h"
#include "tiers.h"
#include "trace/loader.h"
#include "util/log.h"
#include "model/winlog.h"

#define NS 1000000000ULL
#define TAIL_MIN_NS NS	      /* frees of the blocks in flight at a window's end */
#define CHECK_NS 100000000ULL /* growth checks */
#define CAPACITY_NS (30 * NS) /* NVML samples for the capacity trigger */
#define CAPACITY_PCT 90	      /* of a device's memory in use */

/* A process's windows: its probes are its own (the tracer's links for its PID). */
struct pwin {
	int pid;
	struct winlog log;  /* the phase and the windows the reports name */
	uint64_t phase_end; /* ARMED, TAIL: when the phase ends */
	uint64_t mark;	    /* its driver-level device bytes when its last window ended */
	bool requested;	    /* a request came: a window when it is idle */
	bool gone;	    /* exited: its links are gone, its log stays for the reports */
};

struct tiers {
	struct session *s;
	struct winlog none; /* a process with no windows: the mode, nothing traced */
	struct tier_hook hook;
	uint64_t window_ns, tail_ns, gap_ns, period_ns;
	uint64_t next_check, next_capacity;
	volatile sig_atomic_t requested;
	struct snap_tensors view;
	struct pwin *pw;
	int npw, cap;
};

static void tell(struct tiers *t, int pid, enum tier_event ev, enum tier_why why, uint64_t ts,
		 bool forgot)
{
	if (t->hook.window)
		t->hook.window(t->hook.ctx, pid, ev, why, ts, forgot);
}

static void window_begins(struct tiers *t, struct pwin *p, uint64_t now, enum tier_why why,
			  bool forgot)
{
	winlog__open(&p->log, now, why);
	p->phase_end = now + t->window_ns;
	tell(t, p->pid, TIER_OPEN, why, now, forgot);
}

static const char *mode_of(const struct gl_opts *o)
{
	return o->no_torch	  ? "off" :
	       o->tensors_sampled ? "sampled" :
	       o->tensors_full	  ? "full" :
				    "windowed";
}

struct tiers *tiers__new(struct session *s)
{
	const struct gl_opts *o = s->o;
	struct tiers *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->s = s;
	t->window_ns = o->tensor_window_ms * 1000000ULL;
	t->tail_ns = 2 * o->resolution_ms * 1000000ULL;
	if (t->tail_ns < TAIL_MIN_NS)
		t->tail_ns = TAIL_MIN_NS;
	/* automatic windows: at most duty % of the time, window + tail included */
	t->gap_ns = (t->window_ns + t->tail_ns) * (100 - o->tensor_duty_pct) / o->tensor_duty_pct;
	t->period_ns = 2 * t->gap_ns;
	winlog__init(&t->none, mode_of(o), o->tensor_sample_bytes, s->start_ns);
	/* the processes found before tracing started open their first windows now */
	tiers__step(t, s->start_ns);
	return t;
}

void tiers__free(struct tiers *t)
{
	if (t)
		free(t->pw);
	free(t);
}

void tiers__request(struct tiers *t)
{
	if (t)
		t->requested = 1;
}

static int arm(struct tiers *t, struct pwin *p, bool malloc_on, bool free_on)
{
	int err = tracer__arm_torch_pid(t->s->tracer, p->pid, malloc_on, free_on);

	if (err)
		log_warn("failed to %s PyTorch's allocator probes in PID %d: %s",
			 malloc_on || free_on ? "attach" : "detach", p->pid, strerror(-err));
	return err;
}

static struct pwin *find_pwin(struct tiers *t, int pid)
{
	for (int i = 0; i < t->npw; i++)
		if (t->pw[i].pid == pid)
			return &t->pw[i];
	return NULL;
}

/* The books' running process pid, or NULL. */
static struct proc *live_proc(struct tiers *t, int pid)
{
	struct proc *proc = procs__find_pid(books__procs(t->s->books), pid);

	return proc && !proc__totals(proc)->exited ? proc : NULL;
}

static uint64_t device_bytes(struct tiers *t, int pid)
{
	struct proc *proc = live_proc(t, pid);

	return proc ? proc__totals(proc)->bytes[GL_CLASS_DEVICE] : 0;
}

/* A process the tracer found with a PyTorch library: its first window is open since found. */
static int found(struct tiers *t, int pid, uint64_t found_ns)
{
	struct pwin *p = find_pwin(t, pid);

	if (!p) {
		if (t->npw == t->cap) {
			int cap = t->cap ? 2 * t->cap : 16;
			struct pwin *np = realloc(t->pw, cap * sizeof(*np));

			if (!np)
				return -ENOMEM;
			t->pw = np;
			t->cap = cap;
		}
		p = &t->pw[t->npw++];
	}
	/* a new process (or one with an exited one's PID): a log of its own */
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	winlog__init(&p->log, t->none.mode, t->none.sample_bytes, t->s->start_ns);
	window_begins(t, p, found_ns, TIER_WHY_START, false);
	log_info("PID %d: tensor window 1 (start): tracing its tensor blocks for %.1f s", pid,
		 t->window_ns / 1e9);
	return 0;
}

/* Its driver-level memory above its mark (a process not yet in a window counts from 0). */
static bool grew(struct tiers *t, struct pwin *p)
{
	uint64_t now = device_bytes(t, p->pid);

	if (now <= p->mark)
		return false;
	log_info("PID %d: driver-level device memory %llu bytes above the last window's: tracing "
		 "its tensor blocks",
		 p->pid, (unsigned long long)(now - p->mark));
	return true;
}

/* Its device is nearly full (NVML; none: never). */
static bool near_capacity(struct tiers *t, struct pwin *p, const struct nvml_sample *n)
{
	uint64_t used = NVML_UNKNOWN, headroom = NVML_UNKNOWN;

	if (!n)
		return false;
	nvml_sample__proc(n, p->pid, &used, &headroom);
	if (used == NVML_UNKNOWN || headroom == NVML_UNKNOWN || !(used + headroom))
		return false;
	if (used * 100 < (used + headroom) * CAPACITY_PCT)
		return false;
	log_info("PID %d: its device is over %d %% full: tracing its tensor blocks", p->pid,
		 CAPACITY_PCT);
	return true;
}

/* Its next window: forget what its last one left, then attach its probes. */
static int open_window(struct tiers *t, struct pwin *p, uint64_t now, enum tier_why why)
{
	uint64_t bpf_n = 0, user_n = 0;
	int err;

	tracer__drain(t->s->tracer);
	/* both books forget its last window's blocks at once: a record of that window
	 * read after it would book a block in user space's books alone, so the window
	 * waits until the ring is read up to now (a drain under a load faster than the
	 * reader stops at 1 s); a request is kept for the next step */
	if (tracer__unread(t->s->tracer)) {
		if (why == TIER_WHY_REQUEST)
			p->requested = true;
		log_debug("PID %d: tensor window (%s) waits: the ring is not read up to now",
			  p->pid, winlog__why_name(why));
		return 0;
	}
	err = tracer__forget_tensors_pid(t->s->tracer, p->pid, &bpf_n);
	if (err) {
		log_warn("failed to reset the kernel's tensor books of PID %d: %s; its tensor "
			 "windows stop",
			 p->pid, strerror(-err));
		winlog__stop(&p->log);
		tell(t, p->pid, TIER_STOP, TIER_WHY_START, now, false);
		return err;
	}
	err = books__forget_kind_pid(t->s->books, GL_KIND_TORCH, p->pid, now, &user_n);
	if (err)
		return err;
	log_info("PID %d: tensor window %llu (%s): tracing its tensor blocks for %.1f s (%llu "
		 "blocks of its last window forgotten)",
		 p->pid, (unsigned long long)winlog__total(&p->log) + 1, winlog__why_name(why),
		 t->window_ns / 1e9, (unsigned long long)user_n);
	if (bpf_n != user_n)
		log_debug("PID %d: tensor blocks forgotten: %llu in BPF, %llu in user space",
			  p->pid, (unsigned long long)bpf_n, (unsigned long long)user_n);
	window_begins(t, p, now, why, true);
	return arm(t, p, true, true);
}

static int step_idle(struct tiers *t, struct pwin *p, uint64_t now, bool check,
		     const struct nvml_sample *n)
{
	uint64_t last_end = winlog__last_end(&p->log);
	bool allowed = now >= last_end + t->gap_ns;

	if (p->requested) {
		p->requested = false;
		return open_window(t, p, now, TIER_WHY_REQUEST);
	}
	if (allowed && now >= last_end + t->period_ns)
		return open_window(t, p, now, TIER_WHY_DUTY);
	if (allowed && check && grew(t, p))
		return open_window(t, p, now, TIER_WHY_GROWTH);
	if (allowed && near_capacity(t, p, n))
		return open_window(t, p, now, TIER_WHY_CAPACITY);
	return 0;
}

/* Its window ends (it exited, or its tail is over): its probes are detached. */
static int close_window(struct tiers *t, struct pwin *p, uint64_t now)
{
	winlog__close(&p->log, now);
	tracer__drain(t->s->tracer);
	tell(t, p->pid, TIER_CLOSE, TIER_WHY_START, now, false);
	p->mark = device_bytes(t, p->pid);
	log_info("PID %d: tensor window %llu closed: its tensor blocks are not traced until the "
		 "next",
		 p->pid, (unsigned long long)winlog__total(&p->log));
	return arm(t, p, false, false);
}

static int step_one(struct tiers *t, struct pwin *p, uint64_t now, bool check,
		    const struct nvml_sample *n)
{
	struct proc *proc = procs__find_pid(books__procs(t->s->books), p->pid);

	if (p->gone)
		return 0;
	/* gone from the books, or (at each growth check) from the system */
	if ((proc && proc__totals(proc)->exited) || (check && kill(p->pid, 0) && errno == ESRCH)) {
		/* its probes went with it; a process found later with its PID is new */
		if (winlog__phase(&p->log) == WINLOG_ARMED || winlog__phase(&p->log) == WINLOG_TAIL)
			close_window(t, p, now);
		tracer__torch_forget_pid(t->s->tracer, p->pid);
		p->gone = true;
		return 0;
	}
	switch (winlog__phase(&p->log)) {
	case WINLOG_ARMED:
		if (now < p->phase_end)
			return 0;
		winlog__tail(&p->log);
		p->phase_end = now + t->tail_ns;
		books__torch_map_partial(t->s->books); /* no free extents from a window's blocks */
		tell(t, p->pid, TIER_TAIL, TIER_WHY_START, now, false);
		return arm(t, p, false, true);
	case WINLOG_TAIL:
		if (now < p->phase_end)
			return 0;
		return close_window(t, p, now);
	case WINLOG_IDLE: return step_idle(t, p, now, check, n);
	default:
		p->requested = false; /* stopped */
		return 0;
	}
}

int tiers__step(struct tiers *t, uint64_t now)
{
	const struct nvml_sample *n = NULL;
	bool check = false;
	uint64_t found_ns;
	int pid, err = 0;

	if (winlog__phase(&t->none) != WINLOG_IDLE) {
		t->requested = 0; /* full: always attached; off: never */
		return 0;
	}
	while (tracer__torch_next_found(t->s->tracer, &pid, &found_ns))
		if (found(t, pid, found_ns))
			return -ENOMEM;
	if (t->requested) {
		/* a request is for every process: each opens a window when idle */
		t->requested = 0;
		for (int i = 0; i < t->npw; i++)
			t->pw[i].requested = !t->pw[i].gone;
	}
	if (now >= t->next_check) {
		t->next_check = now + CHECK_NS;
		check = true;
	}
	if (now >= t->next_capacity) {
		t->next_capacity = now + CAPACITY_NS;
		/* nothing traced: no child process for NVML */
		n = t->npw ? gpu_sampler__get(t->s->gpus) : NULL;
	}
	for (int i = 0; i < t->npw; i++) {
		int e = step_one(t, &t->pw[i], now, check, n);

		if (e == -ENOMEM)
			return e;
		err = err ?: e;
	}
	return err;
}

const struct snap_tensors *tiers__view(struct tiers *t, uint64_t now)
{
	struct snap_tensors one;
	double armed_s = 0;

	winlog__view(&t->none, now, &t->view);
	if (winlog__phase(&t->none) != WINLOG_IDLE)
		return &t->view;
	/* the session's: armed in any process, the windows of all (each process has its own) */
	for (int i = 0; i < t->npw; i++) {
		winlog__view(&t->pw[i].log, now, &one);
		t->view.armed |= one.armed;
		t->view.windows_total += one.windows_total;
		armed_s += one.armed_s;
	}
	t->view.armed_s = armed_s;
	t->view.until_ns = 0;
	return &t->view;
}

void tiers__proc_view(struct tiers *t, int pid, uint64_t now, struct snap_tensors *out)
{
	struct pwin *p = winlog__phase(&t->none) == WINLOG_IDLE ? find_pwin(t, pid) : NULL;

	winlog__view(p ? &p->log : &t->none, now, out);
}

void tiers__set_hook(struct tiers *t, const struct tier_hook *hook)
{
	enum tier_why why;
	uint64_t start;

	t->hook = *hook;
	for (int i = 0; i < t->npw; i++) {
		struct pwin *p = &t->pw[i];

		if (!winlog__current(&p->log, &start, &why))
			continue;
		tell(t, p->pid, TIER_OPEN, why, start, false);
		if (winlog__phase(&p->log) == WINLOG_TAIL)
			tell(t, p->pid, TIER_TAIL, TIER_WHY_START, start, false);
	}
}
