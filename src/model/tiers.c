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

#define NS 1000000000ULL
#define TAIL_MIN_NS NS	      /* frees of the blocks in flight at a window's end */
#define CHECK_NS 100000000ULL /* growth checks */
#define CAPACITY_NS (30 * NS) /* NVML samples for the capacity trigger */
#define CAPACITY_PCT 90	      /* of a device's memory in use */
#define MAX_MARKS 256

enum phase { PH_OFF, PH_FULL, PH_ARMED, PH_TAIL, PH_IDLE };

/* A process's driver-level device bytes when the last window ended. */
struct mark {
	int pid;
	uint64_t start_time;
	uint64_t device_bytes;
};

struct tiers {
	struct session *s;
	enum phase phase;
	uint64_t window_ns, tail_ns, gap_ns, period_ns;
	uint64_t phase_end; /* ARMED, TAIL: when the phase ends */
	uint64_t last_end;  /* end of the last window (0: none yet) */
	uint64_t next_check, next_capacity;
	volatile sig_atomic_t requested;
	uint64_t armed_ns; /* closed windows */
	struct snap_tensors view;
	uint64_t win_start[SNAP_MAX_WINDOWS], win_end[SNAP_MAX_WINDOWS];
	uint8_t win_why[SNAP_MAX_WINDOWS];
	struct mark marks[MAX_MARKS];
	int nr_marks;
};

static const char *const why_names[TIER_NR_WHY] = {
	[TIER_WHY_START] = "start",	[TIER_WHY_DUTY] = "duty",
	[TIER_WHY_GROWTH] = "growth",	[TIER_WHY_CAPACITY] = "capacity",
	[TIER_WHY_REQUEST] = "request",
};

const char *tiers__why_name(enum tier_why why)
{
	return why < TIER_NR_WHY ? why_names[why] : "unknown";
}

/* The newest window's slot. */
static uint32_t newest(const struct tiers *t)
{
	return (t->view.windows_total - 1) % SNAP_MAX_WINDOWS;
}

static void window_begins(struct tiers *t, uint64_t now, enum tier_why why)
{
	uint32_t i = t->view.windows_total++ % SNAP_MAX_WINDOWS;

	t->win_start[i] = now;
	t->win_end[i] = 0;
	t->win_why[i] = why;
	t->phase = PH_ARMED;
	t->phase_end = now + t->window_ns;
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
	t->view.mode = o->no_torch	  ? "off" :
		       o->tensors_sampled ? "sampled" :
		       o->tensors_full	  ? "full" :
					    "windowed";
	t->view.sample_bytes = o->tensor_sample_bytes;
	if (o->no_torch) {
		t->phase = PH_OFF;
	} else if (o->tensors_full) {
		t->phase = PH_FULL;
	} else {
		/* the tracer starts armed: the first window opens with tracing */
		window_begins(t, s->start_ns, TIER_WHY_START);
	}
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
		t->phase = PH_OFF;
		return err;
	}
	err = books__forget_kind(t->s->books, GL_KIND_TORCH, now, &user_n);
	if (err)
		return err;
	log_info("tensor window %llu (%s): tracing tensor blocks for %.1f s (%llu blocks of the "
		 "last window forgotten)",
		 (unsigned long long)t->view.windows_total + 1, tiers__why_name(why),
		 t->window_ns / 1e9, (unsigned long long)user_n);
	if (bpf_n != user_n)
		log_debug("tensor blocks forgotten: %llu in BPF, %llu in user space",
			  (unsigned long long)bpf_n, (unsigned long long)user_n);
	window_begins(t, now, why);
	return arm(t, true, true);
}

static int step_idle(struct tiers *t, uint64_t now)
{
	bool allowed = now >= t->last_end + t->gap_ns;

	if (t->requested) {
		t->requested = 0;
		return open_window(t, now, TIER_WHY_REQUEST);
	}
	if (allowed && now >= t->last_end + t->period_ns)
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
	switch (t->phase) {
	case PH_ARMED:
		if (now < t->phase_end)
			return 0;
		t->phase = PH_TAIL;
		t->phase_end = now + t->tail_ns;
		books__torch_map_partial(t->s->books); /* no free extents from a window's blocks */
		return arm(t, false, true);
	case PH_TAIL:
		if (now < t->phase_end)
			return 0;
		t->phase = PH_IDLE;
		t->win_end[newest(t)] = now;
		t->armed_ns += now - t->win_start[newest(t)];
		t->last_end = now;
		tracer__drain(t->s->tracer);
		take_marks(t);
		log_info("tensor window %llu closed: tensor blocks are not traced until the next",
			 (unsigned long long)t->view.windows_total);
		return arm(t, false, false);
	case PH_IDLE: return step_idle(t, now);
	default:
		t->requested = 0; /* full: always attached; off: never */
		return 0;
	}
}

const struct snap_tensors *tiers__view(struct tiers *t, uint64_t now)
{
	struct snap_tensors *v = &t->view;
	uint64_t total = v->windows_total;
	uint32_t n = total < SNAP_MAX_WINDOWS ? total : SNAP_MAX_WINDOWS;
	uint64_t start = t->s->start_ns;

	v->armed = t->phase == PH_FULL || t->phase == PH_ARMED || t->phase == PH_TAIL;
	v->until_ns = t->phase == PH_IDLE ? t->last_end : 0;
	if (t->phase == PH_FULL)
		v->coverage = v->sample_bytes ? "sampled" : "complete";
	else if (t->phase == PH_OFF)
		v->coverage = "none";
	else if (total == 1 && t->phase == PH_ARMED && t->win_start[0] <= start)
		v->coverage = "complete"; /* the first window, still open */
	else
		v->coverage = "windowed";
	v->armed_s = t->armed_ns / 1e9;
	if (t->phase == PH_ARMED || t->phase == PH_TAIL)
		v->armed_s += (now - t->win_start[newest(t)]) / 1e9;
	if (t->phase == PH_FULL)
		v->armed_s = now > start ? (now - start) / 1e9 : 0;
	v->nwindows = n;
	for (uint32_t j = 0; j < n; j++) {
		uint32_t i = (total - n + j) % SNAP_MAX_WINDOWS;

		v->windows[j] = (struct snap_window){
			.start_s = t->win_start[i] > start ? (t->win_start[i] - start) / 1e9 : 0,
			.end_s = t->win_end[i] ? (t->win_end[i] - start) / 1e9 : -1,
			.why = tiers__why_name(t->win_why[i]),
		};
	}
	return v;
}
