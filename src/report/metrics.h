/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * metrics.h - the Prometheus text exposition (format 0.0.4) of a snapshot
 * and the agent's own health figures. A pure function: the same inputs give
 * the same bytes.
 */
#ifndef GL_METRICS_H
#define GL_METRICS_H

#include <stdint.h>
#include <stdio.h>
#include "model/snapshot.h"

/* Who a process belongs to (filled by the agent from its cgroup, agent/cgroup.h). */
struct proc_ident {
	char container_id[65]; /* 64 hex digits, "" if not in a container we recognize */
	char pod_uid[37];      /* 8-4-4-4-12 with dashes, "" if not in a Kubernetes pod */
	const char *runtime;   /* "docker", "containerd", "cri-o", "podman", or NULL */
	char namespace[64];    /* Kubernetes names: "" unless the runtime's state said */
	char pod[254];
	char container[254];
};

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The agent's health: counters are cumulative over its life. */
struct agent_health {
	const char *version;
	uint64_t records[GL_NR_REC_TYPES]; /* applied, by record type */
	uint64_t malformed, stack_missing;
	uint64_t procs_forgotten;	    /* dropped after they exited */
	uint64_t forgotten_unmatched_frees; /* unmatched frees of dropped processes */
	uint64_t procs_refused;		    /* records of processes refused: table full */
	uint64_t stacks, stacks_overflow;   /* interned; got the overflow id: table full */
	uint64_t stacks_dropped;	    /* no longer referenced, removed by compaction */
	uint32_t max_procs, max_stacks, max_allocs;
	int probes, libs;
	uint64_t http_requests, http_bad_requests, http_timeouts, http_refused;
	uint64_t http_accept_paused; /* accept ran out of file descriptors or memory */
	uint64_t profiles_written, profile_errors;
	bool incidents_on;	   /* --state-dir: the flight recorder writes bundles */
	uint64_t incidents[3];	   /* written, by cause (oom, killed, leak_at_exit) */
	uint64_t incident_errors;  /* bundles that could not be written */
	double cpu_seconds;	   /* user + system */
	double start_time_seconds; /* since the epoch */
	uint64_t resident_bytes;
	uint64_t open_fds;
};

/*
 * The GPU a process uses, in dcgm-exporter's terms: its labels `gpu` (the NVML
 * device index) and `UUID`, so that per-GPU series join on either.
 */
struct metrics_gpu {
	const char *uuid; /* NULL: not known for certain */
	int index;	  /* NVML device index; < 0: unknown */
};

struct metrics_opts {
	const struct agent_health *health;
	/* identity of s->procs[i] (container, pod); NULL: none known */
	const struct proc_ident *idents;
	/* parallel to s->procs: the one GPU a process uses, as NVML names it; NULL: none known */
	const struct metrics_gpu *gpus;
};

/* Writes the exposition of s and o->health to f. Returns 0, or -EIO. */
int report__metrics(FILE *f, const struct snapshot *s, const struct metrics_opts *o);

/* Writes v as a label value: escaped (\\, \", \n), invalid UTF-8 and controls as '?'. */
void metrics__label_value(FILE *f, const char *v);

#endif /* GL_METRICS_H */
