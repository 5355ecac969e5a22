// SPDX-License-Identifier: BSD-2-Clause
/*
 * text.c - the human report: per process, outstanding memory per class and
 * the most suspicious stacks with symbolized frames.
 */
#include <errno.h>
#include <string.h>
#include "report.h"
#include "model/site.h"
#include "trace/probes.h"
#include "util/fmt.h"

static const char *basename_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

static void print_frame(FILE *f, uint32_t i, const struct snap_frame *fr)
{
	fprintf(f, "      #%-2u ", i);
	if (fr->kind[0] == 'p') {
		fprintf(f, "%s (%s:%d) [python%s]\n", fr->function ? fr->function : "?",
			fr->file ? fr->file : "?", fr->line, fr->inferred ? ", inferred" : "");
		return;
	}
	if (fr->function && fr->function[0] == '[' && !fr->module) { /* a note of gpuleak's */
		fprintf(f, "%s\n", fr->function);
		return;
	}
	if (fr->function)
		fprintf(f, "%s+0x%llx", fr->function, (unsigned long long)fr->sym_off);
	else if (fr->module)
		fprintf(f, "0x%llx", (unsigned long long)fr->offset);
	else
		fprintf(f, "[unknown 0x%llx]", (unsigned long long)fr->address);
	if (fr->module)
		fprintf(f, " (%s)", basename_of(fr->module));
	if (fr->file && fr->line)
		fprintf(f, " %s:%d", fr->file, fr->line);
	fputc('\n', f);
}

/* frames[from..to), plumbing, as one line: how many, in which modules (the first three). */
static void print_folded(FILE *f, const struct snap_frame *frames, uint32_t from, uint32_t to)
{
	const char *seen[3];
	uint32_t nseen = 0;
	bool more = false;

	fprintf(f, "      #%u-#%u %u frames in ", from, to - 1, to - from);
	for (uint32_t i = from; i < to; i++) {
		const char *m = frames[i].module ? basename_of(frames[i].module) : "?";
		bool dup = false;

		for (uint32_t j = 0; j < nseen; j++)
			dup |= !strcmp(seen[j], m);
		if (dup)
			continue;
		if (nseen == 3) {
			more = true;
			continue;
		}
		fprintf(f, "%s%s", nseen ? ", " : "", m);
		seen[nseen++] = m;
	}
	fprintf(f, "%s (--full-stacks shows them)\n", more ? ", ..." : "");
}

static void print_stack(FILE *f, uint32_t rank, const struct snap_stack *st,
			const struct text_opts *o)
{
	char b1[32], b2[32];
	uint32_t n = st->nframes;

	fprintf(f, "  [%u] %s %s in %llu allocation%s (%llu allocs, %llu frees, %s total) - %s",
		rank, class__name(st->cls), fmt_bytes(st->outstanding_bytes, b1, sizeof(b1)),
		(unsigned long long)st->outstanding_allocs, st->outstanding_allocs == 1 ? "" : "s",
		(unsigned long long)st->allocs, (unsigned long long)st->frees,
		fmt_bytes(st->alloc_bytes, b2, sizeof(b2)), st->verdict);
	if (st->why)
		fprintf(f, ": %s", st->why);
	fputc('\n', f);
	if (st->pattern)
		fprintf(f, "      hint: %s? %s; the usual fix: %s\n", st->pattern, st->evidence,
			st->fix);
	if (st->estimated)
		fprintf(f, "      sampled stack: about %s in %.0f blocks outstanding (estimated)\n",
			fmt_bytes(u64_of(st->estimated_bytes), b1, sizeof(b1)),
			st->estimated_allocs);
	if (st->unsampled)
		fprintf(f, "      blocks that drew no stack (sampling; their figures are exact)\n");
	if (st->nframes) {
		char site[256];

		report__site(st, site, sizeof(site));
		fprintf(f, "      at %s\n", site);
	}
	if (o->max_frames && n > o->max_frames) {
		uint32_t past = o->max_frames;

		/* plumbing past the limit folds into one line, no longer than a "more" line */
		while (!o->full_stacks && past < n && site__is_plumbing(&st->frames[past]))
			past++;
		n = past < n ? o->max_frames : n;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t end = i;

		/* past the allocating call, a run of plumbing is one line */
		while (!o->full_stacks && i && end < n && site__is_plumbing(&st->frames[end]))
			end++;
		if (end - i >= 2) {
			print_folded(f, st->frames, i, end);
			i = end - 1;
			continue;
		}
		print_frame(f, i, &st->frames[i]);
	}
	if (n < st->nframes)
		fprintf(f, "      ... %u more frame%s\n", st->nframes - n,
			st->nframes - n == 1 ? "" : "s");
}

