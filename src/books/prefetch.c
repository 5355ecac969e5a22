// SPDX-License-Identifier: BSD-2-Clause
/*
 * prefetch.c - what is known of a process before its books exist (prefetch.h).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "prefetch.h"
#include "proc_int.h"
#include "procs.h"
#include "stacks/modules.h"
#include "util/htab.h"
#include "util/procfs.h"

#define PREFETCH_MAX 1024

struct prefetches {
	struct htab *by_pid;  /* pid -> struct prefetch */
	struct htab *parents; /* pid -> struct parent */
};

struct parent {
	uint64_t start_ns;
	int ppid;
	bool has_ranks;
	int ranks[3]; /* as read at the mapping (prefetches__mapping_seen()) */
};

struct prefetch {
	uint64_t ticks; /* start time in clock ticks: the process it belongs to */
	struct addr_map *am;
	char comm[16];
	int ns_pid, ppid;
};

struct prefetches *prefetches__new(void)
{
	struct prefetches *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->by_pid = htab__new(sizeof(int), sizeof(struct prefetch));
	p->parents = htab__new(sizeof(int), sizeof(struct parent));
	if (!p->by_pid || !p->parents) {
		htab__free(p->by_pid);
		htab__free(p->parents);
		free(p);
		return NULL;
	}
	return p;
}

static void drop_all(struct prefetches *p)
{
	struct prefetch *pf;
	size_t it = 0;

	while ((pf = htab__next(p->by_pid, &it, NULL)))
		addr_map__free(pf->am);
	htab__clear(p->by_pid);
}

void prefetches__free(struct prefetches *p)
{
	if (!p)
		return;
	drop_all(p);
	htab__free(p->by_pid);
	htab__free(p->parents);
	free(p);
}

void prefetches__add(struct prefetches *p, struct modules *m, int pid)
{
	struct prefetch *pf, got = { 0 };
	char state;

	if (procfs__start_ticks(pid, &got.ticks))
		return;
	got.am = addr_map__new(m, pid);
	if (!got.am)
		return;
	if (procfs__comm(pid, got.comm, sizeof(got.comm)))
		got.comm[0] = '\0';
	got.ns_pid = procfs__ns_pid(pid);
	if (procfs__stat(pid, &got.ppid, &state))
		got.ppid = 0;
	if (htab__count(p->by_pid) >= PREFETCH_MAX)
		drop_all(p);
	pf = htab__upsert(p->by_pid, &pid, NULL);
	if (!pf) {
		addr_map__free(got.am);
		return;
	}
	addr_map__free(pf->am);
	*pf = got;
}

struct addr_map *prefetches__take(struct prefetches *p, struct proc *proc)
{
	struct prefetch *pf = htab__lookup(p->by_pid, &proc->t.pid);
	long hz = sysconf(_SC_CLK_TCK);
	struct addr_map *am = NULL;

	if (!pf)
		return NULL;
	if (hz <= 0)
		hz = 100;
	if (pf->ticks != proc->t.start_time / (1000000000ULL / (uint64_t)hz)) {
		addr_map__free(pf->am);
		htab__delete(p->by_pid, &proc->t.pid);
		return NULL;
	}
	am = pf->am;
	/* what /proc said while it ran, where it cannot say now */
	if (!strcmp(proc->t.comm, "?") && pf->comm[0])
		memcpy(proc->t.comm, pf->comm, sizeof(proc->t.comm));
	if (!proc->t.ns_pid)
		proc->t.ns_pid = pf->ns_pid;
	if (!proc->t.ppid)
		proc->t.ppid = pf->ppid;
	htab__delete(p->by_pid, &proc->t.pid);
	return am;
}

void prefetches__mapping_seen(struct prefetches *p, struct procs *procs, const struct gl_proc *r,
			      bool rank_env, bool proc_files)
{
	int pid = (int)r->hdr.pid, v[3];
	struct proc *proc = procs__find_pid(procs, pid);
	bool mine = proc && proc->t.start_time == r->hdr.start_time;
	bool ranks = rank_env && !(mine && proc->ranks_read);
	struct parent *pa;

	/* its ranks at the mapping, after its exec: as BPF read them there, else from /proc
	 * now (a rank killed soon after may be gone by its first call's record) */
	if (ranks && r->lib.env_read)
		memcpy(v, r->lib.env, sizeof(v));
	else
		ranks = ranks && proc_files && !proc__env_ranks(pid, r->hdr.start_time, v);
	if (mine) {
		if (!proc->t.ppid)
			proc->t.ppid = (int)r->ppid;
		if (ranks)
			proc__set_ranks(proc, v);
		return;
	}
	if (htab__count(p->parents) >= PREFETCH_MAX)
		htab__clear(p->parents);
	pa = htab__upsert(p->parents, &pid, NULL);
	if (!pa)
		return;
	*pa = (struct parent){ .start_ns = r->hdr.start_time,
			       .ppid = (int)r->ppid,
			       .has_ranks = ranks };
	if (ranks)
		memcpy(pa->ranks, v, sizeof(pa->ranks));
}

void prefetches__parent_of(struct prefetches *p, struct proc *proc)
{
	struct parent *pa = htab__lookup(p->parents, &proc->t.pid);

	if (!pa)
		return;
	if (pa->start_ns == proc->t.start_time) {
		if (!proc->t.ppid)
			proc->t.ppid = pa->ppid;
		if (pa->has_ranks && !proc->ranks_read)
			proc__set_ranks(proc, pa->ranks);
	}
	htab__delete(p->parents, &proc->t.pid);
}
