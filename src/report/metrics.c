// SPDX-License-Identifier: BSD-2-Clause
/*
 * metrics.c - Prometheus text exposition of a snapshot.
 *
 * Per running process (labels pid, comm and, where known, container_id,
 * pod_uid, namespace, pod, container): memory and allocations outstanding
 * per class, cumulative bytes allocated and freed, calls, failures, bytes
 * under stacks judged leaks, device bytes per GPU (with dcgm-exporter's gpu and
 * UUID labels where NVML names the GPU), growth and projected time to a full
 * GPU. Then the agent's health.
 * Each family is written whole (HELP, TYPE, every sample) before the next.
 * No stacks, command lines or environment ever become labels, but the ranks
 * (rank, local_rank) that --ranks-from-env read. Then the jobs, the
 * imbalances between GPUs and between ranks.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include "metrics.h"

static const struct {
	uint8_t cls;
	const char *name;
} classes[] = {
	{ GL_CLASS_DEVICE, "device" },
	{ GL_CLASS_MANAGED, "managed" },
	{ GL_CLASS_HOST_PINNED, "host_pinned" },
};
#define NR_CLASSES (sizeof(classes) / sizeof(classes[0]))

struct ctx {
	FILE *f;
	const struct snapshot *s;
	const struct metrics_opts *o;
};

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if invalid. */
static int utf8_len(const unsigned char *p)
{
	int n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0; /* overlong, surrogate */
	if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0; /* overlong, beyond U+10FFFF */
	return n;
}

void metrics__label_value(FILE *f, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;

	while (*p) {
		int n = utf8_len(p);

		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '"')
			fputs("\\\"", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (!n || *p < 0x20 || *p == 0x7f)
			fputc('?', f);
		else
			fwrite(p, 1, n, f);
		p += n ? n : 1;
	}
}