static void print_proc_line(FILE *f, const struct snap_proc *p)
{
	char d[32], m[32], h[32], pk[32], comm[sizeof(p->comm)];

	/* any process may name itself with terminal escape sequences */
	for (size_t i = 0; i < sizeof(comm); i++) {
		unsigned char c = p->comm[i];

		comm[i] = c && (c < 0x20 || c == 0x7f) ? '?' : c;
	}
	comm[sizeof(comm) - 1] = '\0';
	fprintf(f,
		"PID %d %s (%s): device %s, managed %s, host_pinned %s in %llu allocation%s "
		"(peak device %s)\n",
		p->pid, comm, p->exited ? "exited" : "running",
		fmt_bytes(p->bytes[GL_CLASS_DEVICE], d, sizeof(d)),
		fmt_bytes(p->bytes[GL_CLASS_MANAGED], m, sizeof(m)),
		fmt_bytes(p->bytes[GL_CLASS_HOST_PINNED], h, sizeof(h)),
		(unsigned long long)p->outstanding_allocs, p->outstanding_allocs == 1 ? "" : "s",
		fmt_bytes(p->peak_device, pk, sizeof(pk)));
}

static void print_growth(FILE *f, const struct snap_proc *p)
{
	double t = p->projected_oom_s;
	char b[32];

	if (p->device_growth_bytes_per_s > 0) {
		fprintf(f, "  device memory growing %s/s",
			fmt_bytes(u64_of(p->device_growth_bytes_per_s), b, sizeof(b)));
		if (t >= 0 && t < 120)
			fprintf(f, "; at this rate its GPU memory is full in about %.0f s", t);
		else if (t >= 0 && t < 7200)
			fprintf(f, "; at this rate its GPU memory is full in about %.0f min",
				t / 60);
		else if (t >= 0)
			fprintf(f, "; at this rate its GPU memory is full in about %.0f h",
				t / 3600);
		fputc('\n', f);
	}
	if (p->pre_attach_valid && p->pre_attach_bytes)
		fprintf(f,
			"  %s of device memory not in these figures (NVML: held before attach, "
			"or by the CUDA context)\n",
			fmt_bytes(p->pre_attach_bytes, b, sizeof(b)));
}

