// SPDX-License-Identifier: BSD-2-Clause
/*
 * memory.c - where a process's device memory is, in a few lines of text, and
 * why its allocations ran out of memory; gpuleak explain's report.
 */
#include <errno.h>
#include <string.h>
#include "report.h"
#include "util/fmt.h"

#define B(x, i) fmt_bytes((x), buf[i], sizeof(buf[i]))

static void print_libs(FILE *f, const struct snap_lib *libs, uint32_t n)
{
	char buf[1][32];

	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s%s %s", i ? ", " : "", libs[i].name, B(libs[i].bytes, 0));
}

/*
 * PyTorch's part: allocated and cached with the largest free extent, or the reserve alone.
 * When blocks lie in segments from before attach, the reserve gpuleak saw is split into
 * its own blocks and cached, and the blocks beyond it are said to be in a reserve from
 * before attach, whose size gpuleak did not see: never "reserved = allocated + cached"
 * over figures that cannot add up.
 */
static void print_torch(FILE *f, const struct snap_memory *m, const char *indent)
{
	char buf[4][32];

	if (!m->torch_reserved && !m->torch_allocated)
		return;
	if (!m->blocks_seen) {
		fprintf(f,
			"%s  PyTorch: %s reserved in segments; its blocks were not all seen "
			"(tensor probes not armed, or armed in windows): allocated and cached "
			"not split, from the driver level alone\n",
			indent, B(m->torch_reserved, 0));
		return;
	}
	if (!m->blocks_outside) {
		fprintf(f,
			"%s  PyTorch: %s reserved = %s allocated + %s cached; largest free extent "
			"%s (fragmentation %.0f%%)\n",
			indent, B(m->torch_reserved, 0), B(m->torch_allocated, 1),
			B(m->torch_cached, 2), B(m->largest_free, 3), m->fragmentation * 100);
		return;
	}
	fprintf(f,
		"%s  PyTorch: %s allocated in blocks; part of its reserve predates the attach: "
		"%s of the blocks lie in segments allocated before it (their size is not "
		"known: within%s)\n",
		indent, B(m->torch_allocated, 0), B(m->blocks_outside, 1),
		m->nvml_valid ? " \"context and before attach\"" : " what NVML would count");
	if (m->torch_reserved)
		fprintf(f,
			"%s    of the reserve seen since attach: %s = %s allocated + %s cached; "
			"largest free extent %s (fragmentation %.0f%%)\n",
			indent, B(m->torch_reserved, 0), B(m->blocks_in_seen, 1),
			B(m->torch_cached, 2), B(m->largest_free, 3), m->fragmentation * 100);
	else
		fprintf(f, "%s    no segment of PyTorch's was seen allocated since attach\n",
			indent);
}

/* A framework's preallocated pool: what gpuleak cannot see inside it, and how to see it. */
static void print_pool(FILE *f, const struct snap_proc *p, const struct snap_pool *pl,
		       const char *indent)
{
	char buf[2][32], site[160] = "";

	for (uint32_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].id == pl->stack && p->stacks[i].nframes)
			report__site(&p->stacks[i], site, sizeof(site));
	if (pl->framework)
		fprintf(f, "%s  pool: %s's preallocated pool, %s in one allocation", indent,
			pl->framework, B(pl->bytes, 0));
	else
		fprintf(f, "%s  pool: one allocation of %s by %s, a large share of the device",
			indent, B(pl->bytes, 0), pl->library ? pl->library : "a library");
	if (pl->dev_total && pl->dev >= 0)
		fprintf(f, " (%.0f%% of device %d's %s)", 100.0 * pl->bytes / pl->dev_total,
			pl->dev, B(pl->dev_total, 1));
	else if (pl->dev_total)
		fprintf(f, " (%.0f%% of a %s device)", 100.0 * pl->bytes / pl->dev_total,
			B(pl->dev_total, 1));
	if (site[0])
		fprintf(f, " at %s", site);
	fprintf(f,
		": growth inside it is invisible to gpuleak (what %s carves out of it makes no "
		"driver call), so no leak can be named in it; to see each buffer: %s\n",
		pl->framework ? pl->framework : "the framework", pl->visible_with);
}