static void family(struct ctx *c, const char *name, const char *type, const char *help)
{
	fprintf(c->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void label(FILE *f, bool *first, const char *name, const char *v)
{
	if (!v || !v[0])
		return;
	fprintf(f, "%s%s=\"", *first ? "" : ",", name);
	metrics__label_value(f, v);
	fputc('"', f);
	*first = false;
}

/* name{pid="..",comm="..",...identity,x[0]="x[1]",...} for nx pairs in x; empty values left out */
static void proc_sample_n(struct ctx *c, const char *name, uint32_t i, const char *const *x, int nx)
{
	const struct snap_proc *p = &c->s->procs[i];
	const struct proc_ident *id = c->o->idents ? &c->o->idents[i] : NULL;
	bool first = true;
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", p->pid);
	fprintf(c->f, "%s{", name);
	label(c->f, &first, "pid", pid);
	label(c->f, &first, "comm", p->comm[0] ? p->comm : "?");
	if (id) {
		label(c->f, &first, "container_id", id->container_id);
		label(c->f, &first, "pod_uid", id->pod_uid);
		label(c->f, &first, "namespace", id->namespace);
		label(c->f, &first, "pod", id->pod);
		label(c->f, &first, "container", id->container);
	}
	if (p->ranked) {
		snprintf(pid, sizeof(pid), "%d", p->rank);
		label(c->f, &first, "rank", pid);
	}
	if (p->ranked && p->local_rank >= 0) {
		snprintf(pid, sizeof(pid), "%d", p->local_rank);
		label(c->f, &first, "local_rank", pid);
	}
	for (int k = 0; k < nx; k++)
		label(c->f, &first, x[2 * k], x[2 * k + 1]);
	fputs("} ", c->f);
}

static void proc_sample2(struct ctx *c, const char *name, uint32_t i, const char *x1,
			 const char *v1, const char *x2, const char *v2)
{
	const char *x[] = { x1, v1, x2, v2 };

	proc_sample_n(c, name, i, x, x2 ? 2 : x1 ? 1 : 0);
}

static void proc_sample(struct ctx *c, const char *name, uint32_t i, const char *extra,
			const char *extra_value)
{
	proc_sample2(c, name, i, extra, extra_value, NULL, NULL);
}

/*
 * A device series: cuda_device (the process's CUDA ordinal) always; gpu (NVML
 * index) and UUID where the snapshot matched the ordinal to NVML's GPU, or
 * where the agent names the one GPU a process uses, spelled as dcgm-exporter
 * spells them so that `* on(UUID)` joins need no label_replace. One more
 * label pair (xn, xv) when xn is not NULL.
 */
static void device_sample(struct ctx *c, const char *name, uint32_t i, int ordinal, const char *xn,
			  const char *xv)
{
	const struct snap_proc *p = &c->s->procs[i];
	const struct metrics_gpu *g = c->o->gpus ? &c->o->gpus[i] : NULL;
	const struct snap_gpu *sg = snap_gpu_named(p, ordinal) ? &p->gpus[ordinal] : NULL;
	bool matched = sg && sg->uuid[0];
	bool named = matched || (ordinal >= 0 && g && g->index >= 0 && g->uuid && g->uuid[0]);
	char cuda[16], index[16];
	const char *x[8] = { "cuda_device", cuda,   "gpu",
			     index,	    "UUID", matched ? sg->uuid : named ? g->uuid : NULL };
	int n = named ? 3 : 1;

	if (ordinal >= 0)
		snprintf(cuda, sizeof(cuda), "%d", ordinal);
	else
		snprintf(cuda, sizeof(cuda), "unknown");
	snprintf(index, sizeof(index), "%d", matched ? sg->nvml_index : named ? g->index : -1);
	if (xn) {
		x[2 * n] = xn;
		x[2 * n + 1] = xv;
		n++;
	}
	proc_sample_n(c, name, i, x, n);
}

static void u64(FILE *f, uint64_t v)
{
	fprintf(f, "%llu\n", (unsigned long long)v);
}

static uint64_t leak_bytes(const struct snap_proc *p, uint8_t cls, double *growth)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < p->nstacks; i++) {
		const struct snap_stack *st = &p->stacks[i];

		if (st->cls != cls || !st->verdict || strcmp(st->verdict, "leak"))
			continue;
		total += st->outstanding_bytes;
		if (growth)
			*growth += st->growth_bytes_per_s;
	}
	return total;
}

enum per_class { PC_BYTES, PC_ALLOCS, PC_ALLOCATED, PC_FREED, PC_LEAK };

static uint64_t class_value(const struct snap_proc *p, uint8_t cls, enum per_class what)
{
	switch (what) {
	case PC_BYTES: return p->bytes[cls];
	case PC_ALLOCS: return p->nallocs[cls];
	case PC_ALLOCATED: return p->alloc_bytes[cls];
	case PC_FREED: return p->free_bytes[cls];
	default: return leak_bytes(p, cls, NULL);
	}
}

static void per_class(struct ctx *c, const char *name, const char *type, const char *help,
		      enum per_class what)
{
	family(c, name, type, help);
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		if (c->s->procs[i].exited)
			continue;
		for (size_t k = 0; k < NR_CLASSES; k++) {
			proc_sample(c, name, i, "class", classes[k].name);
			u64(c->f, class_value(&c->s->procs[i], classes[k].cls, what));
		}
	}
}

enum per_proc { PP_ALLOC_CALLS, PP_FREE_CALLS, PP_UNMATCHED, PP_PEAK, PP_TORCH, PP_CONSISTENT };

static void per_proc(struct ctx *c, const char *name, const char *type, const char *help,
		     enum per_proc what)
{
	family(c, name, type, help);
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_proc *p = &c->s->procs[i];
		uint64_t v;

