// SPDX-License-Identifier: BSD-2-Clause
/*
 * tiers.c - the tensor level's windows (see tiers.h): a small state machine
 * stepped by the session's loop, attaching and detaching PyTorch's allocator
 * probes through the tracer and keeping the list of windows the reports name.
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
#include "winlog.h"

#define NS 1000000000ULL
#define TAIL_MIN_NS NS	      /* frees of the blocks in flight at a window's end */
#define CHECK_NS 100000000ULL /* growth checks */
#define CAPACITY_NS (30 * NS) /* NVML samples for the capacity trigger */
#define CAPACITY_PCT 90	      /* of a device's memory in use */
#define MAX_MARKS 256

/* A process's driver-level device bytes when the last window ended. */
struct mark {
	int pid;
	uint64_t start_time;
	uint64_t device_bytes;
};

struct tiers {
	struct session *s;
	struct winlog log; /* the phase and the windows the reports name */
	struct tier_hook hook;
	uint64_t window_ns, tail_ns, gap_ns, period_ns;
	uint64_t phase_end; /* ARMED, TAIL: when the phase ends */
	uint64_t next_check, next_capacity;
	volatile sig_atomic_t requested;
	struct snap_tensors view;
	struct mark marks[MAX_MARKS];
	int nr_marks;
};

static void tell(struct tiers *t, enum tier_event ev, enum tier_why why, uint64_t ts, bool forgot)
{
	if (t->hook.window)
		t->hook.window(t->hook.ctx, ev, why, ts, forgot);
}

static void window_begins(struct tiers *t, uint64_t now, enum tier_why why, bool forgot)
{
	winlog__open(&t->log, now, why);
	t->phase_end = now + t->window_ns;
	tell(t, TIER_OPEN, why, now, forgot);
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
	winlog__init(&t->log,
		     o->no_torch	? "off" :
		     o->tensors_sampled ? "sampled" :
		     o->tensors_full	? "full" :
					  "windowed",
		     o->tensor_sample_bytes, s->start_ns);
	/* the tracer starts armed: the first window opens with tracing */
	if (winlog__phase(&t->log) == WINLOG_IDLE)
		window_begins(t, s->start_ns, TIER_WHY_START, false);
	return t;
}

void tiers__free(struct tiers *t)
{
	free(t);
}

void tiers__request(struct tiers *t)
{
	if (t)
		t->requested = 1;
}

static int arm(struct tiers *t, bool malloc_on, bool free_on)
{
	int err = tracer__arm_torch(t->s->tracer, malloc_on, free_on);

	if (err)
		log_warn("failed to %s PyTorch's allocator probes: %s",
			 malloc_on || free_on ? "attach" : "detach", strerror(-err));
	return err;
}

/* Every live process's device bytes now: growth is measured from these. */
static void take_marks(struct tiers *t)
{
	struct procs *procs = books__procs(t->s->books);
	struct proc *proc;

	t->nr_marks = 0;
	for (uint32_t i = 0; (proc = procs__at(procs, i)) && t->nr_marks < MAX_MARKS; i++) {
		if (proc__totals(proc)->exited)
			continue;
		t->marks[t->nr_marks++] =
			(struct mark){ proc__totals(proc)->pid, proc__totals(proc)->start_time,
				       proc__totals(proc)->bytes[GL_CLASS_DEVICE] };
	}
}

/* A process's driver-level memory above its mark (a new process counts from 0). */
static bool grew(struct tiers *t)
{
	struct procs *procs = books__procs(t->s->books);
	struct proc *proc;

	for (uint32_t i = 0; (proc = procs__at(procs, i)); i++) {
		uint64_t mark = 0;

		if (proc__totals(proc)->exited || !proc__totals(proc)->bytes[GL_CLASS_DEVICE])
			continue;
		for (int j = 0; j < t->nr_marks; j++) {
			const struct mark *m = &t->marks[j];

			if (m->pid == proc__totals(proc)->pid &&
			    m->start_time == proc__totals(proc)->start_time)
				mark = m->device_bytes;
		}
		if (proc__totals(proc)->bytes[GL_CLASS_DEVICE] > mark) {
			log_info("PID %d: driver-level device memory %llu bytes above the last "
				 "window's: tracing tensor blocks",
				 proc__totals(proc)->pid,
				 (unsigned long long)(proc__totals(proc)->bytes[GL_CLASS_DEVICE] -
						      mark));
			return true;
		}
	}
	return false;
}

