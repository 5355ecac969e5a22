// SPDX-License-Identifier: BSD-2-Clause
/*
 * snap_memory.c - where a process's device memory is, in its snapshot: the
 * books' breakdown per device (PyTorch's segments and blocks, free extents,
 * libraries, frameworks' pools) beside NVML's figure, with each CUDA ordinal
 * matched to NVML's GPU.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "books/books.h"
#include "books/explain.h"
#include "gpu/nvml.h"
#include "snapshot_int.h"

static void mem_dev_of(const struct explain_dev *d, struct snap_mem_dev *m)
{
	/* expandable segments' blocks lie in no known segment: their free part is what the
	 * handles hold beyond them, counted as one extent (their mappings can grow) */
	uint64_t vmm_free =
		d->torch_vmm > d->ext.outside_bytes ? d->torch_vmm - d->ext.outside_bytes : 0;
	uint64_t cached = d->ext.free_bytes + vmm_free;
	uint64_t largest = d->ext.largest_free > vmm_free ? d->ext.largest_free : vmm_free;
	/* blocks that fit in no segment or handle seen lie in segments from before attach */
	uint64_t outside =
		d->ext.outside_bytes > d->torch_vmm ? d->ext.outside_bytes - d->torch_vmm : 0;

	*m = (struct snap_mem_dev){
		.dev = d->dev,
		.nvml_index = -1,
		.device_bytes = d->device_bytes,
		.torch_reserved = d->torch_reserved,
		.torch_allocated = d->torch_allocated,
		.torch_cached = cached,
		.torch_blocks = d->torch_blocks,
		.largest_free = largest,
		.nr_free = d->ext.nr_free + (vmm_free > 0),
		.blocks_outside = outside,
		.blocks_in_seen = d->torch_allocated - outside,
		.fragmentation = cached ? 1.0 - (double)largest / (double)cached : 0,
		.outside_torch = d->outside_torch,
		.leak_bytes = d->leak_bytes,
	};
	for (uint32_t i = 0; i < d->nlibs && i < SNAP_MAX_LIBS; i++)
		m->libs[m->nlibs++] = (struct snap_lib){ d->libs[i].name, d->libs[i].bytes };
}

/* Whether NVML lists pid on device i, and what it uses there (NVML_UNKNOWN: not told). */
static bool nvml_lists(const struct nvml_sample *n, int pid, uint32_t i, uint64_t *used)
{
	const struct nvml_device *d = &n->devs[i];

	for (uint32_t j = 0; j < d->nprocs && j < NVML_MAX_PROCS; j++) {
		if (d->procs[j].pid == (uint32_t)pid) {
			*used = d->procs[j].used;
			return true;
		}
	}
	return false;
}

/* Whether ordinal ord may be NVML's device whose figure for the process is used. */
static bool fits(const struct snap_proc *sp, int ord, uint64_t used)
{
	return used == NVML_UNKNOWN || sp->dev_bytes[ord] <= used;
}

/*
 * Which NVML device each CUDA ordinal of the process is. CUDA numbers the
 * devices CUDA_VISIBLE_DEVICES lets it see (an environment gpuleak does not
 * read), in its own order: an ordinal names a GPU only when the counts match,
 * one for one (basis "one"), or in ascending order on both sides when every
 * ordinal's bytes fit under NVML's figure for its GPU ("order"), or, for two,
 * in the only order the bytes allow ("bytes"); and the machine's only GPU is the
 * one ordinal of a process NVML lists nowhere ("only").
 */
static void map_gpus(const struct nvml_sample *n, int pid, struct snap_proc *sp)
{
	int ords[SNAP_MAX_DEVS], nords = 0;
	uint32_t gpus[SNAP_MAX_DEVS], ngpus = 0;
	uint64_t used[SNAP_MAX_DEVS];
	bool ascending = true, swapped;

	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		if (sp->dev_bytes[d])
			ords[nords++] = d;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++) {
		uint64_t u;

		if (!nvml_lists(n, pid, i, &u))
			continue;
		if (ngpus == SNAP_MAX_DEVS)
			return;
		used[ngpus] = u;
		gpus[ngpus++] = i;
	}
	/* NVML lists the process on no GPU (it often lists none of another PID namespace,
	 * a container's), and the machine has one: the process's one ordinal is that GPU */
	if (!ngpus && nords == 1 && n->ndevices == 1) {
		sp->gpus[ords[0]].nvml_index = 0;
		snprintf(sp->gpus[ords[0]].uuid, sizeof(sp->gpus[ords[0]].uuid), "%s",
			 n->devs[0].uuid);
		sp->gpu_basis = "only";
		return;
	}
	if (!nords || (uint32_t)nords != ngpus)
		return;
	for (int k = 0; k < nords; k++)
		ascending = ascending && fits(sp, ords[k], used[k]);
	swapped = nords == 2 && !ascending && fits(sp, ords[0], used[1]) &&
		  fits(sp, ords[1], used[0]);
	if (!ascending && !swapped)
		return;
	for (int k = 0; k < nords; k++) {
		uint32_t g = gpus[swapped ? 1 - k : k];

		sp->gpus[ords[k]].nvml_index = (int)g;
		snprintf(sp->gpus[ords[k]].uuid, sizeof(sp->gpus[ords[k]].uuid), "%s",
			 n->devs[g].uuid);
	}
	sp->gpu_basis = nords == 1 ? "one" : swapped ? "bytes" : "order";
}

/* The ordinal NVML's device i was matched to, or -1. */
static int ordinal_of(const struct snap_proc *sp, uint32_t i)
{
	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		if (sp->gpus[d].nvml_index == (int)i)
			return d;
	return -1;
}