void report__memory_text(FILE *f, const struct snap_proc *p, const char *indent)
{
	const struct snap_memory *m = &p->memory;
	char buf[4][32];

	if (!m->valid ||
	    (!m->device_bytes && !m->nvml_valid && !m->pinned_host && !m->torch_allocated))
		return;
	if (m->nvml_valid)
		fprintf(f,
			"%smemory: NVML %s = PyTorch %s + outside PyTorch %s + context and "
			"before attach %s",
			indent, B(m->nvml_bytes, 0), B(m->torch_reserved, 1),
			B(m->outside_torch, 2), B(m->unseen, 3));
	else
		fprintf(f,
			"%smemory: gpuleak saw %s = PyTorch %s + outside PyTorch %s (no NVML "
			"figure: the context and memory from before attach not known)",
			indent, B(m->device_bytes, 0), B(m->torch_reserved, 1),
			B(m->outside_torch, 2));
	if (m->unexplained)
		fprintf(f, "; unexplained: gpuleak saw %s more than NVML counts (sampled apart)",
			B(m->unexplained, 0));
	fputc('\n', f);
	print_torch(f, m, indent);
	for (uint32_t i = 0; i < m->ndevs && m->ndevs > 1; i++) {
		const struct snap_mem_dev *d = &m->devs[i];

		if (d->dev < 0)
			fprintf(f, "%s  device not known: %s", indent, B(d->device_bytes, 0));
		else
			fprintf(f, "%s  device %d: %s", indent, d->dev, B(d->device_bytes, 0));
		if (d->nvml_valid && d->nvml_index >= 0)
			fprintf(f, " (NVML GPU %d: %s)", d->nvml_index, B(d->nvml_bytes, 0));
		else if (d->nvml_valid)
			fprintf(f, " (NVML %s)", B(d->nvml_bytes, 0));
		fprintf(f, ", PyTorch %s, outside PyTorch %s\n", B(d->torch_reserved, 0),
			B(d->outside_torch, 1));
	}
	for (uint32_t i = 0; i < m->ndevs; i++) {
		const struct snap_mem_dev *d = &m->devs[i];

		if (!d->nlibs)
			continue;
		fprintf(f, "%s  outside PyTorch", indent);
		if (m->ndevs > 1 && d->dev >= 0)
			fprintf(f, " on device %d", d->dev);
		fprintf(f, ": ");
		print_libs(f, d->libs, d->nlibs);
		fputc('\n', f);
	}
	if (m->pinned_host || m->managed)
		fprintf(f, "%s  apart: pinned host %s, managed %s\n", indent, B(m->pinned_host, 0),
			B(m->managed, 1));
	for (uint32_t i = 0; i < m->npools; i++)
		print_pool(f, p, &m->pools[i], indent);
}

void report__oom_text(FILE *f, const struct snap_failure *fl, const char *indent)
{
	const struct snap_oom *o = fl->oom;
	char buf[3][32];

	if (!o)
		return;
	fprintf(f, "%scause: %s: %s\n", indent, o->cause, o->why);
	fprintf(f, "%s  request %s", indent, B(fl->bytes, 0));
	if (o->nvml)
		fprintf(f, ", device free %s of %s (NVML at the failure)", B(o->dev_free, 1),
			B(o->dev_total, 2));
	else
		fprintf(f, ", device free not known (no NVML at the failure)");
	fprintf(f, "; try: %s\n", o->action);
	if (o->is_retry)
		fprintf(f,
			"%s  this is PyTorch's own retry: it freed %s of its cache and asked "
			"again\n",
			indent, B(o->retry_freed, 0));
	else if (o->retry && !strcmp(o->retry, "succeeded"))
		fprintf(f,
			"%s  PyTorch freed %s of its cache and retried: the retry succeeded (no "
			"error raised)\n",
			indent, B(o->retry_freed, 0));
	else if (o->retry && !strcmp(o->retry, "failed"))
		fprintf(f,
			"%s  PyTorch freed %s of its cache and retried: the retry failed too "
			"(PyTorch raised out of memory)\n",
			indent, B(o->retry_freed, 0));
}