		if (p->exited)
			continue;
		switch (what) {
		case PP_ALLOC_CALLS: v = p->alloc_calls; break;
		case PP_FREE_CALLS: v = p->free_calls; break;
		case PP_UNMATCHED: v = p->unmatched_frees; break;
		case PP_PEAK: v = p->peak_device; break;
		case PP_TORCH: v = p->bytes[GL_CLASS_TORCH_BLOCK]; break;
		default: v = p->consistent; break;
		}
		proc_sample(c, name, i, NULL, NULL);
		u64(c->f, v);
	}
}

/* One series per process with every identity label, ns_pid and runtime included. */
static void info_family(struct ctx *c)
{
	const char *fam = "gpuleak_process_info";

	family(c, fam, "gauge",
	       "A traced process: its PID in its own namespace (ns_pid) and "
	       "container runtime, with the labels of the other process series. Always 1.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_proc *p = &c->s->procs[i];
		const struct proc_ident *id = c->o->idents ? &c->o->idents[i] : NULL;
		char ns_pid[16];

		if (p->exited)
			continue;
		snprintf(ns_pid, sizeof(ns_pid), "%d", p->ns_pid);
		proc_sample2(c, fam, i, "ns_pid", p->ns_pid > 0 ? ns_pid : NULL, "runtime",
			     id ? id->runtime : NULL);
		fputs("1\n", c->f);
	}
}

static void process_families(struct ctx *c)
{
	const char *fam;

	info_family(c);
	per_class(
		c, "gpuleak_process_memory_bytes", "gauge",
		"GPU-related memory a process holds now, by class (device, managed, host_pinned).",
		PC_BYTES);
	per_class(c, "gpuleak_process_allocations", "gauge",
		  "Allocations a process holds now, by memory class.", PC_ALLOCS);
	per_class(c, "gpuleak_process_allocated_bytes_total", "counter",
		  "Bytes a process has allocated since it was first seen, by memory class.",
		  PC_ALLOCATED);
	per_class(c, "gpuleak_process_freed_bytes_total", "counter",
		  "Bytes a process has given back since it was first seen (frees and context "
		  "teardown), by memory class.",
		  PC_FREED);
	per_class(c, "gpuleak_process_leak_bytes", "gauge",
		  "Bytes outstanding under call stacks judged to leak, by memory class.", PC_LEAK);

	fam = "gpuleak_process_leak_growth_bytes_per_second";
	family(c, fam, "gauge", "Growth rate of the call stacks judged to leak, all classes.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		double g = 0;

		if (c->s->procs[i].exited)
			continue;
		for (size_t k = 0; k < NR_CLASSES; k++)
			leak_bytes(&c->s->procs[i], classes[k].cls, &g);
		proc_sample(c, fam, i, NULL, NULL);
		fprintf(c->f, "%.10g\n", g);
	}

	fam = "gpuleak_process_device_memory_bytes";
	family(c, fam, "gauge",
	       "Device memory a process holds now, by CUDA device ordinal "
	       "(cuda_device); with NVML, the GPU's NVML index (gpu) and UUID as dcgm-exporter "
	       "labels them.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_proc *p = &c->s->procs[i];

		if (p->exited)
			continue;
		for (int d = 0; d < 16; d++) {
			if (!p->dev_bytes[d])
				continue;
			device_sample(c, fam, i, d, NULL, NULL);
			u64(c->f, p->dev_bytes[d]);
		}
		if (p->unknown_dev_bytes) {
			proc_sample(c, fam, i, "cuda_device", "unknown");
			u64(c->f, p->unknown_dev_bytes);
		}
	}

	fam = "gpuleak_process_device_growth_bytes_per_second";
	family(c, fam, "gauge",
	       "Growth rate of a process's device memory over its recent history.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		if (c->s->procs[i].exited)
			continue;
		proc_sample(c, fam, i, NULL, NULL);
		fprintf(c->f, "%.10g\n", c->s->procs[i].device_growth_bytes_per_s);
	}

	fam = "gpuleak_process_projected_oom_seconds";
	family(c, fam, "gauge",
	       "Seconds until a leaking process fills its GPU at its growth rate "
	       "(NVML's free memory); only processes judged to leak, with NVML.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		if (c->s->procs[i].exited || c->s->procs[i].projected_oom_s < 0)
			continue;
		proc_sample(c, fam, i, NULL, NULL);
		fprintf(c->f, "%.10g\n", c->s->procs[i].projected_oom_s);
	}

	per_proc(c, "gpuleak_process_peak_device_memory_bytes", "gauge",
		 "The most device memory a process has held since it was first seen.", PP_PEAK);
	per_proc(c, "gpuleak_process_torch_allocated_bytes", "gauge",
		 "Bytes of live PyTorch tensor blocks (inside the device memory PyTorch reserved).",
		 PP_TORCH);
	per_proc(c, "gpuleak_process_alloc_calls_total", "counter",
		 "Allocation calls a process has made since it was first seen.", PP_ALLOC_CALLS);
	per_proc(c, "gpuleak_process_free_calls_total", "counter",
		 "Free calls a process has made since it was first seen.", PP_FREE_CALLS);
	per_proc(c, "gpuleak_process_unmatched_frees_total", "counter",
		 "Frees of memory allocated before gpuleak attached.", PP_UNMATCHED);
	per_proc(c, "gpuleak_process_books_consistent", "gauge",
		 "1 when gpuleak's books of the process equal the kernel's exact counters.",
		 PP_CONSISTENT);

	fam = "gpuleak_process_alloc_failures_total";
	family(c, fam, "counter", "Failed allocation calls, by error (out_of_memory, other).");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_proc *p = &c->s->procs[i];

		if (p->exited)
			continue;
		proc_sample(c, fam, i, "error", "out_of_memory");
		u64(c->f, p->oom_failures);
		proc_sample(c, fam, i, "error", "other");
		u64(c->f, p->failures - p->oom_failures);
	}
}

