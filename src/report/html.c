// SPDX-License-Identifier: BSD-2-Clause
/*
 * html.c - the report as one self-contained HTML page (--html FILE, serve's
 * /report?pid=N): the answer in words first, the memory over time stacked by
 * allocation site with the leaking sites in red, a time range picked on it
 * giving the flame graph of what was allocated in that range and is still
 * held (memray's temporal view), the leak table with hints and holders, and
 * the out-of-memory failures explained.
 *
 * The page draws itself from the snapshot's figures, written as JSON into it,
 * with its own SVG and a few hundred lines of script (html_assets.c): no chart
 * library, no network, nothing to pin or vet, the same drawing as the flame
 * graph of --svg. It shows only what the books hold: a site's band is its
 * outstanding bytes as the books' history kept them (coarser the older), the
 * range's flame graph the outstanding allocations made in the range (to the
 * width of a 256th of the process's life), and memory from before the attach
 * is said to be of unknown time, never spread over the range.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "html_assets.h"
#include "trace/probes.h"
#include "model/snapshot.h"
#include "util/fmt.h"
#include "util/jsonw.h"

#define HTML_STACKS 40 /* stacks per process in the page, largest first */

/* Seconds from the start of tracing to t (0 for what came before it: a bucket's start). */
static double since(const struct snapshot *s, uint64_t t)
{
	return t > s->start_ns ? (t - s->start_ns) / 1e9 : 0;
}

static void put_frames(struct jsonw *w, const struct snap_stack *st)
{
	char name[256], where[320];

	jsonw__name(w, "frames"); /* innermost first */
	jsonw__start_array(w);
	for (uint32_t i = 0; i < st->nframes; i++) {
		const struct snap_frame *fr = &st->frames[i];
		const char *file = fr->file ? strrchr(fr->file, '/') : NULL;

		/* a Python frame's name alone: its file and line go beside it */
		if (fr->kind && !strcmp(fr->kind, "python") && fr->function)
			snprintf(name, sizeof(name), "%s", fr->function);
		else
			report__frame_name(fr, name, sizeof(name));
		where[0] = '\0';
		if (fr->file && fr->line > 0)
			snprintf(where, sizeof(where), "%s:%d", file ? file + 1 : fr->file,
				 fr->line);
		jsonw__start_array(w);
		jsonw__string(w, name);
		jsonw__string(w, where);
		jsonw__string(w, fr->kind ? fr->kind : "native");
		jsonw__end_array(w);
	}
	jsonw__end_array(w);
}

static void put_stack(struct jsonw *w, const struct snapshot *s, const struct snap_stack *st)
{
	char site[256];

	jsonw__start_object(w);
	jsonw__field_u64(w, "id", st->id);
	jsonw__field_string(w, "memory", class__name(st->cls));
	jsonw__field_string(w, "verdict", st->verdict);
	jsonw__field_double(w, "growth_bytes_per_s", st->growth_bytes_per_s);
	jsonw__field_u64(w, "bytes", st->outstanding_bytes);
	jsonw__field_u64(w, "allocs", st->outstanding_allocs);
	jsonw__field_bool(w, "torch_segment", st->torch_segment);
	report__site(st, site, sizeof(site));
	jsonw__field_string(w, "site", site);
	if (st->why)
		jsonw__field_string(w, "why", st->why);
	if (st->pattern) {
		jsonw__field_string(w, "pattern", st->pattern);
		jsonw__field_string(w, "evidence", st->evidence);
		jsonw__field_string(w, "fix", st->fix);
	}
	put_frames(w, st);
	/* the books' history: [seconds since the start, bytes at the bucket's end] */
	jsonw__name(w, "hist");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < st->nhist; i++) {
		jsonw__start_array(w);
		jsonw__double(w, since(s, st->hist[i].t_ns));
		jsonw__u64(w, st->hist[i].last);
		jsonw__end_array(w);
	}
	jsonw__end_array(w);
	jsonw__field_double(w, "hist_width_s", st->hist_width_ns / 1e9);
	/* what it holds, by when it was made: [seconds since the start, bytes, allocations] */
	jsonw__name(w, "held");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < st->nheld; i++) {
		jsonw__start_array(w);
		jsonw__double(w, since(s, st->held[i].t_ns));
		jsonw__u64(w, st->held[i].bytes);
		jsonw__u64(w, st->held[i].allocs);
		jsonw__end_array(w);
	}
	jsonw__end_array(w);
	jsonw__field_double(w, "held_width_s", st->held_width_ns / 1e9);
	jsonw__field_u64(w, "held_before_bytes", st->held_before);
	jsonw__end_object(w);
}