/* behind: records from before the report were left unread (the report's WARNING says so) */
static void print_proc_notes(FILE *f, const struct snap_proc *p, bool behind)
{
	const char *books = behind ? "are behind" : "differ from";
	char b[32];

	print_growth(f, p);
	report__memory_text(f, p, "  ");

	if (p->nallocs[GL_CLASS_TORCH_BLOCK] || p->torch_reserved_bytes) {
		char a[32], r[32], c[32];
		uint64_t alloc = p->bytes[GL_CLASS_TORCH_BLOCK], res = p->torch_reserved_bytes;

		fprintf(f, "  PyTorch: %s allocated in %llu tensor blocks",
			fmt_bytes(alloc, a, sizeof(a)),
			(unsigned long long)p->nallocs[GL_CLASS_TORCH_BLOCK]);
		if (res)
			fprintf(f, "; %s reserved in segments (%s cached, not in tensors)",
				fmt_bytes(res, r, sizeof(r)),
				fmt_bytes(res > alloc ? res - alloc : 0, c, sizeof(c)));
		fputc('\n', f);
	}
	if (p->bytes[GL_CLASS_ADDRESS])
		fprintf(f, "  address space reserved: %s (not memory)\n",
			fmt_bytes(p->bytes[GL_CLASS_ADDRESS], b, sizeof(b)));
	if (p->unmatched_frees)
		fprintf(f,
			"  %llu free%s of memory allocated before gpuleak attached "
			"(not in these figures)\n",
			(unsigned long long)p->unmatched_frees, p->unmatched_frees == 1 ? "" : "s");
	if (p->failures)
		fprintf(f, "  %llu failed allocation%s (%llu out of memory)\n",
			(unsigned long long)p->failures, p->failures == 1 ? "" : "s",
			(unsigned long long)p->oom_failures);
	if (p->dropped_bytes)
		fprintf(f, "  %s freed by context teardown\n",
			fmt_bytes(p->dropped_bytes, b, sizeof(b)));
	if (p->bpf_valid && p->bpf.untracked_allocs)
		fprintf(f,
			"  WARNING: %llu allocation%s (%s) not in these figures: the kernel's "
			"allocation table was full (raise --max-allocs)\n",
			(unsigned long long)p->bpf.untracked_allocs,
			p->bpf.untracked_allocs == 1 ? "" : "s",
			fmt_bytes(p->bpf.untracked_bytes, b, sizeof(b)));
	if (p->unheld)
		fprintf(f,
			"  WARNING: %u mapping%s of a library (the last: %s) could not be held "
			"until the probes were in: the first calls after it may be missing\n",
			p->unheld, p->unheld == 1 ? "" : "s", p->unheld_lib);
	if (p->totals_from_kernel)
		fprintf(f,
			"  WARNING: these books %s the kernel's exact counters%s: "
			"the totals above are the kernel's; the stacks below are incomplete "
			"(they add up to %s of device memory)\n",
			books, behind ? " (records not read yet)" : "",
			fmt_bytes(p->attributed_bytes[GL_CLASS_DEVICE], b, sizeof(b)));
	else if (p->bpf_valid && !p->consistent)
		fprintf(f,
			"  WARNING: these books %s the kernel's exact counters "
			"(device %s there%s)\n",
			books, fmt_bytes(p->bpf.bytes[GL_CLASS_DEVICE], b, sizeof(b)),
			behind ? "; records not read yet" : "");
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* The first process that mapped a library it could not be held at, or NULL. */
static const struct snap_proc *first_unheld(const struct snapshot *s)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].unheld)
			return &s->procs[i];
	return NULL;
}