/* A figure of PyTorch's reserve per process whose blocks were seen: the largest free
 * extent, or (ratio) the fragmentation. */
static void torch_reserve_family(struct ctx *c, const char *fam, const char *help, bool ratio)
{
	family(c, fam, "gauge", help);
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_memory *m = &c->s->procs[i].memory;

		if (!m->valid || !m->blocks_seen || c->s->procs[i].exited)
			continue;
		proc_sample(c, fam, i, NULL, NULL);
		if (ratio)
			fprintf(c->f, "%.6g\n", m->fragmentation);
		else
			u64(c->f, m->largest_free);
	}
}

/* Where each process's device memory is (the breakdown of the JSON report's "memory"). */
static void memory_families(struct ctx *c)
{
	const char *fam = "gpuleak_process_memory_breakdown_bytes";
	const char *lfam = "gpuleak_process_outside_torch_bytes";

	family(c, fam, "gauge",
	       "A process's device memory by part: nvml (NVML's figure), "
	       "torch_reserved, torch_allocated, torch_cached, outside_torch, "
	       "context_and_pre_attach, unexplained, pinned_host (host memory, "
	       "apart).");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_memory *m = &c->s->procs[i].memory;
		const struct {
			const char *part;
			bool valid;
			uint64_t v;
		} parts[] = {
			{ "nvml", m->nvml_valid, m->nvml_bytes },
			{ "torch_reserved", true, m->torch_reserved },
			{ "torch_allocated", m->blocks_seen, m->torch_allocated },
			{ "torch_cached", m->blocks_seen, m->torch_cached },
			{ "outside_torch", true, m->outside_torch },
			{ "context_and_pre_attach", m->nvml_valid, m->unseen },
			{ "unexplained", m->nvml_valid, m->unexplained },
			{ "pinned_host", true, m->pinned_host },
		};

		if (!m->valid || c->s->procs[i].exited)
			continue;
		for (size_t j = 0; j < sizeof(parts) / sizeof(parts[0]); j++) {
			if (!parts[j].valid)
				continue;
			proc_sample(c, fam, i, "part", parts[j].part);
			u64(c->f, parts[j].v);
		}
	}
	family(c, lfam, "gauge",
	       "Device memory outside PyTorch's allocator, by the library whose "
	       "code asked for it (every device).");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_memory *m = &c->s->procs[i].memory;

		if (!m->valid || c->s->procs[i].exited)
			continue;
		for (uint32_t d = 0; d < m->ndevs; d++) {
			for (uint32_t l = 0; l < m->devs[d].nlibs; l++) {
				device_sample(c, lfam, i, m->devs[d].dev, "library",
					      m->devs[d].libs[l].name);
				u64(c->f, m->devs[d].libs[l].bytes);
			}
		}
	}
	fam = "gpuleak_process_preallocated_pool_bytes";
	family(c, fam, "gauge",
	       "One allocation outside PyTorch's allocator holding a large share of its "
	       "device: a framework's preallocated pool (XLA's by default), growth inside "
	       "which makes no driver call and is not seen.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_memory *m = &c->s->procs[i].memory;

		if (!m->valid || c->s->procs[i].exited)
			continue;
		for (uint32_t k = 0; k < m->npools; k++) {
			device_sample(c, fam, i, m->pools[k].dev, "library",
				      m->pools[k].library ? m->pools[k].library : "other");
			u64(c->f, m->pools[k].bytes);
		}
	}
	torch_reserve_family(c, "gpuleak_process_torch_largest_free_extent_bytes",
			     "The largest free extent of PyTorch's reserve (segments minus "
			     "blocks): the largest request it can serve without a new segment.",
			     false);
	torch_reserve_family(
		c, "gpuleak_process_torch_fragmentation_ratio",
		"1 - largest free extent / free bytes of PyTorch's reserve: 0 when its "
		"free space is one extent, near 1 when it is split.",
		true);
	fam = "gpuleak_process_oom_explained";
	family(c, fam, "gauge",
	       "The most recent out-of-memory failures a process had (up to 16), "
	       "by cause.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_proc *p = &c->s->procs[i];
		static const char *const causes[] = {
			"leak", "fragmentation", "torch_cache", "outside_torch", "other_processes",
			"peak", "unknown"
		};

		if (p->exited || !p->oom_failures)
			continue;
		for (size_t k = 0; k < sizeof(causes) / sizeof(causes[0]); k++) {
			uint64_t n = 0;

			for (uint32_t j = 0; j < p->nfailures; j++)
				n += p->failures_list[j].oom &&
				     !strcmp(p->failures_list[j].oom->cause, causes[k]);
			proc_sample(c, fam, i, "cause", causes[k]);
			u64(c->f, n);
		}
	}
}

