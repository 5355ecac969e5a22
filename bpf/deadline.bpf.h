/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * deadline.bpf.h - the kernel side of a hold's deadline: a BPF timer per held
 * process that continues it at --hold-timeout whatever user space does (a
 * tracer and its guard stopped together by a cgroup freezer, starved, in a
 * debugger).
 *
 * The kernel sends a signal from BPF only where the CPU runs a user task
 * (bpf_send_signal_task answers EPERM from the idle task or a kernel thread,
 * which is where a timer often fires). So the callback tries, and while it is
 * refused tries again every millisecond; a timer started again from an idle
 * CPU goes to a busy one, where a user task is likely. On an idle host that can
 * take seconds (2-7 s past a 1 s deadline, docs/limits.md); the guard, in user
 * space, remains the other half.
 *
 * Needs bpf_task_from_pid (6.2) and bpf_send_signal_task (6.13); on an older
 * kernel the kfuncs are missing, nothing is started, and the guard alone keeps
 * the deadline.
 */
#ifndef GPULEAK_DEADLINE_BPF_H
#define GPULEAK_DEADLINE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type,
				u64 value) __ksym __weak;

#define GL_DEADLINE_RETRY_NS 1000000ULL /* while the kernel refuses the signal */

const volatile __u64 targ_hold_timeout_ns = 5000000000ULL;

struct hold_timer {
	struct bpf_timer timer;
	__u64 start_ns; /* the held process's start_boottime: its identity */
};

/* One timer per held process: tgid -> its timer. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct hold_timer);
} hold_timers SEC(".maps");

static __always_inline bool deadline_kfuncs(void)
{
	return bpf_task_from_pid && bpf_task_release && bpf_send_signal_task;
}

/*
 * The deadline came: if the process is still held by this tracer (its entry in
 * held, taken first so that a release by user space at the same moment sends
 * SIGCONT once), SIGCONT to the process, and the hold goes into hold_expired
 * with GL_HOLD_BY_KERNEL set, for user space to name.
 */
static int hold_deadline(void *map, __u32 *key, struct hold_timer *v)
{
	struct gl_hold_key hk = { .tgid = *key, .agent = targ_self };
	struct task_struct *task;
	__u64 *held_since, since;
	__u32 tgid = *key;
	int err = -1;

	held_since = bpf_map_lookup_elem(&held, &tgid);
	if (!held_since) {
		bpf_map_delete_elem(&hold_timers, &tgid); /* released in time */
		return 0;
	}
	since = *held_since;
	if (bpf_map_delete_elem(&held, &tgid))
		return 0; /* user space or the guard is releasing it now */
	task = bpf_task_from_pid(tgid);
	if (!task) {
		/* gone already (another gpuleak let it go): still a hold past its deadline */
		bpf_map_update_elem(&hold_expired, &tgid, &since, BPF_ANY);
		bpf_map_delete_elem(&hold_timers, &tgid);
		return 0;
	}
	if (task->start_boottime == v->start_ns)
		err = bpf_send_signal_task(task, 18 /* SIGCONT */, PIDTYPE_TGID, 0);
	else
		err = 0; /* another process has the PID: nothing of ours to continue */
	bpf_task_release(task);
	if (err) {
		/* refused here (no user address space on this CPU): held again, and another
		 * try, for as long as the process is held (its exit, or the tracer's, ends it) */
		bpf_map_update_elem(&held, &tgid, &since, BPF_NOEXIST);
		bpf_timer_start(&v->timer, GL_DEADLINE_RETRY_NS, 0);
		return 0;
	}
	since |= GL_HOLD_BY_KERNEL;
	bpf_map_update_elem(&hold_expired, &tgid, &since, BPF_ANY);
	bpf_map_delete_elem(&hold_book, &hk);
	bpf_map_delete_elem(&hold_timers, &tgid);
	return 0;
}

/* A process was just held: its deadline starts. */
static __always_inline void start_deadline(struct task_struct *task, __u32 tgid)
{
	struct hold_timer init = { .start_ns = task->group_leader->start_boottime };
	struct hold_timer *v;

	if (!deadline_kfuncs())
		return;
	if (bpf_map_update_elem(&hold_timers, &tgid, &init, BPF_ANY))
		return;
	v = bpf_map_lookup_elem(&hold_timers, &tgid);
	if (!v || bpf_timer_init(&v->timer, &hold_timers, 1 /* CLOCK_MONOTONIC */))
		return;
	bpf_timer_set_callback(&v->timer, hold_deadline);
	bpf_timer_start(&v->timer, targ_hold_timeout_ns, 0);
}

/*
 * Holds the current process: SIGSTOP to all of it, taken on the way back to user space,
 * an entry in held and in the shared book. Returns 1 when held now, 0 when it was held
 * already, -1 when it could not be (user space is told so). The caller starts the
 * deadline: a uprobe cannot (the kernel keeps bpf_timer from kprobe-type programs), so
 * for a hold made there the deadline starts as the stop is taken (hold_signal below).
 */
static __always_inline int hold_current(struct task_struct *task, __u32 tgid, __u64 now)
{
	long err = bpf_map_update_elem(&held, &tgid, &now, BPF_NOEXIST);
	struct gl_hold_key hk = { .tgid = tgid, .agent = targ_self };
	struct gl_hold_val hv = { .since = now,
				  .start_ns = task->group_leader->start_boottime,
				  .agent_ticks = targ_self_ticks };

	if (err == -17 /* EEXIST */)
		return 0;
	if (err)
		return -1;
	if (bpf_send_signal(19 /* SIGSTOP */)) {
		bpf_map_delete_elem(&held, &tgid);
		return -1;
	}
	bpf_map_update_elem(&hold_book, &hk, &hv, BPF_ANY);
	return 1;
}

#endif /* GPULEAK_DEADLINE_BPF_H */