char *report__incomplete_why(const struct snapshot *s, char *buf, size_t len)
{
	const struct snap_proc *p;
	const uint64_t *st = s->stats;
	char b[32];
	int n = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	if (s->complete)
		return buf;
	if (s->lost_events)
		n = snprintf(buf, len,
			     "%llu events were lost (ring buffer full); figures "
			     "are incomplete: raise --ringbuf-size",
			     (unsigned long long)s->lost_events);
	else if (s->unread_bytes)
		n = snprintf(buf, len,
			     "gpuleak reads its ring buffer slower than the programs fill it: %s "
			     "of records from before this report were not read yet (1 s of "
			     "reading); the figures are behind the kernel's, a later report "
			     "catches up",
			     fmt_bytes(s->unread_bytes, b, sizeof(b)));
	else if (st[GL_STAT_ALLOC_TABLE_FULL] && s->cap_allocs)
		n = snprintf(buf, len,
			     "the kernel's allocation table (--max-allocs %u) was full: "
			     "%llu allocation%s (%s) are in no figure, and frees of them count as "
			     "unmatched; raise --max-allocs",
			     s->cap_allocs, (unsigned long long)s->untracked_allocs,
			     plural(s->untracked_allocs),
			     fmt_bytes(s->untracked_bytes, b, sizeof(b)));
	else if (st[GL_STAT_ALLOC_TABLE_FULL])
		n = snprintf(buf, len,
			     "the kernel's allocation table was full: %llu allocation%s "
			     "(%s) are in no figure; raise --max-allocs",
			     (unsigned long long)s->untracked_allocs, plural(s->untracked_allocs),
			     fmt_bytes(s->untracked_bytes, b, sizeof(b)));
	else if (s->procs_refused)
		n = snprintf(buf, len,
			     "more processes than --max-procs %u: %llu record%s of processes past "
			     "it dropped, those processes are in no figure; raise --max-procs",
			     s->cap_procs, (unsigned long long)s->procs_refused,
			     plural(s->procs_refused));
	else if (st[GL_STAT_INFLIGHT_FULL] || st[GL_STAT_NESTED_OVERFLOW])
		n = snprintf(buf, len,
			     "%llu call%s could not be followed (%llu with no room for "
			     "their thread's state, %llu nested deeper than %d); figures are "
			     "incomplete",
			     (unsigned long long)(st[GL_STAT_INFLIGHT_FULL] +
						  st[GL_STAT_NESTED_OVERFLOW]),
			     plural(st[GL_STAT_INFLIGHT_FULL] + st[GL_STAT_NESTED_OVERFLOW]),
			     (unsigned long long)st[GL_STAT_INFLIGHT_FULL],
			     (unsigned long long)st[GL_STAT_NESTED_OVERFLOW], GL_MAX_NEST);
	else if ((p = first_unheld(s)))
		n = snprintf(buf, len,
			     "PID %d (%s) mapped %s and could not be held until its probes were "
			     "in (more than --max-held processes held at once, the signal was "
			     "refused, the hold outlasted --hold-timeout, or it was continued by "
			     "another tracer or a SIGCONT): its first calls may be missing from "
			     "the figures",
			     p->pid, p->comm, p->unheld_lib);
	else if (s->limits.libs_refused)
		n = snprintf(buf, len,
			     "more than %u libcuda files mapped at once: %llu mapping%s of the "
			     "files past it %s not traced, and those processes are in no figure "
			     "(see the log for the files)",
			     s->limits.max_libs, (unsigned long long)s->limits.libs_refused,
			     plural(s->limits.libs_refused),
			     s->limits.libs_refused == 1 ? "is" : "are");
	else if (s->limits.py_refused)
		n = snprintf(buf, len,
			     "the table of Python processes (%u) was full: %llu process%s got no "
			     "Python frames (their stacks are native only; the figures are exact)",
			     s->limits.max_py_procs, (unsigned long long)s->limits.py_refused,
			     s->limits.py_refused == 1 ? "" : "es");
	else if (s->malformed)
		n = snprintf(buf, len,
			     "%llu malformed record%s dropped; figures are "
			     "incomplete",
			     (unsigned long long)s->malformed, plural(s->malformed));
	else
		n = snprintf(buf, len,
			     "the books disagree with the kernel's exact counters: the "
			     "totals are the kernel's, the stacks are incomplete (see \"bpf\" in "
			     "--json)");
	if (n < 0 || (size_t)n >= len)
		buf[len - 1] = '\0';
	return buf;
}

static void print_failures(FILE *f, const struct snap_proc *p)
{
	char b1[32], b2[32];

	for (uint32_t i = 0; i < p->nfailures; i++) {
		const struct snap_failure *fl = &p->failures_list[i];

		fprintf(f, "  failed: %s(%s) -> %s with %s of device memory held\n", fl->api,
			fmt_bytes(fl->bytes, b1, sizeof(b1)), fl->error,
			fmt_bytes(fl->held_device, b2, sizeof(b2)));
		report__oom_text(f, fl, "    ");
		for (uint32_t j = 0; fl->stack && j < fl->stack->nframes && j < 8; j++)
			print_frame(f, j, &fl->stack->frames[j]);
		for (uint32_t h = 0; h < fl->nholders; h++) {
			const struct snap_stack *hs = &fl->holders[h];

			fprintf(f, "    holder %u: %s in %llu allocation%s\n", h + 1,
				fmt_bytes(hs->outstanding_bytes, b1, sizeof(b1)),
				(unsigned long long)hs->outstanding_allocs,
				hs->outstanding_allocs == 1 ? "" : "s");
			for (uint32_t j = 0; j < hs->nframes && j < 6; j++)
				print_frame(f, j, &hs->frames[j]);
		}
	}
}