/* A process's GPUs out of balance, and the jobs: their memory and their ranks out of balance. */
static void balance_families(struct ctx *c)
{
	const char *fam = "gpuleak_process_device_imbalance_bytes";
	char id[16], peer[16];

	family(c, fam, "gauge",
	       "How much more device memory a process holds on its fullest GPU "
	       "(cuda_device, gpu, UUID) than on the next (peer_cuda_device), when that is "
	       "--imbalance or more; no sample otherwise.");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_imbalance *im = &c->s->procs[i].imbalance;

		if (c->s->procs[i].exited || !im->found)
			continue;
		snprintf(peer, sizeof(peer), "%d", im->peer);
		device_sample(c, fam, i, im->hi, "peer_cuda_device", peer);
		u64(c->f, im->hi_bytes - im->peer_bytes);
	}
	fam = "gpuleak_job_device_memory_bytes";
	family(c, fam, "gauge",
	       "Device memory the processes of a job hold (job: the launcher's PID; "
	       "grouped_by: environment when every member's RANK was read, else parent).");
	for (uint32_t j = 0; j < c->s->njobs; j++) {
		bool first = true;

		snprintf(id, sizeof(id), "%d", c->s->jobs[j].id);
		fprintf(c->f, "%s{", fam);
		label(c->f, &first, "job", id);
		label(c->f, &first, "grouped_by", c->s->jobs[j].basis);
		fputs("} ", c->f);
		u64(c->f, c->s->jobs[j].device_bytes);
	}
	fam = "gpuleak_process_job_info";
	family(c, fam, "gauge",
	       "1 for each process in a job, to join its series with the job's (job: the "
	       "launcher's PID).");
	for (uint32_t i = 0; i < c->s->nprocs; i++) {
		const struct snap_job *job = snap_job_of(c->s, &c->s->procs[i]);

		if (c->s->procs[i].exited || !job)
			continue;
		snprintf(id, sizeof(id), "%d", job->id);
		proc_sample(c, fam, i, "job", id);
		u64(c->f, 1);
	}
	fam = "gpuleak_job_imbalance_bytes";
	family(c, fam, "gauge",
	       "How much more device memory the fullest process of a job (pid, rank) "
	       "holds than the next, when that is --imbalance or more; no sample otherwise.");
	for (uint32_t j = 0; j < c->s->njobs; j++) {
		const struct snap_job *jb = &c->s->jobs[j];
		const struct snap_imbalance *im = &jb->imbalance;

		if (!im->found || c->s->procs[jb->members[im->hi]].exited)
			continue;
		snprintf(id, sizeof(id), "%d", jb->id);
		proc_sample(c, fam, jb->members[im->hi], "job", id);
		u64(c->f, im->hi_bytes - im->peer_bytes);
	}
}