static void put_failure(struct jsonw *w, const struct snapshot *s, const struct snap_failure *f)
{
	char site[256] = "";

	jsonw__start_object(w);
	jsonw__field_double(w, "t", since(s, f->ts));
	jsonw__field_string(w, "api", f->api);
	jsonw__field_string(w, "error", f->error);
	jsonw__field_u64(w, "bytes", f->bytes);
	if (f->stack)
		report__site(f->stack, site, sizeof(site));
	jsonw__field_string(w, "site", site);
	if (f->oom) {
		jsonw__field_string(w, "cause", f->oom->cause);
		jsonw__field_string(w, "why", f->oom->why);
		jsonw__field_string(w, "action", f->oom->action);
	}
	jsonw__end_object(w);
}

static void put_census(struct jsonw *w, const struct snapshot *s, int pid)
{
	jsonw__name(w, "holders");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < s->ncensus; i++) {
		if (s->census[i].pid != pid)
			continue;
		for (uint32_t r = 0; r < s->census[i].nrows; r++) {
			const struct snap_census_row *row = &s->census[i].rows[r];

			jsonw__start_object(w);
			jsonw__field_string(w, "holder", row->holder ? row->holder : "?");
			jsonw__field_string(w, "kind", row->kind);
			jsonw__field_s64(w, "tensors", row->tensors);
			jsonw__field_u64(w, "bytes", row->bytes);
			if (row->site)
				jsonw__field_string(w, "site", row->site);
			jsonw__field_bool(w, "leak", row->leak);
			jsonw__end_object(w);
		}
	}
	jsonw__end_array(w);
}

static const char *const draw_names[] = {
	[REPORT_DRAW_ALL] = "all",
	[REPORT_DRAW_BLOCKS] = "blocks",
	[REPORT_DRAW_SEGMENTS] = "segments",
};

static void put_proc(struct jsonw *w, const struct snapshot *s, const struct snap_proc *p)
{
	uint32_t n = 0;

	jsonw__start_object(w);
	jsonw__field_s64(w, "pid", p->pid);
	jsonw__field_string(w, "comm", p->comm);
	jsonw__field_bool(w, "exited", p->exited);
	jsonw__field_bool(w, "complete", p->consistent);
	jsonw__field_u64(w, "torch_reserved_bytes", p->torch_reserved_bytes);
	/* every block since tracing began: they, not the segments, draw PyTorch's memory */
	jsonw__field_bool(w, "blocks_complete",
			  p->tensors_known && p->tensors.coverage &&
				  !strcmp(p->tensors.coverage, "complete"));
	/* which of PyTorch's segments and blocks draw its memory (report__draw_rule()) */
	jsonw__field_string(w, "draw", draw_names[report__draw_rule(p)]);
	jsonw__name(w, "stacks");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < p->nstacks && n < HTML_STACKS; i++) {
		if (!report__is_memory_class(p->stacks[i].cls) || !p->stacks[i].outstanding_bytes)
			continue;
		put_stack(w, s, &p->stacks[i]);
		n++;
	}
	jsonw__end_array(w);
	jsonw__name(w, "failures");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < p->nfailures; i++)
		put_failure(w, s, &p->failures_list[i]);
	jsonw__end_array(w);
	put_census(w, s, p->pid);
	jsonw__end_object(w);
}

/* The page's data, JSON. */
static int put_data(FILE *f, const struct snapshot *s, int pid)
{
	struct jsonw *w = jsonw__new(f, false);
	char why[512];

	if (!w)
		return -ENOMEM;
	jsonw__start_object(w);
	jsonw__field_double(w, "duration_s", s->duration_s);
	jsonw__field_double(w, "now_s", (s->now_ns - s->start_ns) / 1e9);
	jsonw__field_bool(w, "complete", s->complete);
	jsonw__field_string(w, "incomplete_why", report__incomplete_why(s, why, sizeof(why)));
	jsonw__field_u64(w, "lost_events", s->lost_events);
	jsonw__name(w, "processes");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (pid <= 0 || s->procs[i].pid == pid)
			put_proc(w, s, &s->procs[i]);
	jsonw__end_array(w);
	jsonw__end_object(w);
	return jsonw__free(w);
}

int report__html(FILE *f, const struct snapshot *s, int pid)
{
	char *data = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&data, &len);
	int err;

	if (!m)
		return -ENOMEM;
	err = put_data(m, s, pid);
	if (fclose(m) && !err)
		err = -ENOMEM;
	if (err) {
		free(data);
		return err;
	}
	fputs(html__head, f);
	/* inside <script>, "</" would end it: the JSON's slashes are written escaped */
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '<')
			fputs("\\u003c", f);
		else
			fputc(data[i], f);
	}
	fputs(html__tail, f);
	free(data);
	return fflush(f) || ferror(f) ? -EIO : 0;
}