/* Whether the process made any CUDA call gpuleak saw. */
static bool calls_seen(const struct snap_proc *p)
{
	return p->alloc_calls || p->free_calls || p->failures || p->nstacks || p->peak_device ||
	       p->torch_reserved_bytes || p->memory.device_bytes;
}

/*
 * A process that allocated nothing while traced: NVML's figure is all from before
 * attach (or the context), and what an out-of-memory failure now could be told from.
 */
static void print_idle(FILE *f, const struct snap_proc *p)
{
	const struct snap_memory *m = &p->memory;
	char buf[3][32];

	fputs("  no CUDA allocation, free or failure seen since attach\n", f);
	if (!m->nvml_valid) {
		fputs("  memory: NVML does not list the process (no device memory, or no NVML "
		      "here)\n",
		      f);
		return;
	}
	fprintf(f,
		"  memory: NVML %s, all allocated before attach or the CUDA context: gpuleak "
		"cannot split it into PyTorch's blocks, its cache or other libraries (attach "
		"before the job allocates; gpuleak census PID names the tensors that hold it)\n",
		B(m->nvml_bytes, 0));
	for (uint32_t i = 0; i < m->ndevs; i++) {
		const struct snap_mem_dev *d = &m->devs[i];

		if (!d->nvml_valid)
			continue;
		/* no allocation seen: its CUDA ordinal is not known, NVML's GPU is */
		if (d->dev >= 0)
			fprintf(f, "  device %d: ", d->dev);
		else
			fprintf(f, "  NVML GPU %d: ", d->nvml_index);
		fprintf(f, "the process %s, other processes %s, free %s of %s (NVML)\n",
			B(d->nvml_bytes, 0), B(d->nvml_others, 1), B(d->nvml_free, 2),
			fmt_bytes(d->nvml_total, (char[32]){ 0 }, 32));
		if (d->nvml_total && d->nvml_others >= d->nvml_total / 4)
			fprintf(f,
				"    an out-of-memory failure now: other_processes would matter "
				"(they hold %s, a quarter or more of the device); try: give the "
				"job a device of its own\n",
				B(d->nvml_others, 0));
		else
			fprintf(f,
				"    an out-of-memory failure now: cause unknown: the process's "
				"%s is all from before attach, so a leak, fragmentation or a "
				"library outside PyTorch cannot be told; try: attach before the "
				"job allocates (gpuleak run, or attach at its start)\n",
				B(d->nvml_bytes, 0));
	}
}

int report__explain(FILE *f, const struct snapshot *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		fprintf(f, "PID %d (%.15s)\n", p->pid, p->comm);
		if (p->memory.valid && !calls_seen(p)) {
			print_idle(f, p);
			continue;
		}
		if (!p->memory.valid)
			fprintf(f, "  memory: not known (the process has exited)\n");
		else if (!p->memory.device_bytes && !p->memory.nvml_valid)
			fprintf(f, "  memory: no device memory seen allocated since attach, and no "
				   "NVML figure\n");
		report__memory_text(f, p, "  ");
		report__gpus_text(f, s, p);
		for (uint32_t j = 0; j < p->nfailures; j++) {
			const struct snap_failure *fl = &p->failures_list[j];

			if (!fl->oom)
				continue;
			fprintf(f, "  out of memory: %s(%s)\n", fl->api,
				fmt_bytes(fl->bytes, (char[32]){ 0 }, 32));
			report__oom_text(f, fl, "    ");
		}
	}
	if (!s->nprocs)
		fprintf(f, "no CUDA allocations seen\n");
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}
