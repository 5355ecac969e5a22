// SPDX-License-Identifier: BSD-2-Clause
/*
 * census_books.c - a process's books as the census joins them: its
 * outstanding PyTorch blocks and driver allocations of device memory, each
 * with the line that allocated it and its stack's verdict; and the census of
 * a process held at its out-of-memory failure (--census-on-oom).
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
#include "snapshot.h"
#include "tiers.h"
#include "trace/loader.h"
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

void session__set_census_hook(struct session *s, session_census_fn fn)
{
	s->census_fn = fn;
}

/* The census of pid into ic's memory (text and JSON); an exit status, -1 if not run. */
static int census_into(struct session *s, int pid, uint64_t max_ns, struct incident_census *ic)
{
	struct census_caps caps = { .max_objects = 4000000,
				    .max_read_bytes = 1ULL << 30,
				    .max_ns = max_ns };
	struct census_books books;
	FILE *text, *json;
	int status = -1;

	if (session__census_books(s, pid, &books))
		return -1;
	text = open_memstream(&ic->text, &ic->text_len);
	json = open_memstream(&ic->json, &ic->json_len);
	ic->sum = calloc(1, sizeof(*ic->sum));
	if (text && json && ic->sum)
		status = s->census_fn(pid, text, json, true, &caps, &books, ic->sum);
	if (text)
		fclose(text);
	if (json)
		fclose(json);
	session__census_books_free(&books);
	return status;
}

void session__census_held(struct session *s, int pid, struct incident_census *ic)
{
	uint64_t timeout = tracer__hold_timeout(s->tracer), since = 0, ns;
	bool held, by_kernel = false;
	int status = -1;

	/* gone already: the hold's deadline let it go before gpuleak read the record (a
	 * gpuleak frozen, or far behind) */
	held = !tracer__held_since(s->tracer, pid, &since);
	if (!held)
		ic->past_deadline = tracer__hold_expired(s->tracer, pid, &ns, &by_kernel);
	/* half the deadline for the read: stopping the threads and writing take the rest */
	if (s->census_fn)
		status = census_into(s, pid, timeout / 2, ic);
	if (held && !tracer__release(s->tracer, pid))
		ic->past_deadline = tracer__hold_expired(s->tracer, pid, &ns, &by_kernel);
	ic->held = held || ic->past_deadline;
	ic->held_ns = held && !ic->past_deadline ? now_ns() - since : 0;
	ic->taken = status == 0 && ic->json_len;
	if (ic->past_deadline)
		snprintf(ic->note, sizeof(ic->note),
			 "%s: the process was held at its failure until the hold's deadline "
			 "(--hold-timeout %.1f s) let it go, before the census was done%s",
			 ic->taken ? "taken" : "not taken", timeout / 1e9,
			 ic->taken ? ": read while it ran on, it may be torn" : "");
	else if (ic->taken)
		snprintf(ic->note, sizeof(ic->note),
			 "taken while the process was held at its failure: held %.1f ms",
			 ic->held_ns / 1e6);
	else
		snprintf(ic->note, sizeof(ic->note),
			 "not taken: the census of the held process failed (gpuleak's log says "
			 "why: no CPython, or PyTorch's layout not verified); it was held %.1f ms",
			 ic->held_ns / 1e6);
	if (!ic->taken) {
		free(ic->json);
		free(ic->text);
		ic->json = ic->text = NULL;
		ic->json_len = ic->text_len = 0;
		snap_census__free(ic->sum);
		ic->sum = NULL;
	}
}
