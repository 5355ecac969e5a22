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

/* PyTorch's part: allocated and cached with the largest free extent, or the reserve alone. */
static void print_torch(FILE *f, const struct snap_memory *m, const struct snap_mem_dev *d,
			const char *indent)
{
	char buf[4][32];
	uint64_t reserved = d ? d->torch_reserved : m->torch_reserved;
	uint64_t alloc = d ? d->torch_allocated : m->torch_allocated;
	uint64_t cached = d ? d->torch_cached : m->torch_cached;
	uint64_t largest = d ? d->largest_free : m->largest_free;
	double frag = d ? d->fragmentation : m->fragmentation;

	if (!reserved && !alloc)
		return;
	if (!m->blocks_seen) {
		fprintf(f,
			"%s  PyTorch: %s reserved in segments; its blocks were not all seen "
			"(tensor probes not armed, or armed in windows): allocated and cached "
			"not split, from the driver level alone\n",
			indent, B(reserved, 0));
		return;
	}
	fprintf(f,
		"%s  PyTorch: %s reserved = %s allocated + %s cached; largest free extent %s "
		"(fragmentation %.0f%%)",
		indent, B(reserved, 0), B(alloc, 1), B(cached, 2), B(largest, 3), frag * 100);
	if (d && d->blocks_outside)
		fprintf(f, "; %s of blocks in segments from before attach",
			fmt_bytes(d->blocks_outside, buf[0], sizeof(buf[0])));
	fputc('\n', f);
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
	print_torch(f, m, NULL, indent);
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

int report__explain(FILE *f, const struct snapshot *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		fprintf(f, "PID %d (%.15s)\n", p->pid, p->comm);
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