static void agent_counter(struct ctx *c, const char *name, const char *type, const char *help,
			  uint64_t v)
{
	family(c, name, type, help);
	fprintf(c->f, "%s ", name);
	u64(c->f, v);
}

static void labelled(struct ctx *c, const char *name, const char *lname, const char *lvalue,
		     uint64_t v)
{
	fprintf(c->f, "%s{%s=\"%s\"} ", name, lname, lvalue);
	u64(c->f, v);
}

static void health_families(struct ctx *c)
{
	static const char *const rec_names[GL_NR_REC_TYPES] = { NULL, "stack", "call", "proc" };
	static const struct {
		enum gl_stat stat;
		const char *reason;
	} kernel[] = {
		{ GL_STAT_INFLIGHT_FULL, "inflight_full" },
		{ GL_STAT_NESTED_OVERFLOW, "nested_overflow" },
		{ GL_STAT_UNPAIRED_RETURN, "unpaired_return" },
		{ GL_STAT_STALE_ENTRY, "stale_entry" },
		{ GL_STAT_STACK_ERROR, "stack_error" },
		{ GL_STAT_READ_ERROR, "read_error" },
	};
	const struct agent_health *h = c->o->health;
	const struct snapshot *s = c->s;
	uint64_t unmatched = h->forgotten_unmatched_frees, running = 0;

	for (uint32_t i = 0; i < s->nprocs; i++) {
		unmatched += s->procs[i].unmatched_frees;
		running += !s->procs[i].exited;
	}
	family(c, "gpuleak_build_info", "gauge", "gpuleak's version, BPF ABI and stack mode.");
	fputs("gpuleak_build_info{version=\"", c->f);
	metrics__label_value(c->f, h->version ? h->version : "unknown");
	fprintf(c->f, "\",abi=\"%d\",stack_mode=\"", GL_ABI_VERSION);
	metrics__label_value(c->f, s->stack_mode ? s->stack_mode : "unknown");
	fputs("\"} 1\n", c->f);

	family(c, "gpuleak_events_lost_total", "counter",
	       "Ring-buffer records dropped because the buffer was full, by record type.");
	labelled(c, "gpuleak_events_lost_total", "record", "stack", s->stats[GL_STAT_LOST_STACK]);
	labelled(c, "gpuleak_events_lost_total", "record", "call", s->stats[GL_STAT_LOST_CALL]);
	labelled(c, "gpuleak_events_lost_total", "record", "proc", s->stats[GL_STAT_LOST_PROC]);
	agent_counter(c, "gpuleak_ring_unread_bytes", "gauge",
		      "Ring-buffer bytes of records from before this scrape not read yet: a load "
		      "faster than gpuleak reads (the figures are behind the kernel's).",
		      s->unread_bytes);

	family(c, "gpuleak_kernel_errors_total", "counter",
	       "Calls the BPF programs could not follow completely, by reason.");
	for (size_t i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++)
		labelled(c, "gpuleak_kernel_errors_total", "reason", kernel[i].reason,
			 s->stats[kernel[i].stat]);

	family(c, "gpuleak_records_total", "counter", "Ring-buffer records applied, by type.");
	for (int t = 1; t < GL_NR_REC_TYPES; t++)
		labelled(c, "gpuleak_records_total", "type", rec_names[t], h->records[t]);
	agent_counter(c, "gpuleak_records_malformed_total", "counter",
		      "Ring-buffer records that failed validation.", h->malformed);
	agent_counter(c, "gpuleak_stacks_missing_total", "counter",
		      "Allocations whose stack record never arrived.", h->stack_missing);
	agent_counter(c, "gpuleak_unmatched_frees_total", "counter",
		      "Frees of memory allocated before gpuleak attached, all processes.",
		      unmatched);

	family(c, "gpuleak_cap_hits_total", "counter",
	       "Times a size cap was reached: procs (records of processes refused), stacks (new "
	       "stacks folded into the overflow stack), allocs (allocations the kernel could not "
	       "track), libraries (mappings of a libcuda file past the attached files' cap: "
	       "not traced), python_procs (processes left without Python frames), "
	       "hold_timeout (holds ended at --hold-timeout before the probes were in).");
	labelled(c, "gpuleak_cap_hits_total", "cap", "procs",
		 h->procs_refused + s->stats[GL_STAT_PROC_TABLE_FULL]);
	labelled(c, "gpuleak_cap_hits_total", "cap", "stacks", h->stacks_overflow);
	labelled(c, "gpuleak_cap_hits_total", "cap", "allocs", s->stats[GL_STAT_ALLOC_TABLE_FULL]);
	labelled(c, "gpuleak_cap_hits_total", "cap", "libraries", s->limits.libs_refused);
	labelled(c, "gpuleak_cap_hits_total", "cap", "python_procs", s->limits.py_refused);
	labelled(c, "gpuleak_cap_hits_total", "cap", "hold_timeout", s->limits.holds_expired);
	family(c, "gpuleak_cap_limit", "gauge",
	       "The size caps in force (--max-procs, --max-stacks, --max-allocs, library "
	       "files, Python processes, --hold-timeout in ms).");
	labelled(c, "gpuleak_cap_limit", "cap", "procs", h->max_procs);
	labelled(c, "gpuleak_cap_limit", "cap", "stacks", h->max_stacks);
	labelled(c, "gpuleak_cap_limit", "cap", "allocs", h->max_allocs);
	labelled(c, "gpuleak_cap_limit", "cap", "libraries", s->limits.max_libs);
	labelled(c, "gpuleak_cap_limit", "cap", "python_procs", s->limits.max_py_procs);
	labelled(c, "gpuleak_cap_limit", "cap", "hold_timeout",
		 s->limits.hold_timeout_ns / 1000000);

	agent_counter(c, "gpuleak_processes_tracked", "gauge",
		      "Running processes gpuleak holds books for.", running);
	agent_counter(c, "gpuleak_processes_forgotten_total", "counter",
		      "Processes dropped from the books after they exited.", h->procs_forgotten);
	agent_counter(c, "gpuleak_stacks_interned", "gauge", "Distinct call stacks held.",
		      h->stacks);
	agent_counter(c, "gpuleak_stacks_dropped_total", "counter",
		      "Call stacks dropped once no tracked process referred to them.",
		      h->stacks_dropped);
	agent_counter(c, "gpuleak_probes_attached", "gauge",
		      "Uprobes attached (entry and return) over all libraries.", h->probes);
	agent_counter(c, "gpuleak_libraries_attached", "gauge",
		      "Distinct CUDA driver library files attached.", h->libs);
	agent_counter(c, "gpuleak_books_complete", "gauge",
		      "1 when nothing was lost or left unread and every process's books equal "
		      "the kernel's.",
		      s->complete);
	if (s->tensors) {
		agent_counter(
			c, "gpuleak_tensor_probes_armed", "gauge",
			"1 while PyTorch's allocator probes are attached (a tensor window, or "
			"--tensors full/sampled).",
			s->tensors->armed);
		agent_counter(c, "gpuleak_tensor_windows_total", "counter",
			      "Tensor windows opened (--tensors windowed).",
			      s->tensors->windows_total);
	}

	agent_counter(c, "gpuleak_http_requests_total", "counter", "HTTP requests answered.",
		      h->http_requests);
	family(c, "gpuleak_http_errors_total", "counter",
	       "HTTP connections the server ended itself, by kind.");
	labelled(c, "gpuleak_http_errors_total", "kind", "bad_request", h->http_bad_requests);
	labelled(c, "gpuleak_http_errors_total", "kind", "timeout", h->http_timeouts);
	labelled(c, "gpuleak_http_errors_total", "kind", "too_many_clients", h->http_refused);
	labelled(c, "gpuleak_http_errors_total", "kind", "out_of_descriptors",
		 h->http_accept_paused);
	agent_counter(c, "gpuleak_profiles_written_total", "counter",
		      "Heap profiles written to --profile-dir.", h->profiles_written);
	if (h->incidents_on) {
		family(c, "gpuleak_incidents_total", "counter",
		       "Incident bundles written (GET /incidents lists them), by cause.");
		labelled(c, "gpuleak_incidents_total", "cause", "oom", h->incidents[0]);
		labelled(c, "gpuleak_incidents_total", "cause", "killed", h->incidents[1]);
		labelled(c, "gpuleak_incidents_total", "cause", "leak_at_exit", h->incidents[2]);
		agent_counter(c, "gpuleak_incident_errors_total", "counter",
			      "Incident bundles that could not be written (a full disk).",
			      h->incident_errors);
	}
	agent_counter(c, "gpuleak_profile_errors_total", "counter",
		      "Heap profiles that could not be written.", h->profile_errors);

	family(c, "process_cpu_seconds_total", "counter",
	       "User and system CPU time the agent has spent, in seconds.");
	fprintf(c->f, "process_cpu_seconds_total %.6f\n", h->cpu_seconds);
	agent_counter(c, "process_resident_memory_bytes", "gauge",
		      "The agent's resident memory size in bytes.", h->resident_bytes);
	agent_counter(c, "process_open_fds", "gauge", "The agent's open file descriptors.",
		      h->open_fds);
	family(c, "process_start_time_seconds", "gauge",
	       "Start time of the agent since the epoch, in seconds.");
	fprintf(c->f, "process_start_time_seconds %.3f\n", h->start_time_seconds);
}

int report__metrics(FILE *f, const struct snapshot *s, const struct metrics_opts *o)
{
	static const struct agent_health none;
	struct metrics_opts def = { .health = &none };
	struct ctx c = { .f = f, .s = s, .o = o ? o : &def };

	if (!c.o->health) {
		def = *o;
		def.health = &none;
		c.o = &def;
	}
	process_families(&c);
	memory_families(&c);
	balance_families(&c);
	health_families(&c);
	return ferror(f) ? -EIO : 0;
}