/* A traced process on a device that is nearly full (NVML; none: never). */
static bool near_capacity(struct tiers *t)
{
	struct procs *procs = books__procs(t->s->books);
	/* nothing traced: no child process for NVML */
	const struct nvml_sample *n = procs__count(procs) ? gpu_sampler__get(t->s->gpus) : NULL;
	struct proc *proc;

	for (uint32_t i = 0; n && (proc = procs__at(procs, i)); i++) {
		uint64_t used = NVML_UNKNOWN, headroom = NVML_UNKNOWN;

		if (proc__totals(proc)->exited)
			continue;
		nvml_sample__proc(n, proc__totals(proc)->pid, &used, &headroom);
		if (used == NVML_UNKNOWN || headroom == NVML_UNKNOWN || !(used + headroom))
			continue;
		if (used * 100 >= (used + headroom) * CAPACITY_PCT) {
			log_info("PID %d: its device is over %d %% full: tracing tensor blocks",
				 proc__totals(proc)->pid, CAPACITY_PCT);
			return true;
		}
	}
	return false;
}

/* The next window: forget what the last one left, then attach. */
static int open_window(struct tiers *t, uint64_t now, enum tier_why why)
{
	uint64_t bpf_n = 0, user_n = 0;
	int err;

	tracer__drain(t->s->tracer);
	err = tracer__forget_tensors(t->s->tracer, &bpf_n);
	if (err) {
		log_warn("failed to reset the kernel's tensor books: %s; tensor windows stop",
			 strerror(-err));
		winlog__stop(&t->log);
		tell(t, TIER_STOP, TIER_WHY_START, now, false);
		return err;
	}
	err = books__forget_kind(t->s->books, GL_KIND_TORCH, now, &user_n);
	if (err)
		return err;
	log_info("tensor window %llu (%s): tracing tensor blocks for %.1f s (%llu blocks of the "
		 "last window forgotten)",
		 (unsigned long long)winlog__total(&t->log) + 1, winlog__why_name(why),
		 t->window_ns / 1e9, (unsigned long long)user_n);
	if (bpf_n != user_n)
		log_debug("tensor blocks forgotten: %llu in BPF, %llu in user space",
			  (unsigned long long)bpf_n, (unsigned long long)user_n);
	window_begins(t, now, why, true);
	return arm(t, true, true);
}

static int step_idle(struct tiers *t, uint64_t now)
{
	uint64_t last_end = winlog__last_end(&t->log);
	bool allowed = now >= last_end + t->gap_ns;

	if (t->requested) {
		t->requested = 0;
		return open_window(t, now, TIER_WHY_REQUEST);
	}
	if (allowed && now >= last_end + t->period_ns)
		return open_window(t, now, TIER_WHY_DUTY);
	if (allowed && now >= t->next_check) {
		t->next_check = now + CHECK_NS;
		if (grew(t))
			return open_window(t, now, TIER_WHY_GROWTH);
	}
	if (allowed && now >= t->next_capacity) {
		t->next_capacity = now + CAPACITY_NS;
		if (near_capacity(t))
			return open_window(t, now, TIER_WHY_CAPACITY);
	}
	return 0;
}

int tiers__step(struct tiers *t, uint64_t now)
{
	switch (winlog__phase(&t->log)) {
	case WINLOG_ARMED:
		if (now < t->phase_end)
			return 0;
		winlog__tail(&t->log);
		t->phase_end = now + t->tail_ns;
		books__torch_map_partial(t->s->books); /* no free extents from a window's blocks */
		tell(t, TIER_TAIL, TIER_WHY_START, now, false);
		return arm(t, false, true);
	case WINLOG_TAIL:
		if (now < t->phase_end)
			return 0;
		winlog__close(&t->log, now);
		tracer__drain(t->s->tracer);
		tell(t, TIER_CLOSE, TIER_WHY_START, now, false);
		take_marks(t);
		log_info("tensor window %llu closed: tensor blocks are not traced until the next",
			 (unsigned long long)winlog__total(&t->log));
		return arm(t, false, false);
	case WINLOG_IDLE: return step_idle(t, now);
	default:
		t->requested = 0; /* full: always attached; off: never */
		return 0;
	}
}

const struct snap_tensors *tiers__view(struct tiers *t, uint64_t now)
{
	winlog__view(&t->log, now, &t->view);
	return &t->view;
}

void tiers__set_hook(struct tiers *t, const struct tier_hook *hook)
{
	enum tier_why why;
	uint64_t start;

	t->hook = *hook;
	if (!winlog__current(&t->log, &start, &why))
		return;
	tell(t, TIER_OPEN, why, start, false);
	if (winlog__phase(&t->log) == WINLOG_TAIL)
		tell(t, TIER_TAIL, TIER_WHY_START, start, false);
}
