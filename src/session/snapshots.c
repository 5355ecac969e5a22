// SPDX-License-Identifier: BSD-2-Clause
/*
 * snapshots.c - the snapshot every command reports from: the books with the
 * tracer's own figures read after the ring was drained (again while the two
 * books differ for an instant), the launchers hidden, the jobs grouped.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "books/books.h"
#include "gpu/sampler.h"
#include "model/mvtrace.h"
#include "model/snapshot.h"
#include "model/timeline.h"
#include "session.h"
#include "session_int.h"
#include "tiers.h"
#include "trace/loader.h"
#include "trace/probes.h"
#include "trace/targets.h"
#include "util/clock.h"

#define SNAPSHOT_ATTEMPTS 3
#define SNAPSHOT_RETRY_US 20000

static void proc_tensors(void *ctx, int pid, uint64_t now, struct snap_tensors *out)
{
	tiers__proc_view(ctx, pid, now, out);
}

static void proc_timeline(void *ctx, int pid, uint64_t start_time, struct snap_timeline *out)
{
	timeline__proc(ctx, pid, start_time, out);
}

static int bpf_stats_cb(void *ctx, int pid, struct gl_proc_stats *out)
{
	return tracer__proc_stats(ctx, pid, out);
}

struct snapshot *session__snapshot_of(struct session *s, uint32_t max_stacks, bool symbols,
				      bool drain, int only_pid, int judge_pid, uint64_t judge_ns)
{
	uint64_t stats[GL_NR_STATS] = {}, calls[GL_NR_APIS] = {};
	struct snap_limits limits = {
		.max_libs = GL_MAX_LIBS,
		.max_py_procs = tracer__max_py_procs(s->tracer),
		.py_refused = tracer__py_refused(s->tracer),
		.hold_timeout_ns = s->o->hold_timeout_ms ? s->o->hold_timeout_ms * 1000000ULL :
							   GL_HOLD_TIMEOUT_NS,
	};
	struct snapshot_opts so = {
		.start_ns = s->start_ns,
		.max_stacks = max_stacks,
		.stats = stats,
		.api_calls = calls,
		.bpf_stats = bpf_stats_cb,
		.bpf_ctx = s->tracer,
		.python = symbols ? s->python : NULL,
		.stack_mode = stack_mode__name(s->o->stack_mode),
		.nr_probes = tracer__nr_probes(s->tracer),
		/* explain answers for its targets even when they made no CUDA call */
		.nvml = s->o->cmd == CMD_EXPLAIN ? gpu_sampler__get(s->gpus) :
						   session__sample_nvml(s),
		.cap_allocs = s->o->max_allocs,
		.cap_stacks = s->o->max_stacks,
		.imbalance_ratio = s->o->imbalance_pct / 100.0,
		.cap_procs = s->o->max_procs,
		.limits = &limits,
		.memory_map = s->o->needs & GL_NEED_MEMORY_EVENTS,
		.mvtrace = s->mvtrace,
		.proc_timeline = s->timeline ? proc_timeline : NULL,
		.timeline_ctx = s->timeline,
		.only_pid = only_pid,
		.judge_pid = judge_pid,
		.judge_ns = judge_ns,
	};
	struct snapshot *snap = NULL;
	struct tracer_prog_time times[SNAP_MAX_PROGS];
	struct snap_prog progs[SNAP_MAX_PROGS];
	struct rusage ru;

	targets__limits(s->targets, &limits.libs_refused, &limits.holds_expired);
	so.progs = progs;
	/* a call between its kernel-side update and its record can make the two
	 * books differ for an instant: drain and look again before saying so */
	so.histories = !drain || (s->o->needs & GL_NEED_HISTORIES); /* what --html draws */
	for (int attempt = 0; attempt < (drain ? SNAPSHOT_ATTEMPTS : 1); attempt++) {
		if (attempt)
			usleep(SNAPSHOT_RETRY_US);
		if (drain) {
			tracer__drain(s->tracer);
			session__reconcile_exits(s);
		}
		/* the tracer's own figures after the drain, with the books they describe */
		so.unread_bytes = tracer__unread(s->tracer);
		tracer__stats(s->tracer, stats);
		tracer__api_calls(s->tracer, calls);
		so.ring_stack_records = tracer__ring_stacks(s->tracer, &so.ring_stack_bytes);
		tracer__ring(s->tracer, &so.ring.bytes, &so.ring.backlog_peak,
			     &so.ring.backlog_limit, &so.ring.backlog_full);
		so.nprogs = (uint32_t)tracer__prog_times(s->tracer, times, SNAP_MAX_PROGS);
		for (uint32_t i = 0; i < so.nprogs; i++) {
			memcpy(progs[i].name, times[i].name, sizeof(progs[i].name));
			progs[i].runs = times[i].runs;
			progs[i].run_ns = times[i].run_ns;
		}
		if (!getrusage(RUSAGE_SELF, &ru))
			so.self_cpu_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
					 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
		so.now_ns = now_ns();
		so.tensors = s->tiers ? tiers__view(s->tiers, so.now_ns) : NULL;
		so.proc_tensors = s->tiers ? proc_tensors : NULL;
		so.tensors_ctx = s->tiers;
		snapshot__free(snap);
		snap = snapshot__build(s->books, symbols ? s->sym : NULL, &so);
		if (!snap || snap->complete || snap->lost_events || snap->unread_bytes)
			break;
	}
	/* run: the launchers and shells in front of the job are no part of its report */
	if (snap && s->o->cmd == CMD_RUN)
		snapshot__hide_idle(snap);
	else if (snap && s->o->cmd != CMD_EXPLAIN)
		snapshot__hide_idle_children(snap);
	if (snap && s->o->cmd == CMD_EXPLAIN &&
	    snapshot__add_targets(snap, s->o->pids, s->o->nr_pids, so.nvml)) {
		snapshot__free(snap);
		errno = ENOMEM;
		snap = NULL;
	}
	if (snap)
		snapshot__proc_imbalances(snap, so.imbalance_ratio);
	if (snap && snapshot__group_jobs(snap, so.imbalance_ratio)) {
		snapshot__free(snap);
		snap = NULL;
		errno = ENOMEM;
	}
	return snap;
}

struct snapshot *session__snapshot(struct session *s, uint32_t max_stacks, bool symbols)
{
	return session__snapshot_of(s, max_stacks, symbols, true, 0, 0, 0);
}

struct snapshot *session__snapshot_now(struct session *s)
{
	return session__snapshot_of(s, 0, true, false, 0, 0, 0);
}

struct snapshot *session__snapshot_pid(struct session *s, int pid)
{
	return session__snapshot_of(s, 0, true, false, pid, 0, 0);
}
