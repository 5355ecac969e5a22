/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * session_int.h - the session's state, shared by session.c (lifecycle, loop,
 * reports), targets.c (finding and attaching what is traced) and serve.c.
 * Not for other modules.
 */
#ifndef GL_SESSION_INT_H
#define GL_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "books/books.h"
#include "cli.h"
#include "stacks/modstore.h"
#include "stacks/python.h"
#include "stacks/symbolize.h"
#include "stacks/unwind.h"
#include "trace/libcuda.h"
#include "trace/loader.h"

/* A library change is scanned at once and once more this much later. */
#define PENDING_FOLLOW_UP_NS 100000000ULL

enum target_state { T_WAITING, T_ATTACHED, T_EXITED };

struct pending_scan {
	int pid;
	bool scanned;	  /* the first scan is done; the follow-up is due at due_ns */
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
	struct modstore *keep; /* --keep-modules */
	struct target targets[GL_MAX_PIDS];
	int nr_targets;
	pid_t child;
	int child_status;
	bool child_done;
	uint64_t start_ns, deadline_ns, next_summary_ns, next_liveness_ns, next_rescan_ns;
	uint64_t wait_deadline_ns, next_reconcile_ns;
	struct pending_scan pending[64];
	int nr_pending;
	struct lib_id torch_denied[16]; /* serve: PyTorch libraries refused for privileges */
	int nr_torch_denied;
	struct tiers *tiers;	  /* when the tensor level is traced */
	struct nvml_sample *nvml; /* the latest NVML sample */
	bool nvml_off;		  /* no NVML here, or it failed: not asked again */
};

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(). */
uint64_t now_ns(void);

/* NVML's view of the devices now; NULL when there is none (session.c). */
const struct nvml_sample *session__sample_nvml(struct session *s);

/* targets.c */
/* Attaches to what the command line names (PIDs, -a, or a new child). Returns EXIT_*. */
int targets__start(struct session *s);
/* Periodic work: pending scans, -a rescans, liveness. True when every target is done. */
bool targets__step(struct session *s, uint64_t now, int *status);
/* Books hook: the dynamic loader changed a traced process's libraries. */
void targets__libs_changed(void *ctx, int pid);
/* The run-mode child: forward a signal; collect its status if it exited. */
void targets__signal_child(struct session *s, int sig);
void targets__reap_child(struct session *s);
struct target *targets__find(struct session *s, int pid);

#endif /* GL_SESSION_INT_H */