/*
 * NVML's figure on each row of the breakdown: the row of the ordinal the
 * device was matched to, or a row of its own (device not known) beside it.
 */
void snap_memory__add_nvml(const struct nvml_sample *n, int pid, struct snap_proc *sp)
{
	struct snap_memory *m = &sp->memory;

	map_gpus(n, pid, sp);
	for (uint32_t j = 0; j < m->ndevs; j++)
		if (m->devs[j].dev >= 0 && m->devs[j].dev < SNAP_MAX_DEVS)
			m->devs[j].nvml_index = sp->gpus[m->devs[j].dev].nvml_index;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++) {
		uint64_t used, others;
		struct snap_mem_dev *row = NULL;
		int ord;

		if (!nvml_lists(n, pid, i, &used) || used == NVML_UNKNOWN ||
		    !nvml_sample__proc_on(n, pid, i, &used, &others))
			continue;
		ord = ordinal_of(sp, i);
		for (uint32_t j = 0; ord >= 0 && j < m->ndevs; j++)
			if (m->devs[j].dev == ord)
				row = &m->devs[j];
		if (!row && m->ndevs < sizeof(m->devs) / sizeof(m->devs[0])) {
			row = &m->devs[m->ndevs++];
			*row = (struct snap_mem_dev){ .dev = ord, .nvml_index = (int)i };
		}
		if (!row)
			continue;
		row->nvml_valid = true;
		row->nvml_bytes = used;
		row->nvml_total = n->devs[i].total;
		row->nvml_free = n->devs[i].free;
		row->nvml_others = others;
		m->nvml_valid = true;
		m->nvml_bytes += used;
	}
}

/* A device's memory as NVML says (its index taken as the CUDA ordinal); -1: the largest. */
static uint64_t nvml_dev_total(const struct nvml_sample *n, int dev)
{
	uint64_t total = 0;

	if (!n)
		return 0;
	if (dev >= 0)
		return (uint32_t)dev < n->ndevices && dev < NVML_MAX_DEVICES ? n->devs[dev].total :
									       0;
	for (uint32_t i = 0; i < n->ndevices && i < NVML_MAX_DEVICES; i++)
		if (n->devs[i].total > total)
			total = n->devs[i].total;
	return total;
}

/* Whether a device's largest allocation outside PyTorch is a framework's pool: kept if so. */
static void add_pool(const struct explain_dev *d, const struct nvml_sample *n,
		     struct snap_memory *m)
{
	uint64_t total = nvml_dev_total(n, d->dev);
	struct snap_pool *p;
	const char *fw, *with;
	uint32_t i;

	if (!d->largest_alloc || m->npools == SNAP_MAX_POOLS ||
	    !explain__is_pool(d->largest_lib, d->largest_alloc, total, &fw, &with))
		return;
	for (i = m->npools; i > 0 && m->pools[i - 1].bytes < d->largest_alloc; i--)
		m->pools[i] = m->pools[i - 1];
	p = &m->pools[i];
	*p = (struct snap_pool){ .dev = d->dev,
				 .bytes = d->largest_alloc,
				 .dev_total = total,
				 .stack = d->largest_stack,
				 .library = d->largest_lib,
				 .framework = fw,
				 .visible_with = with };
	m->npools++;
}

/* Where the process's device memory is: the books' breakdown beside NVML's figure. */
int snap_memory__fill(struct books *b, struct proc *proc, const struct snapshot_opts *o,
		      struct snap_proc *sp)
{
	const struct proc_totals *t = proc__totals(proc);
	struct explain_src src = books__explain_src(b);
	struct snap_memory *m = &sp->memory;
	struct explain *e;
	uint64_t free_sum = 0;

	if (!proc__live(proc))
		return 0; /* retired: the allocation table is gone */
	e = malloc(sizeof(*e));
	if (!e || explain__proc(&src, proc, snapshot__proc_now(o, proc), e)) {
		free(e);
		return -ENOMEM;
	}
	m->valid = true;
	m->blocks_seen = e->blocks_seen;
	m->pinned_host = e->pinned_host;
	m->managed = e->managed;
	for (uint32_t i = 0; i < e->ndevs && m->ndevs < sizeof(m->devs) / sizeof(m->devs[0]); i++) {
		struct snap_mem_dev *d = &m->devs[m->ndevs++];

		mem_dev_of(&e->devs[i], d);
		add_pool(&e->devs[i], o->nvml, m);
		m->device_bytes += d->device_bytes;
		m->torch_reserved += d->torch_reserved;
		m->torch_allocated += d->torch_allocated;
		m->torch_cached += d->torch_cached;
		m->outside_torch += d->outside_torch;
		m->blocks_outside += d->blocks_outside;
		m->blocks_in_seen += d->blocks_in_seen;
		free_sum += d->torch_cached;
		if (d->largest_free > m->largest_free)
			m->largest_free = d->largest_free;
	}
	free(e);
	m->fragmentation = free_sum ? 1.0 - (double)m->largest_free / (double)free_sum : 0;
	if (o->nvml && !t->exited) {
		snap_memory__add_nvml(o->nvml, t->pid, sp);
		if (!m->nvml_valid && t->ns_pid > 0 && t->ns_pid != t->pid)
			snap_memory__add_nvml(o->nvml, t->ns_pid, sp);
	}
	if (m->nvml_valid) {
		if (m->nvml_bytes >= m->device_bytes)
			m->unseen = m->nvml_bytes - m->device_bytes;
		else
			m->unexplained = m->device_bytes - m->nvml_bytes;
	}
	return 0;
}
