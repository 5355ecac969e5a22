// SPDX-License-Identifier: BSD-2-Clause
/*
 * gpus.c - several GPUs and several ranks in the text and JSON reports: a
 * process's memory per GPU (CUDA ordinal, NVML index and UUID where matched),
 * its rank, the imbalance between its GPUs, and the per-job view with the
 * imbalance between ranks. The figures come from model/jobs.c.
 */
#include <string.h>
#include "report.h"
#include "trace/probes.h"
#include "util/fmt.h"
#include "util/jsonw.h"

static int ordinals_used(const struct snap_proc *p)
{
	int n = 0;

	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		n += p->dev_bytes[d] != 0 || snap_gpu_named(p, d);
	return n;
}

static void print_gpu(FILE *f, const struct snap_proc *p, int d)
{
	char b[32];

	fprintf(f, "cuda %d", d);
	if (snap_gpu_named(p, d))
		fprintf(f, " (NVML %d%s%s)", p->gpus[d].nvml_index, p->gpus[d].uuid[0] ? ", " : "",
			p->gpus[d].uuid);
	fprintf(f, " %s", fmt_bytes(p->dev_bytes[d], b, sizeof(b)));
}

/* "[site] +N MiB, ..." of the stacks that make an imbalance. */
static void print_difference(FILE *f, const struct snapshot *s, const struct snap_proc *self,
			     const struct snap_imbalance *im, const char *indent)
{
	char site[256], b[32];

	if (!im->nstacks) {
		fprintf(f,
			"%s  no stack holds more there than on its peer (the difference is in "
			"stacks not kept)\n",
			indent);
		return;
	}
	for (uint32_t i = 0; i < im->nstacks; i++) {
		const struct snap_proc *p = self ? self : &s->procs[im->stacks[i].proc];
		const struct snap_stack *st = &p->stacks[im->stacks[i].stack];

		report__site(st, site, sizeof(site));
		fprintf(f, "%s  +%s %s at %s\n", indent,
			fmt_bytes(im->stacks[i].bytes, b, sizeof(b)), class__name(st->cls),
			st->nframes ? site : "(no frames)");
	}
}

void report__gpus_text(FILE *f, const struct snapshot *s, const struct snap_proc *p)
{
	const struct snap_imbalance *im = &p->imbalance;
	const struct snap_job *job = snap_job_of(s, p);
	char b1[32], b2[32];
	bool first = true;

	if (p->ranked || job) {
		fprintf(f, "  job:");
		if (job)
			fprintf(f, " launched by PID %d", job->id);
		if (p->ranked)
			fprintf(f, "%s rank %d", job ? "," : "", p->rank);
		if (p->ranked && p->local_rank >= 0)
			fprintf(f, " (local rank %d)", p->local_rank);
		if (p->ranked && p->world_size >= 0)
			fprintf(f, " of %d", p->world_size);
		fputc('\n', f);
	}
	if (ordinals_used(p) < 2 && !p->gpu_basis)
		return;
	fprintf(f, "  GPUs: ");
	for (int d = 0; d < SNAP_MAX_DEVS; d++) {
		if (!p->dev_bytes[d] && !snap_gpu_named(p, d))
			continue;
		fprintf(f, "%s", first ? "" : "; ");
		print_gpu(f, p, d);
		first = false;
	}
	if (p->gpu_basis && !strcmp(p->gpu_basis, "only"))
		fputs(" (the machine's only GPU)", f);
	else if (p->gpu_basis && strcmp(p->gpu_basis, "one"))
		fprintf(f, " (ordinals matched to NVML by %s)", p->gpu_basis);
	fputc('\n', f);
	if (!im->found)
		return;
	fprintf(f, "  imbalance: cuda %d holds %s, %.1fx cuda %d's %s; the difference:\n", im->hi,
		fmt_bytes(im->hi_bytes, b1, sizeof(b1)),
		im->peer_bytes ? (double)im->hi_bytes / (double)im->peer_bytes : 0.0, im->peer,
		fmt_bytes(im->peer_bytes, b2, sizeof(b2)));
	print_difference(f, s, p, im, "  ");
}

