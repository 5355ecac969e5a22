/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * targets_int.h - the targets' state, shared by targets.c (the named targets,
 * liveness, pending scans), targets_attach.c (attaching what a process maps),
 * targets_hold.c (a process held at a library's mapping) and targets_child.c
 * (run's child). Not for other modules.
 *
 * Functions returning int return as targets.h says, unless said otherwise.
 */
#ifndef GL_TARGETS_INT_H
#define GL_TARGETS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "targets.h"

struct cuda_lib;

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
	struct pending_scan *pending; /* grown as processes change their libraries */
	int nr_pending, cap_pending;
	struct lib_id torch_denied[16]; /* serve: PyTorch libraries refused for privileges */
	int nr_torch_denied;
	struct lib_id bad_libs[16]; /* libcuda files that cannot be read: said once */
	int nr_bad_libs;
	bool hold_eperm;	/* attaching for a held process was refused: stop */
	uint64_t holds_expired; /* holds the guard ended at their deadline (targets_hold.c) */
	uint64_t libs_refused;	/* mappings of a libcuda file past GL_MAX_LIBS files */
	struct full_lib {
		dev_t dev;
		ino_t ino;
		int last_pid; /* the last process counted for it */
	} full_libs[16];      /* files refused for the cap: named once each */
	int scanning;	      /* the PID targets__scan_pid() is looking at */
	int nr_full_libs;
	/* -a: the PIDs of the last listing of /proc, sorted; a rescan reads only the others
	 * (one already listed that maps a library later is seen by BPF at its mapping) */
	int *listed, *listing;
	size_t nr_listed, cap_listed, nr_listing, cap_listing;
	uint64_t next_full_rescan_ns, last_full_scan_ns;
	uint64_t lost_proc_records; /* BPF's count at the last full scan */
};

/* The named target pid, or NULL. */
static inline struct target *targets__find(struct targets *s, int pid)
{
	for (int i = 0; i < s->nr_targets; i++)
		if (s->targets[i].pid == pid)
			return &s->targets[i];
	return NULL;
}

/* targets_attach.c */
/*
 * Attaches to lib if it is new; pid (-1: none) is named in the message.
 * Returns 0, or -errno (-EPERM: privileges).
 */
int targets__attach_lib(struct targets *s, const struct cuda_lib *lib, int pid);
/*
 * Attaches to PyTorch's allocator probes if pid maps libc10_cuda.so. Returns
 * 1 when the library was found (attached or without probes), 0 when pid maps
 * none (yet), -EPERM on privileges.
 */
int targets__attach_torch(struct targets *s, int pid);
/* Looks for the target's libcuda; attaches when found. Returns 0, 1 (not yet) or -errno. */
int targets__try_attach(struct targets *s, struct target *t);
/*
 * Attaches to whatever pid maps that is not attached yet: its libcuda,
 * PyTorch's probes, its Python. Returns 1 if it maps a libcuda, 0 if not,
 * -ENOEXEC if it maps one gpuleak cannot read (said), -EPERM on privileges.
 */
int targets__scan_pid(struct targets *s, int pid);
/*
 * -a: attach to every libcuda any process maps; unless full, only in processes not
 * listed in /proc at the last scan. Returns 0 or -EPERM.
 */
int targets__scan_all(struct targets *s, bool full);
/*
 * -a: the libcuda new processes would load (--libcuda, else the dynamic
 * loader's choice) is attached before any process maps it, so that they are
 * traced from their first call. Returns 0, -EPERM, or -EIO for --libcuda.
 */
int targets__attach_system_lib(struct targets *s);

/* targets_child.c */
/*
 * run: starts the command, held until the probes are attached. Returns 0,
 * -EPERM, -EIO, -ENOENT (not found) or -ENOEXEC (cannot be run), said.
 */
int targets__start_child(struct targets *s);

#endif /* GL_TARGETS_INT_H */
