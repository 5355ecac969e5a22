// SPDX-License-Identifier: BSD-2-Clause
/*
 * census_books.c - a process's books as the census joins them: its
 * outstanding PyTorch blocks and driver allocations of device memory, each
 * with the line that allocated it (a stack's site, as the reports and the
 * warnings name it) and its stack's verdict.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "books/analysis.h"
#include "books/books.h"
#include "books/procs.h"
#include "census/join.h"
#include "session.h"
#include "session_int.h"
#include "model/site.h"
#include "model/snapshot.h"
#include "tiers.h"
#include "util/clock.h"
#include "util/htab.h"

/* Per stack: where its site's text starts in the arena, and whether it leaks. */
struct site_ref {
	size_t off;
	bool leak;
};

static bool joined_kind(const struct alloc_key *k, const struct alloc_val *v)
{
	if (v->cls == GL_CLASS_TORCH_BLOCK)
		return k->kind == GL_KIND_TORCH;
	return v->cls == GL_CLASS_DEVICE && (k->kind == GL_KIND_DPTR || k->kind == GL_KIND_MAPPING);
}

/* The site of each stack with outstanding memory, into the arena once. */
static int collect_sites(struct session *s, const struct proc *proc, struct htab *refs,
			 char **arena, size_t *len)
{
	const struct agg_key *k;
	const struct agg *a;
	uint64_t now = now_ns();
	size_t it = 0, cap = 0;

	while ((a = proc__next_agg(proc, &it, &k))) {
		struct site_ref *r;
		struct verdict_info vi;
		bool created;
		char buf[256];
		size_t n;

		if (!a->bytes)
			continue;
		r = htab__upsert(refs, &k->stack, &created);
		if (!r)
			return -ENOMEM;
		series__classify(a->series, now, &vi);
		if (vi.verdict == VERDICT_LEAK)
			r->leak = true;
		if (!created)
			continue;
		session__describe_site(s, k->stack, buf, sizeof(buf));
		n = strlen(buf) + 1;
		if (*len + n > cap) {
			size_t c = (cap ? cap * 2 : 4096) + n;
			char *p = realloc(*arena, c);

			if (!p)
				return -ENOMEM;
			*arena = p;
			cap = c;
		}
		memcpy(*arena + *len, buf, n);
		r->off = *len;
		*len += n;
	}
	return 0;
}

void session__describe_site(struct session *s, uint32_t id, char *buf, size_t len)
{
	struct snap_stack st = { 0 };
	const struct snap_frame *f = NULL;

	if (snap_stacks__frames(s->books, s->sym, s->python, id, &st) == 0)
		f = site__pick(&st);
	if (f && f->kind[0] == 'p' && !f->function && !f->file)
		snprintf(buf, len, "a Python frame whose code gpuleak could not read");
	else if (f && f->kind[0] == 'p')
		snprintf(buf, len, "%s (%s:%d)", f->function ? f->function : "?",
			 f->file ? f->file : "?", f->line);
	else if (f && f->function)
		snprintf(buf, len, "%s", f->function);
	else
		snprintf(buf, len, "an unknown site");
	free(st.frames);
}

int session__census_books(struct session *s, int pid, struct census_books *out)
{
	struct proc *proc = procs__find_pid(books__procs(s->books), pid);
	struct snap_tensors view, *tv = s->tiers ? &view : NULL;
	struct htab *refs = NULL;
	const struct alloc_key *k;
	const struct alloc_val *v;
	size_t it = 0, len = 0, cap = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (!proc || !proc__live(proc))
		return 0; /* never seen, or its tables are gone: not traced */
	out->traced = true;
	if (tv)
		tiers__proc_view(s->tiers, pid, now_ns(), tv);
	out->blocks_windowed = tv && tv->mode && !strcmp(tv->mode, "windowed");
	out->window_open = tv && tv->armed;
	refs = htab__new(sizeof(uint32_t), sizeof(struct site_ref));
	if (!refs || collect_sites(s, proc, refs, &out->sites, &len))
		goto cleanup;
	while ((v = proc__next_alloc(proc, &it, &k))) {
		const struct site_ref *r;

		if (!joined_kind(k, v))
			continue;
		if (out->n == cap) {
			size_t c = cap ? cap * 2 : 256;
			struct census_book *p = realloc(out->v, c * sizeof(*p));

			if (!p)
				goto cleanup;
			out->v = p;
			cap = c;
		}
		r = htab__lookup(refs, &v->stack);
		out->v[out->n++] = (struct census_book){
			.addr = k->key,
			.size = v->size,
			.block = v->cls == GL_CLASS_TORCH_BLOCK,
			.leak = r && r->leak,
			.site = r && out->sites ? out->sites + r->off : "an unknown site",
		};
	}
	census__join_prepare(out);
	err = 0;
cleanup:
	htab__free(refs);
	if (err)
		session__census_books_free(out);
	return err;
}

void session__census_books_free(struct census_books *b)
{
	if (!b)
		return;
	free(b->v);
	free(b->sites);
	memset(b, 0, sizeof(*b));
}
