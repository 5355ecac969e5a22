// SPDX-License-Identifier: BSD-2-Clause
/*
 * jobs.c - several GPUs and several processes of one job: the imbalance between
 * a process's GPUs (DataParallel gathers on device 0), the grouping of ranks
 * into jobs, and the imbalance between a job's ranks (one rank leaks). Pure
 * functions of a snapshot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "snapshot.h"

static double ratio_or_default(double ratio)
{
	return ratio > 1.0 ? ratio : SNAP_IMBALANCE_RATIO;
}

/* Whether hi holds much more than peer: ratio x peer, and SNAP_IMBALANCE_MIN more. */
static bool unbalanced(uint64_t hi, uint64_t peer, double ratio)
{
	return hi >= peer + SNAP_IMBALANCE_MIN && (double)hi >= ratio * (double)peer;
}

/* Keeps the SNAP_IMB_STACKS largest differences, largest first. */
static void keep_stack(struct snap_imbalance *im, uint32_t proc, uint32_t stack, uint64_t bytes)
{
	uint32_t at = im->nstacks;

	while (at > 0 && im->stacks[at - 1].bytes < bytes)
		at--;
	if (at >= SNAP_IMB_STACKS)
		return;
	if (im->nstacks < SNAP_IMB_STACKS)
		im->nstacks++;
	memmove(&im->stacks[at + 1], &im->stacks[at],
		(im->nstacks - 1 - at) * sizeof(im->stacks[0]));
	im->stacks[at].proc = proc;
	im->stacks[at].stack = stack;
	im->stacks[at].bytes = bytes;
}

/* Stacks that hold device memory (segments) or PyTorch's blocks on a device. */
static bool per_device_class(uint8_t cls)
{
	return cls == GL_CLASS_DEVICE || cls == GL_CLASS_TORCH_BLOCK;
}

/* sp->imbalance from the per-device figures of sp and its stacks (proc: sp's index). */
static void proc_imbalance(struct snap_proc *sp, uint32_t proc, double ratio)
{
	struct snap_imbalance *im = &sp->imbalance;
	int hi = -1, peer = -1, used = 0;

	*im = (struct snap_imbalance){ .hi = -1, .peer = -1 };
	ratio = ratio_or_default(ratio);
	for (int d = 0; d < SNAP_MAX_DEVS; d++) {
		if (!sp->dev_bytes[d] && !snap_gpu_named(sp, d))
			continue;
		used++;
		if (hi < 0 || sp->dev_bytes[d] > sp->dev_bytes[hi]) {
			peer = hi;
			hi = d;
		} else if (peer < 0 || sp->dev_bytes[d] > sp->dev_bytes[peer]) {
			peer = d;
		}
	}
	if (used < 2 || hi < 0 || peer < 0)
		return;
	im->hi = hi;
	im->peer = peer;
	im->hi_bytes = sp->dev_bytes[hi];
	im->peer_bytes = sp->dev_bytes[peer];
	im->found = unbalanced(im->hi_bytes, im->peer_bytes, ratio);
	if (!im->found)
		return;
	for (uint32_t i = 0; i < sp->nstacks; i++) {
		const struct snap_stack *st = &sp->stacks[i];

		if (per_device_class(st->cls) && st->dev_bytes[hi] > st->dev_bytes[peer])
			keep_stack(im, proc, i, st->dev_bytes[hi] - st->dev_bytes[peer]);
	}
}

void snapshot__proc_imbalances(struct snapshot *s, double ratio)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		proc_imbalance(&s->procs[i], i, ratio);
}

/* What the same stack (id and class) holds in another process. */
static uint64_t same_stack_bytes(const struct snap_proc *p, const struct snap_stack *like)
{
	for (uint32_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].id == like->id && p->stacks[i].cls == like->cls)
			return p->stacks[i].outstanding_bytes;
	return 0;
}

static void job_imbalance(struct snapshot *s, struct snap_job *j, double ratio)
{
	struct snap_imbalance *im = &j->imbalance;
	int hi = -1, peer = -1;
	const struct snap_proc *hp, *pp;

	*im = (struct snap_imbalance){ .hi = -1, .peer = -1 };
	for (uint32_t m = 0; m < j->nmembers; m++) {
		uint64_t b = s->procs[j->members[m]].bytes[GL_CLASS_DEVICE];

		j->device_bytes += b;
		if (hi < 0 || b > s->procs[j->members[hi]].bytes[GL_CLASS_DEVICE]) {
			peer = hi;
			hi = (int)m;
		} else if (peer < 0 || b > s->procs[j->members[peer]].bytes[GL_CLASS_DEVICE]) {
			peer = (int)m;
		}
	}
	if (hi < 0 || peer < 0)
		return;
	hp = &s->procs[j->members[hi]];
	pp = &s->procs[j->members[peer]];
	im->hi = hi;
	im->peer = peer;
	im->hi_bytes = hp->bytes[GL_CLASS_DEVICE];
	im->peer_bytes = pp->bytes[GL_CLASS_DEVICE];
	im->found = unbalanced(im->hi_bytes, im->peer_bytes, ratio_or_default(ratio));
	if (!im->found)
		return;
	for (uint32_t i = 0; i < hp->nstacks; i++) {
		const struct snap_stack *st = &hp->stacks[i];
		uint64_t other;

		if (!per_device_class(st->cls))
			continue;
		other = same_stack_bytes(pp, st);
		if (st->outstanding_bytes > other)
			keep_stack(im, j->members[hi], i, st->outstanding_bytes - other);
	}
}

