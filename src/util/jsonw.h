/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * jsonw.h - a streaming JSON writer: callers open objects and arrays, name
 * fields and write values; commas, escaping and indentation are its business.
 */
#ifndef GL_JSONW_H
#define GL_JSONW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct jsonw;

/* Writes to f (not owned). pretty: two-space indentation. NULL with errno on failure. */
struct jsonw *jsonw__new(FILE *f, bool pretty);
/* Ends the document with a newline; returns 0 or -EIO if any write failed. */
int jsonw__free(struct jsonw *w);

void jsonw__start_object(struct jsonw *w);
void jsonw__end_object(struct jsonw *w);
void jsonw__start_array(struct jsonw *w);
void jsonw__end_array(struct jsonw *w);
void jsonw__name(struct jsonw *w, const char *name);
void jsonw__string(struct jsonw *w, const char *s);
void jsonw__u64(struct jsonw *w, uint64_t v);
void jsonw__s64(struct jsonw *w, int64_t v);
void jsonw__double(struct jsonw *w, double v);
void jsonw__bool(struct jsonw *w, bool v);
void jsonw__null(struct jsonw *w);

/* name + value in one call */
void jsonw__field_string(struct jsonw *w, const char *name, const char *s);
void jsonw__field_u64(struct jsonw *w, const char *name, uint64_t v);
void jsonw__field_s64(struct jsonw *w, const char *name, int64_t v);
void jsonw__field_double(struct jsonw *w, const char *name, double v);
void jsonw__field_bool(struct jsonw *w, const char *name, bool v);

/* Writes s as a JSON string literal (quotes included) to f. */
void json_escape(FILE *f, const char *s);

#endif /* GL_JSONW_H */