/* What the tensor-level figures above and below cover, in words. */
static void print_tensors(FILE *f, const struct snap_proc *p, const struct snap_tensors *t)
{
	const struct snap_window *w = t && t->nwindows ? &t->windows[t->nwindows - 1] : NULL;

	if (!t || (!p->nallocs[GL_CLASS_TORCH_BLOCK] && !p->torch_reserved_bytes))
		return;
	if (!strcmp(t->coverage, "complete")) {
		fprintf(f, "  tensor blocks: complete (every block since tracing started%s)\n",
			strcmp(t->mode, "full") ? ", in the first window, still open" : "");
	} else if (!strcmp(t->coverage, "sampled")) {
		fprintf(f, "  tensor blocks: every block since tracing started (totals exact)\n");
	} else if (!strcmp(t->coverage, "none")) {
		fprintf(f, "  tensor blocks: not traced (--tensors off)\n");
	} else if (w && t->armed) {
		fprintf(f,
			"  tensor blocks: windowed: traced now, in window %llu (from %.1f s, "
			"opened on %s); their figures and verdicts cover this window only\n",
			(unsigned long long)t->windows_total, w->start_s, w->why);
	} else if (w) {
		fprintf(f,
			"  tensor blocks: windowed: as of the end of window %llu (%.1f-%.1f s, "
			"opened on %s), not traced since; %.1f s traced in %llu window%s. "
			"Driver-level figures are exact and current\n",
			(unsigned long long)t->windows_total, w->start_s, w->end_s, w->why,
			t->armed_s, (unsigned long long)t->windows_total,
			t->windows_total == 1 ? "" : "s");
	}
	if (t->sample_bytes) {
		char b[32];

		fprintf(f,
			"  tensor-block stacks: a byte-weighted sample, one per %s on average; "
			"per-stack figures of sampled stacks are estimates\n",
			fmt_bytes(t->sample_bytes, b, sizeof(b)));
	}
}

int report__text(FILE *f, const struct snapshot *s, const struct text_opts *o)
{
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		uint32_t shown = 0;

		print_proc_line(f, p);
		if (o->summary)
			continue;
		print_proc_notes(f, p, s->unread_bytes != 0);
		report__gpus_text(f, s, p);
		print_tensors(f, p, p->tensors_known ? &p->tensors : NULL);
		for (uint32_t j = 0; j < p->nstacks; j++) {
			if (!report__is_memory_class(p->stacks[j].cls))
				continue;
			if (o->max_stacks && shown >= o->max_stacks) {
				uint32_t more = 0;

				for (uint32_t k = j; k < p->nstacks; k++)
					more += report__is_memory_class(p->stacks[k].cls);
				fprintf(f, "  ... %u more stacks\n", more);
				break;
			}
			print_stack(f, ++shown, &p->stacks[j], o);
		}
		print_failures(f, p);
		fputc('\n', f);
	}
	if (!o->summary)
		report__jobs_text(f, s);
	if (!s->nprocs)
		fprintf(f, "no CUDA allocations seen\n");
	if (s->nprocs_idle)
		fprintf(f, "%u other process%s traced made no CUDA call: not shown\n",
			s->nprocs_idle, s->nprocs_idle == 1 ? "" : "es");
	if (!s->complete) {
		char why[320];

		fprintf(f, "WARNING: %s.\n", report__incomplete_why(s, why, sizeof(why)));
	}
	if (s->stack_overflows)
		fprintf(f,
			"NOTE: more distinct stacks than --max-stacks %u: %llu allocation%s "
			"counted under one \"other stacks\" entry (totals exact)\n",
			s->cap_stacks, (unsigned long long)s->stack_overflows,
			plural(s->stack_overflows));
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}