/* Processes whose parent may launch a job: not init, not kthreadd, not unknown. */
static bool may_be_member(const struct snap_proc *p)
{
	return p->ppid > 2;
}

/* Whether p and q are ranks of one job: one parent, and one program or one world size. */
static bool same_job(const struct snap_proc *p, const struct snap_proc *q)
{
	if (p->ppid != q->ppid)
		return false;
	if (p->ranked || q->ranked)
		return p->ranked && q->ranked && p->world_size == q->world_size;
	return !strcmp(p->comm, q->comm);
}

const struct snap_job *snap_job_of(const struct snapshot *s, const struct snap_proc *p)
{
	return p->job >= 0 && (uint32_t)p->job < s->njobs ? &s->jobs[p->job] : NULL;
}

static int cmp_member(const void *a, const void *b, void *snap)
{
	const struct snapshot *s = snap;
	const struct snap_proc *p = &s->procs[*(const uint32_t *)a];
	const struct snap_proc *q = &s->procs[*(const uint32_t *)b];

	if (p->ranked != q->ranked)
		return p->ranked ? -1 : 1;
	if (p->ranked && p->rank != q->rank)
		return p->rank - q->rank;
	return p->pid - q->pid;
}

static void finish_job(struct snapshot *s, struct snap_job *j, double ratio)
{
	bool ranked = true;

	for (uint32_t m = 0; m < j->nmembers; m++)
		if (!s->procs[j->members[m]].ranked)
			ranked = false;
	j->basis = ranked ? "environment" : "parent";
	j->world_size = s->procs[j->members[0]].world_size;
	qsort_r(j->members, j->nmembers, sizeof(j->members[0]), cmp_member, s);
	job_imbalance(s, j, ratio);
}

static int cmp_parent(const void *a, const void *b, void *snap)
{
	const struct snapshot *s = snap;
	int x = s->procs[*(const uint32_t *)a].ppid, y = s->procs[*(const uint32_t *)b].ppid;

	return x < y ? -1 : x > y;
}

/* The jobs among order[0..n), processes of one parent: one pass per program or world size. */
static void group_siblings(struct snapshot *s, const uint32_t *order, uint32_t n, double ratio)
{
	for (uint32_t i = 0; i < n; i++) {
		struct snap_proc *p = &s->procs[order[i]];
		struct snap_job *j = &s->jobs[s->njobs];

		if (p->job >= 0)
			continue;
		*j = (struct snap_job){ .id = p->ppid };
		for (uint32_t k = i; k < n && j->nmembers < SNAP_MAX_MEMBERS; k++) {
			if (s->procs[order[k]].job < 0 && same_job(p, &s->procs[order[k]]))
				j->members[j->nmembers++] = order[k];
		}
		if (j->nmembers < 2)
			continue;
		for (uint32_t m = 0; m < j->nmembers; m++)
			s->procs[j->members[m]].job = (int)s->njobs;
		finish_job(s, j, ratio);
		s->njobs++;
	}
}

int snapshot__group_jobs(struct snapshot *s, double ratio)
{
	uint32_t *order, n = 0;

	free(s->jobs);
	s->njobs = 0;
	for (uint32_t i = 0; i < s->nprocs; i++)
		s->procs[i].job = -1;
	s->jobs = calloc(s->nprocs / 2 + 1, sizeof(*s->jobs)); /* two members or more each */
	order = calloc(s->nprocs ? s->nprocs : 1, sizeof(*order));
	if (!s->jobs || !order) {
		free(s->jobs);
		free(order);
		s->jobs = NULL;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (may_be_member(&s->procs[i]))
			order[n++] = i;
	/* by parent: siblings are adjacent */
	qsort_r(order, n, sizeof(*order), cmp_parent, s);
	for (uint32_t i = 0, end; i < n; i = end) {
		for (end = i + 1; end < n && s->procs[order[end]].ppid == s->procs[order[i]].ppid;)
			end++;
		if (end - i >= 2)
			group_siblings(s, order + i, end - i, ratio);
	}
	free(order);
	return 0;
}