static void print_member(FILE *f, const struct snap_proc *p)
{
	char b[32];
	bool first = true;

	if (p->ranked)
		fprintf(f, "  rank %d", p->rank);
	else
		fprintf(f, "  member");
	fprintf(f, " PID %d (%s): device %s", p->pid, p->exited ? "exited" : "running",
		fmt_bytes(p->bytes[GL_CLASS_DEVICE], b, sizeof(b)));
	for (int d = 0; d < SNAP_MAX_DEVS; d++) {
		if (!p->dev_bytes[d])
			continue;
		fprintf(f, "%s", first ? " on " : ", ");
		print_gpu(f, p, d);
		first = false;
	}
	fputc('\n', f);
}

static void member_name(const struct snap_proc *p, char *buf, size_t len)
{
	if (p->ranked)
		snprintf(buf, len, "rank %d (PID %d)", p->rank, p->pid);
	else
		snprintf(buf, len, "PID %d", p->pid);
}

void report__jobs_text(FILE *f, const struct snapshot *s)
{
	for (uint32_t i = 0; i < s->njobs; i++) {
		const struct snap_job *j = &s->jobs[i];
		const struct snap_imbalance *im = &j->imbalance;
		char b1[32], b2[32], hi[48], peer[48];

		fprintf(f, "JOB launched by PID %d: %u processes (%s", j->id, j->nmembers,
			!strcmp(j->basis, "environment") ? "ranks from RANK" : "same parent");
		if (j->world_size >= 0)
			fprintf(f, ", world size %d", j->world_size);
		fprintf(f, "), device %s\n", fmt_bytes(j->device_bytes, b1, sizeof(b1)));
		for (uint32_t m = 0; m < j->nmembers; m++)
			print_member(f, &s->procs[j->members[m]]);
		if (im->found) {
			member_name(&s->procs[j->members[im->hi]], hi, sizeof(hi));
			member_name(&s->procs[j->members[im->peer]], peer, sizeof(peer));
			fprintf(f, "  imbalance: %s holds %s, %.1fx %s's %s; the difference:\n", hi,
				fmt_bytes(im->hi_bytes, b1, sizeof(b1)),
				im->peer_bytes ? (double)im->hi_bytes / (double)im->peer_bytes :
						 0.0,
				peer, fmt_bytes(im->peer_bytes, b2, sizeof(b2)));
			print_difference(f, s, NULL, im, "  ");
		}
		fputc('\n', f);
	}
}

char *report__gpus_short(const struct snap_proc *p, char *buf, size_t len)
{
	size_t n = 0;
	char b[32];

	buf[0] = '\0';
	if (ordinals_used(p) < 2)
		return buf;
	for (int d = 0; d < SNAP_MAX_DEVS && n < len; d++) {
		int w;

		if (!p->dev_bytes[d])
			continue;
		if (snap_gpu_named(p, d))
			w = snprintf(buf + n, len - n, "%scuda%d=GPU%d %s", n ? " " : "  ", d,
				     p->gpus[d].nvml_index,
				     fmt_bytes(p->dev_bytes[d], b, sizeof(b)));
		else
			w = snprintf(buf + n, len - n, "%scuda%d %s", n ? " " : "  ", d,
				     fmt_bytes(p->dev_bytes[d], b, sizeof(b)));
		if (w < 0)
			break;
		n += (size_t)w;
	}
	if (n >= len)
		buf[len - 1] = '\0'; /* truncated: what fits */
	return buf;
}

char *report__job_line(const struct snapshot *s, const struct snap_job *j, char *buf, size_t len)
{
	const struct snap_imbalance *im = &j->imbalance;
	char b1[32], b2[32], hi[48], site[200] = "";
	int n;

	n = snprintf(buf, len, "JOB %d: %u %s, device %s", j->id, j->nmembers,
		     !strcmp(j->basis, "environment") ? "ranks" : "processes",
		     fmt_bytes(j->device_bytes, b1, sizeof(b1)));
	if (n < 0 || (size_t)n >= len || !im->found)
		return buf;
	member_name(&s->procs[j->members[im->hi]], hi, sizeof(hi));
	if (im->nstacks) {
		const struct snap_proc *p = &s->procs[im->stacks[0].proc];

		report__site(&p->stacks[im->stacks[0].stack], site, sizeof(site));
	}
	snprintf(buf + n, len - (size_t)n, "; imbalance: %s +%s over the next%s%s", hi,
		 fmt_bytes(im->hi_bytes - im->peer_bytes, b2, sizeof(b2)), site[0] ? ", at " : "",
		 site);
	return buf;
}

static void field_int_or_null(struct jsonw *w, const char *name, int v)
{
	jsonw__name(w, name);
	if (v >= 0)
		jsonw__s64(w, v);
	else
		jsonw__null(w);
}

