/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * loader_int.h - the tracer's state, shared by loader.c (the skeleton's
 * lifecycle, the guard, the ring buffer), loader_attach.c (uprobes on libcuda,
 * PyTorch's allocator probes) and loader_maps.c (the maps user space reads and
 * writes). Not for other modules.
 */
#ifndef GL_LOADER_INT_H
#define GL_LOADER_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "loader.h"

#define MAX_LIBS GL_MAX_LIBS

/* UAPI values of kernel 6.6+, absent from older headers. */
#define GL_BPF_TRACE_UPROBE_MULTI 48
#define GL_BPF_F_UPROBE_MULTI_RETURN 1

struct gpuleak;
struct bpf_link;

struct attached_lib {
	bool used;	       /* the slot holds a library (a detached one's slot is reused) */
	bool pinned;	       /* never detached: the library new processes load (-a, serve) */
	uint64_t last_seen_ns; /* a process was last seen mapping it (a scan or a record) */
	dev_t dev;
	ino_t ino;
	int nr_funcs; /* functions probed (entry and return each) */
	struct lib_user {
		int pid;
		uint64_t start_ticks;
	} * users; /* processes seen mapping it, dead ones pruned at each detach pass */
	uint32_t nr_users, cap_users;
	int nr_links;
	struct bpf_link **links; /* perf-event uprobes, one per probe */
	int multi_fds[2];	 /* uprobe_multi links: entries, returns (-1 if none) */
};

struct torch_lib {
	dev_t dev;
	ino_t ino;
	struct bpf_link *links[2]; /* pytorch:malloc, pytorch:free; NULL while disarmed */
	char path[PATH_MAX];
};

/* A process's own links to PyTorch's probes (torch_per_pid). */
struct torch_pid {
	int pid;
	int lib;		   /* the torch[] entry it maps */
	bool armed[2];		   /* pytorch:malloc, pytorch:free wanted attached */
	struct bpf_link *links[2]; /* NULL: detached */
};

struct tracer {
	struct gpuleak *skel;
	pid_t guard;		  /* releases held processes if the tracer dies; 0 if none */
	int guard_fd;		  /* the guard sees EOF on its end of this pipe when we are gone */
	uint64_t hold_timeout_ns; /* a hold older than this counts for no gpuleak */
	struct torch_lib torch[MAX_LIBS];
	int nr_torch;
	struct mouth *mouth; /* reads the ring (mouth.h) */
	tracer_record_fn fn;
	void *fn_ctx;
	struct attached_lib libs[MAX_LIBS];
	int nr_libs;	    /* slots in use or used before: libs[0..nr_libs) */
	int nr_libs_in_use; /* of them, used */
	int nr_probes;
	int ncpus;
	bool no_multi; /* the kernel has no uprobe_multi links: one perf event per probe */
	bool bench_floor;
	bool torch_armed[2]; /* pytorch:malloc, pytorch:free wanted attached */
	bool torch_per_pid;  /* links per process (torch_pids), none global */
	struct torch_pid *torch_pids;
	int nr_torch_pids, cap_torch_pids;
	int torch_found_next;	  /* torch_pids[] from here on: not yet taken by next_found */
	uint64_t *torch_found_ns; /* per torch_pids[]: when found */
	uint64_t stack_recs, stack_ring_bytes; /* stack records read and the ring bytes they took */
	uint64_t py_refused;		       /* processes the full py_procs map refused */

	/* reading the ring (tracer__poll, tracer__stop) */
	bool stopped;		  /* tracer__stop: no call is booked any more */
	uint64_t budget_ns;	  /* a poll or drain reads this long at most (0: no limit) */
	bool yielded;		  /* the budget ended that read, records still waiting */
	unsigned int since_clock; /* records read since the clock was last looked at */
	uint64_t budget_end_ns;	  /* 0: the budget starts at the next record */
	const unsigned long *ring_cons, *ring_prod; /* the ring's positions (read-only maps) */
	long ring_page;				    /* their size */
	uint64_t read_ns; /* every record committed before this time has been read */
	uint64_t unread;  /* ring bytes the last drain left of those waiting as it began */
};

#endif /* GL_LOADER_INT_H */
