// SPDX-License-Identifier: BSD-2-Clause
/*
 * jsonw.c - streaming JSON writer. Invalid UTF-8 and control characters are
 * escaped so that the output always parses.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include "jsonw.h"

#define JSONW_MAX_DEPTH 64

struct jsonw {
	FILE *f;
	bool pretty;
	int depth;
	bool first[JSONW_MAX_DEPTH]; /* nothing written yet at this level */
	bool after_name;
};

struct jsonw *jsonw__new(FILE *f, bool pretty)
{
	struct jsonw *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->f = f;
	w->pretty = pretty;
	w->first[0] = true;
	return w;
}

int jsonw__free(struct jsonw *w)
{
	int err = 0;

	if (!w)
		return 0;
	fputc('\n', w->f);
	if (fflush(w->f) || ferror(w->f))
		err = -EIO;
	free(w);
	return err;
}

static void newline(struct jsonw *w)
{
	if (!w->pretty)
		return;
	fputc('\n', w->f);
	for (int i = 0; i < w->depth; i++)
		fputs("  ", w->f);
}

/* Separator before a value or a name at the current level. */
static void begin_item(struct jsonw *w)
{
	if (w->after_name) {
		w->after_name = false;
		return;
	}
	if (!w->first[w->depth])
		fputc(',', w->f);
	w->first[w->depth] = false;
	if (w->depth > 0)
		newline(w);
}

static void open_level(struct jsonw *w, char c)
{
	begin_item(w);
	fputc(c, w->f);
	if (w->depth < JSONW_MAX_DEPTH - 1)
		w->depth++;
	w->first[w->depth] = true;
}

static void close_level(struct jsonw *w, char c)
{
	bool empty = w->first[w->depth];

	if (w->depth > 0)
		w->depth--;
	if (!empty)
		newline(w);
	fputc(c, w->f);
}

void jsonw__start_object(struct jsonw *w)
{
	open_level(w, '{');
}

void jsonw__end_object(struct jsonw *w)
{
	close_level(w, '}');
}

void jsonw__start_array(struct jsonw *w)
{
	open_level(w, '[');
}

void jsonw__end_array(struct jsonw *w)
{
	close_level(w, ']');
}

void json_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	for (; *p; p++) {
		unsigned char c = *p;

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
		} else if (c >= 0x80) {
			/*
			 * pass well-formed UTF-8 through, escape stray bytes; the second
			 * byte's range rules out overlongs, surrogates and > U+10FFFF
			 */
			int n = c >= 0xc2 && c <= 0xdf ? 1 :
				c >= 0xe0 && c <= 0xef ? 2 :
				c >= 0xf0 && c <= 0xf4 ? 3 :
							 -1;
			unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
			unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
			int i;

			for (i = 1; n > 0 && i <= n; i++)
				if ((p[i] & 0xc0) != 0x80 || (i == 1 && (p[1] < lo || p[1] > hi)))
					break;
			if (n < 0 || i <= n) {
				fprintf(f, "\\u%04x", c);
				continue;
			}
			fwrite(p, 1, n + 1, f);
			p += n;
		} else {
			fputc(c, f);
		}
	}
	fputc('"', f);
}

void jsonw__name(struct jsonw *w, const char *name)
{
	begin_item(w);
	json_escape(w->f, name);
	fputs(w->pretty ? ": " : ":", w->f);
	w->after_name = true;
}

void jsonw__string(struct jsonw *w, const char *s)
{
	begin_item(w);
	if (s)
		json_escape(w->f, s);
	else
		fputs("null", w->f);
}

void jsonw__u64(struct jsonw *w, uint64_t v)
{
	begin_item(w);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jsonw__s64(struct jsonw *w, int64_t v)
{
	begin_item(w);
	fprintf(w->f, "%lld", (long long)v);
}

void jsonw__double(struct jsonw *w, double v)
{
	begin_item(w);
	if (isfinite(v))
		fprintf(w->f, "%.6g", v);
	else
		fputs("null", w->f);
}

void jsonw__bool(struct jsonw *w, bool v)
{
	begin_item(w);
	fputs(v ? "true" : "false", w->f);
}

void jsonw__null(struct jsonw *w)
{
	begin_item(w);
	fputs("null", w->f);
}

void jsonw__field_string(struct jsonw *w, const char *name, const char *s)
{
	jsonw__name(w, name);
	jsonw__string(w, s);
}

void jsonw__field_u64(struct jsonw *w, const char *name, uint64_t v)
{
	jsonw__name(w, name);
	jsonw__u64(w, v);
}

void jsonw__field_s64(struct jsonw *w, const char *name, int64_t v)
{
	jsonw__name(w, name);
	jsonw__s64(w, v);
}

void jsonw__field_double(struct jsonw *w, const char *name, double v)
{
	jsonw__name(w, name);
	jsonw__double(w, v);
}

void jsonw__field_bool(struct jsonw *w, const char *name, bool v)
{
	jsonw__name(w, name);
	jsonw__bool(w, v);
}