static void write_imbalance(struct jsonw *w, const struct snapshot *s, const struct snap_proc *self,
			    const struct snap_imbalance *im, const char *hi_name,
			    const char *peer_name, int hi, int peer)
{
	char site[256];

	jsonw__name(w, "imbalance");
	if (!im->found) {
		jsonw__null(w);
		return;
	}
	jsonw__start_object(w);
	jsonw__field_s64(w, hi_name, hi);
	jsonw__field_u64(w, "bytes", im->hi_bytes);
	jsonw__field_s64(w, peer_name, peer);
	jsonw__field_u64(w, "peer_bytes", im->peer_bytes);
	jsonw__name(w, "stacks");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < im->nstacks; i++) {
		const struct snap_proc *p = self ? self : &s->procs[im->stacks[i].proc];
		const struct snap_stack *st = &p->stacks[im->stacks[i].stack];

		report__site(st, site, sizeof(site));
		jsonw__start_object(w);
		jsonw__field_s64(w, "pid", p->pid);
		jsonw__field_u64(w, "stack_id", st->id);
		jsonw__field_string(w, "memory", class__name(st->cls));
		jsonw__field_string(w, "site", st->nframes ? site : "");
		jsonw__field_u64(w, "difference_bytes", im->stacks[i].bytes);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	jsonw__end_object(w);
}

void report__gpus_json(struct jsonw *w, const struct snapshot *s, const struct snap_proc *p)
{
	field_int_or_null(w, "ppid", p->ppid > 0 ? p->ppid : -1);
	field_int_or_null(w, "rank", p->ranked ? p->rank : -1);
	field_int_or_null(w, "local_rank", p->ranked ? p->local_rank : -1);
	field_int_or_null(w, "world_size", p->ranked ? p->world_size : -1);
	field_int_or_null(w, "job", snap_job_of(s, p) ? snap_job_of(s, p)->id : -1);
	jsonw__name(w, "gpus");
	jsonw__start_array(w);
	for (int d = 0; d < SNAP_MAX_DEVS; d++) {
		if (!p->dev_bytes[d] && !snap_gpu_named(p, d))
			continue;
		jsonw__start_object(w);
		jsonw__field_s64(w, "cuda_device", d);
		field_int_or_null(w, "nvml_index",
				  snap_gpu_named(p, d) ? p->gpus[d].nvml_index : -1);
		jsonw__name(w, "uuid");
		if (snap_gpu_named(p, d) && p->gpus[d].uuid[0])
			jsonw__string(w, p->gpus[d].uuid);
		else
			jsonw__null(w);
		jsonw__field_u64(w, "device_bytes", p->dev_bytes[d]);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	jsonw__name(w, "gpu_match");
	if (p->gpu_basis)
		jsonw__string(w, p->gpu_basis);
	else
		jsonw__null(w);
	write_imbalance(w, s, p, &p->imbalance, "cuda_device", "peer_cuda_device", p->imbalance.hi,
			p->imbalance.peer);
}

void report__jobs_json(struct jsonw *w, const struct snapshot *s)
{
	jsonw__name(w, "jobs");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < s->njobs; i++) {
		const struct snap_job *j = &s->jobs[i];
		const struct snap_imbalance *im = &j->imbalance;

		jsonw__start_object(w);
		jsonw__field_s64(w, "job", j->id);
		jsonw__field_string(w, "grouped_by", j->basis);
		field_int_or_null(w, "world_size", j->world_size);
		jsonw__field_u64(w, "device_bytes", j->device_bytes);
		jsonw__name(w, "members");
		jsonw__start_array(w);
		for (uint32_t m = 0; m < j->nmembers; m++) {
			const struct snap_proc *p = &s->procs[j->members[m]];

			jsonw__start_object(w);
			jsonw__field_s64(w, "pid", p->pid);
			field_int_or_null(w, "rank", p->ranked ? p->rank : -1);
			field_int_or_null(w, "local_rank", p->ranked ? p->local_rank : -1);
			jsonw__field_u64(w, "device_bytes", p->bytes[GL_CLASS_DEVICE]);
			jsonw__end_object(w);
		}
		jsonw__end_array(w);
		write_imbalance(w, s, NULL, im, "pid", "peer_pid",
				im->found ? s->procs[j->members[im->hi]].pid : -1,
				im->found ? s->procs[j->members[im->peer]].pid : -1);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
}
