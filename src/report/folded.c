// SPDX-License-Identifier: BSD-2-Clause
/*
 * folded.c - folded stacks ("a;b;c 123") of outstanding bytes, the input of
 * flamegraph.pl, inferno and speedscope, and the frame names that the flame
 * graph shares with them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"

#define NAME_MAX_LEN 2048

struct line {
	char *text;
	uint64_t bytes;
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

char *report__frame_name(const struct snap_frame *fr, char *buf, size_t len)
{
	int n;

	if (!len)
		return buf;
	if (fr->kind[0] == 'p')
		n = snprintf(buf, len, "%s (%s:%d)", fr->function ?: "?", fr->file ?: "?",
			     fr->line);
	else if (fr->function)
		n = snprintf(buf, len, "%s", fr->function);
	else if (fr->module)
		n = snprintf(buf, len, "%s+0x%llx", base_name(fr->module),
			     (unsigned long long)fr->offset);
	else
		n = snprintf(buf, len, "0x%llx", (unsigned long long)fr->address);
	if (n < 0)
		buf[0] = '\0';
	else if ((size_t)n >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}

/* Writes a name with the characters folded stacks cannot carry replaced. */
static void put_name(FILE *f, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		unsigned char c = *s;

		if (c != ';' && c >= 0x20 && c != 0x7f)
			continue;
		fwrite(run, 1, s - run, f);
		fputc(c == ';' ? ':' : '?', f);
		run = s + 1;
	}
	fwrite(run, 1, s - run, f);
}

static int fold_stack(const struct snap_proc *p, const struct snap_stack *st, struct line *out)
{
	char name[NAME_MAX_LEN], root[64];
	size_t size = 0;
	char *text = NULL;
	FILE *m;

	m = open_memstream(&text, &size);
	if (!m)
		return -ENOMEM;
	snprintf(root, sizeof(root), "%s (%d)", p->comm, p->pid);
	put_name(m, root);
	for (uint32_t i = st->nframes; i-- > 0;) {
		fputc(';', m);
		put_name(m, report__frame_name(&st->frames[i], name, sizeof(name)));
	}
	if (fclose(m) || !text) {
		free(text);
		return -ENOMEM;
	}
	out->text = text;
	out->bytes = st->outstanding_bytes;
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

static bool shown(enum report_draw rule, const struct snap_stack *st, bool leak_only)
{
	return report__drawn(rule, st) && st->outstanding_bytes &&
	       (!leak_only || !strcmp(st->verdict, "leak"));
}

int report__folded(FILE *f, const struct snapshot *s, const struct folded_opts *o)
{
	struct line *lines = NULL;
	size_t n = 0, cap = 0;
	int err = 0;

	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		enum report_draw rule = report__draw_rule(p);

		for (uint32_t j = 0; j < p->nstacks; j++) {
			if (!shown(rule, &p->stacks[j], o->leak_only))
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct line *nl = realloc(lines, ncap * sizeof(*nl));

				if (!nl) {
					err = -ENOMEM;
					goto cleanup;
				}
				lines = nl;
				cap = ncap;
			}
			err = fold_stack(p, &p->stacks[j], &lines[n]);
			if (err)
				goto cleanup;
			n++;
		}
	}
	if (n)
		qsort(lines, n, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < n; i++) {
		uint64_t bytes = lines[i].bytes;

		while (i + 1 < n && !strcmp(lines[i].text, lines[i + 1].text))
			bytes += lines[++i].bytes;
		fprintf(f, "%s %llu\n", lines[i].text, (unsigned long long)bytes);
	}
	if (fflush(f) || ferror(f))
		err = -EIO;
cleanup:
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	return err;
}
