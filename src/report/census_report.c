// SPDX-License-Identifier: BSD-2-Clause
/*
 * census_report.c - the census of one process (census/), joined with the books, as text
 * and as JSON: every tensor, its group and holders, and the line that allocated it.
 */
#include <stdio.h>
#include <string.h>
#include "census_report.h"
#include "util/fmt.h"
#include "util/jsonw.h"

static const char *rg_text(enum census_rg rg)
{
	return rg == CENSUS_RG_YES ? "yes" : rg == CENSUS_RG_NO ? "no" : "unknown";
}

static void print_shape(FILE *f, const struct census_tensor *t)
{
	fputc('[', f);
	for (int k = 0; k < t->ndim; k++)
		fprintf(f, "%s%lld", k ? ", " : "", (long long)t->sizes[k]);
	fputc(']', f);
}

static void text_allocation(FILE *f, const struct census_report *o, const struct census_join *j)
{
	if (j->kind == CENSUS_JOIN_UNVERIFIED || j->kind == CENSUS_JOIN_NO_BOOKS)
		return; /* said once, above */
	if (j->book)
		fprintf(f, "      allocated at %s (%s%s)%s%s\n", j->book->site,
			j->book->block ? "a PyTorch block" : "a driver allocation",
			j->book->leak ? ", judged to leak" : "", j->book->block ? "" : ": ",
			j->book->block ? "" : census__join_why(o->books, j));
	else
		fprintf(f, "      no allocation line: %s\n", census__join_why(o->books, j));
}

static void text_tensor(FILE *f, const struct census_report *o, const struct census *c,
			const struct census_tensor *t, const struct census_join *j)
{
	char b[32];

	fprintf(f, "  0x%llx %s", (unsigned long long)t->obj, t->type);
	if (c->layout_ok && t->storage) {
		fprintf(f, " %s ", census__dtype_name(t->dtype) ?: "?");
		if (t->ndim >= 0)
			print_shape(f, t);
		else
			fputs("[>5 dims]", f);
		fprintf(f, " %s", census__device_name(t->dev_type));
		if (t->dev_index >= 0)
			fprintf(f, ":%d", t->dev_index);
		fprintf(f, ", storage 0x%llx of %s at 0x%llx, requires_grad %s%s%s",
			(unsigned long long)t->storage, fmt_bytes(t->nbytes, b, sizeof(b)),
			(unsigned long long)t->data, rg_text(t->requires_grad),
			t->grad_fn ? ", has grad_fn" : "",
			t->cpp_owned ? ", kept alive from C++" : "");
	}
	fputc('\n', f);
	for (int h = 0; h < t->nr_holders; h++)
		fprintf(f, "      held by %s\n", t->holders[h]);
	if (!t->nr_holders)
		fputs("      no Python holder found\n", f);
	text_allocation(f, o, j);
}

/* The leaking sites beside the holders of their tensors; the tensors from before attach. */
static void text_join(FILE *f, const struct census_report *o, const struct census *c)
{
	const struct census_joined *jd = &o->joined;
	char b[32], reading[512];

	if (!c->nr_tensors || !c->layout_ok)
		return;
	if (!o->books || !o->books->traced) {
		fputs("  allocation lines: none: gpuleak did not trace the process (attach "
		      "--census joins each tensor with the line that allocated it)\n",
		      f);
		return;
	}
	fprintf(f, "  joined with gpuleak's books: %d of %zu tensors in an allocation seen%s\n",
		jd->joined_tensors, c->nr_tensors,
		o->books->blocks_windowed ?
			(o->books->window_open ? " (tensor level in windows, one open now)" :
						 " (tensor level in windows, none open now: "
						 "blocks made outside them are not known)") :
			"");
	if (jd->pre_attach_tensors)
		fprintf(f,
			"  %d tensor%s (%s) hold device memory from before the attach: in no "
			"allocation gpuleak saw\n",
			jd->pre_attach_tensors, jd->pre_attach_tensors == 1 ? "" : "s",
			fmt_bytes(jd->pre_attach_bytes, b, sizeof(b)));
	if (jd->nr_leaks)
		fputs("\nleaks and what holds them (allocated at -> held by):\n", f);
	for (size_t i = 0; i < jd->nr_leaks; i++) {
		const struct census_leak *l = &jd->leaks[i];

		fprintf(f, "  %s -> ", l->site);
		for (int h = 0; h < l->nr_holders; h++)
			fprintf(f, "%s%s", h ? ", " : "", l->holders[h]);
		if (l->no_holder)
			fprintf(f, "%s%d with no Python holder", l->nr_holders ? "; " : "",
				l->no_holder);
		fprintf(f, " (%d tensor%s, %s)\n", l->tensors, l->tensors == 1 ? "" : "s",
			fmt_bytes(l->bytes, b, sizeof(b)));
		census__leak_reading(c, l, reading, sizeof(reading));
		fprintf(f, "    %s\n", reading);
	}
}

void report__census_text(FILE *f, const struct census_report *o, const struct census *c,
			 const struct census_pause *p)
{
	char b1[32], b2[32];

	fprintf(f, "census of PID %d: CPython 3.%d, %zu tensors", o->pid, c->minor, c->nr_tensors);
	if (c->layout_ok)
		fprintf(f, " in %zu storages, %s", c->nr_storages,
			fmt_bytes(c->bytes, b1, sizeof(b1)));
	fputc('\n', f);
	if (o->pause)
		fprintf(f, "  paused %.1f ms (%d threads held with ptrace)\n", p->ns / 1e6,
			p->held);
	else
		fputs("  not paused: the process ran while it was read, figures may be torn\n", f);
	fprintf(f,
		"  read %llu objects (cap %llu), %s of memory (cap %s) in %.1f ms (cap %llu ms)%s%s\n",
		(unsigned long long)c->objects_visited, (unsigned long long)o->caps.max_objects,
		fmt_bytes(c->bytes_read, b1, sizeof(b1)),
		fmt_bytes(o->caps.max_read_bytes, b2, sizeof(b2)), c->elapsed_ns / 1e6,
		(unsigned long long)(o->caps.max_ns / 1000000),
		c->truncated_by ? "; stopped at the cap on " : "", c->truncated_by ?: "");
	if (c->torn)
		fputs("  the collector's lists changed while read: some objects may be missing\n",
		      f);
	if (c->nr_tensors && c->layout_ok)
		fprintf(f,
			"  PyTorch layout checked on %d tensors (TensorImpl +%d points back at "
			"the tensor, sizes at +%d, StorageImpl data +%d, size +%d)%s\n",
			c->tensors_checked, c->off_pyobj, c->off_sizes, c->off_st_data,
			c->off_st_nbytes,
			c->tensors_failed ? "; some tensors contradicted it" : "");
	else if (c->nr_tensors)
		fprintf(f, "  no storage, size, dtype or shape shown: %s\n", c->layout_error);
	text_join(f, o, c);
	if (c->nr_groups)
		fputs("\nholders:\n", f);
	for (size_t i = 0; i < c->nr_groups; i++) {
		const struct census_group *g = &c->groups[i];

		fprintf(f, "  %d tensor%s", g->tensors, g->tensors == 1 ? "" : "s");
		if (c->layout_ok)
			fprintf(f, ", %s", fmt_bytes(g->bytes, b1, sizeof(b1)));
		fprintf(f, ", held by %s", g->path);
		if (g->length || !strcmp(g->kind, "list") || !strcmp(g->kind, "tuple") ||
		    !strcmp(g->kind, "dict"))
			fprintf(f, " (a %s of %llu)\n", g->kind, (unsigned long long)g->length);
		else
			fprintf(f, " (%s)\n", g->kind);
	}
	if (c->orphan_tensors) {
		fprintf(f, "  %d tensor%s", c->orphan_tensors, c->orphan_tensors == 1 ? "" : "s");
		if (c->layout_ok)
			fprintf(f, ", %s", fmt_bytes(c->orphan_bytes, b1, sizeof(b1)));
		fprintf(f, ": no Python holder found%s; may be held by an autograd graph",
			c->truncated_by ? " before the walk stopped at its cap" : "");
		for (size_t i = 0; i < c->nr_graphs; i++)
			fprintf(f, "%s%s",
				i ? ", " : " (graphs reachable from Python: ", c->graphs[i]);
		fputs(c->nr_graphs ? ")\n" : "\n", f);
	}
	if (c->nr_not_entered) {
		uint64_t more = c->not_entered_other;
		int shown = c->nr_not_entered < 6 ? c->nr_not_entered : 6;

		for (int i = shown; i < c->nr_not_entered; i++)
			more += c->not_entered[i].refs;
		fputs("  references not followed, to objects the walk does not enter (a tensor "
		      "only these hold shows with no Python holder):",
		      f);
		for (int i = 0; i < shown; i++)
			fprintf(f, "%s %llu to %s", i ? "," : "",
				(unsigned long long)c->not_entered[i].refs, c->not_entered[i].type);
		if (more)
			fprintf(f, ", %llu to others", (unsigned long long)more);
		fputc('\n', f);
	}
	if (c->nr_tensors)
		fputs("\ntensors:\n", f);
	for (size_t i = 0; i < c->nr_tensors; i++)
		text_tensor(f, o, c, &c->tensors[i], &o->joined.tensors[i]);
}

static void json_allocation(struct jsonw *j, const struct census_report *o,
			    const struct census_join *jn)
{
	jsonw__name(j, "allocation");
	jsonw__start_object(j);
	jsonw__field_string(j, "join", census__join_name(jn->kind));
	jsonw__name(j, "site");
	if (jn->book)
		jsonw__string(j, jn->book->site);
	else
		jsonw__null(j);
	jsonw__name(j, "allocation_address");
	if (jn->book)
		jsonw__u64(j, jn->book->addr);
	else
		jsonw__null(j);
	jsonw__field_bool(j, "leak", jn->book && jn->book->leak);
	jsonw__field_bool(j, "pre_attach", jn->kind == CENSUS_JOIN_PRE_ATTACH);
	jsonw__name(j, "why");
	if (census__join_why(o->books, jn))
		jsonw__string(j, census__join_why(o->books, jn));
	else
		jsonw__null(j);
	jsonw__end_object(j);
}

static void json_join(struct jsonw *j, const struct census_report *o, const struct census *c)
{
	const struct census_joined *jd = &o->joined;
	char reading[512];

	jsonw__name(j, "join");
	jsonw__start_object(j);
	jsonw__field_bool(j, "books", o->books && o->books->traced);
	jsonw__field_bool(j, "tensor_windows", o->books && o->books->blocks_windowed);
	jsonw__field_bool(j, "window_open", o->books && o->books->window_open);
	jsonw__field_s64(j, "tensors_joined", jd->joined_tensors);
	jsonw__field_s64(j, "pre_attach_tensors", jd->pre_attach_tensors);
	jsonw__field_u64(j, "pre_attach_bytes", jd->pre_attach_bytes);
	jsonw__name(j, "leaks");
	jsonw__start_array(j);
	for (size_t i = 0; i < jd->nr_leaks; i++) {
		const struct census_leak *l = &jd->leaks[i];

		jsonw__start_object(j);
		jsonw__field_string(j, "site", l->site);
		jsonw__field_s64(j, "tensors", l->tensors);
		jsonw__field_s64(j, "storages", l->storages);
		jsonw__field_u64(j, "bytes", l->bytes);
		jsonw__name(j, "holders");
		jsonw__start_array(j);
		for (int h = 0; h < l->nr_holders; h++)
			jsonw__string(j, l->holders[h]);
		jsonw__end_array(j);
		jsonw__field_s64(j, "no_holder", l->no_holder);
		census__leak_reading(c, l, reading, sizeof(reading));
		jsonw__field_string(j, "reading", reading);
		jsonw__end_object(j);
	}
	jsonw__end_array(j);
	jsonw__end_object(j);
}

static void json_tensor(struct jsonw *j, const struct census_report *o, const struct census *c,
			const struct census_tensor *t, const struct census_join *jn)
{
	bool figures = c->layout_ok && t->storage;

	jsonw__start_object(j);
	jsonw__field_u64(j, "address", t->obj);
	jsonw__field_string(j, "type", t->type);
	if (figures) {
		jsonw__field_u64(j, "storage", t->storage);
		jsonw__field_u64(j, "data", t->data);
		jsonw__field_u64(j, "storage_bytes", t->nbytes);
		jsonw__field_string(j, "device", census__device_name(t->dev_type));
		jsonw__field_s64(j, "device_index", t->dev_index);
		jsonw__name(j, "dtype");
		if (census__dtype_name(t->dtype))
			jsonw__string(j, census__dtype_name(t->dtype));
		else
			jsonw__null(j);
		jsonw__name(j, "shape");
		if (t->ndim >= 0) {
			jsonw__start_array(j);
			for (int k = 0; k < t->ndim; k++)
				jsonw__s64(j, t->sizes[k]);
			jsonw__end_array(j);
			jsonw__field_s64(j, "numel", t->numel);
			jsonw__field_s64(j, "storage_offset", t->storage_offset);
		} else {
			jsonw__null(j);
		}
		jsonw__name(j, "requires_grad");
		if (t->requires_grad == CENSUS_RG_UNKNOWN)
			jsonw__null(j);
		else
			jsonw__bool(j, t->requires_grad == CENSUS_RG_YES);
		jsonw__field_bool(j, "grad_fn", t->grad_fn);
		jsonw__field_bool(j, "cpp_owned", t->cpp_owned);
	}
	jsonw__name(j, "holders");
	jsonw__start_array(j);
	for (int h = 0; h < t->nr_holders; h++)
		jsonw__string(j, t->holders[h]);
	jsonw__end_array(j);
	json_allocation(j, o, jn);
	jsonw__end_object(j);
}

static void json_head(struct jsonw *j, const struct census_report *o, const struct census *c,
		      const struct census_pause *p)
{
	char py[16];

	snprintf(py, sizeof(py), "3.%d", c->minor);
	jsonw__field_s64(j, "pid", o->pid);
	jsonw__field_string(j, "python", py);
	jsonw__field_bool(j, "paused", o->pause);
	jsonw__field_u64(j, "pause_ns", p->ns);
	jsonw__field_s64(j, "threads_paused", o->pause ? p->held : 0);
	jsonw__field_bool(j, "may_be_torn", !o->pause || c->torn);
	jsonw__name(j, "caps");
	jsonw__start_object(j);
	jsonw__field_u64(j, "max_objects", o->caps.max_objects);
	jsonw__field_u64(j, "max_read_bytes", o->caps.max_read_bytes);
	jsonw__field_u64(j, "max_ms", o->caps.max_ns / 1000000);
	jsonw__end_object(j);
	jsonw__name(j, "truncated_by");
	if (c->truncated_by)
		jsonw__string(j, c->truncated_by);
	else
		jsonw__null(j);
	jsonw__field_u64(j, "objects_visited", c->objects_visited);
	jsonw__field_u64(j, "gc_objects", c->gc_objects);
	jsonw__field_u64(j, "bytes_read", c->bytes_read);
	jsonw__field_u64(j, "elapsed_ns", c->elapsed_ns);
	jsonw__field_s64(j, "threads", c->threads);
	jsonw__name(j, "layout");
	jsonw__start_object(j);
	jsonw__field_bool(j, "verified", c->layout_ok);
	jsonw__name(j, "error");
	if (c->nr_tensors && !c->layout_ok)
		jsonw__string(j, c->layout_error);
	else
		jsonw__null(j);
	jsonw__field_s64(j, "tensors_checked", c->tensors_checked);
	jsonw__field_s64(j, "tensors_failed", c->tensors_failed);
	if (c->layout_ok) {
		jsonw__field_s64(j, "thpvariable_cdata", c->off_cdata);
		jsonw__field_s64(j, "tensorimpl_pyobj", c->off_pyobj);
		jsonw__field_s64(j, "tensorimpl_sizes", c->off_sizes);
		jsonw__field_s64(j, "tensorimpl_storage", c->off_storage);
		jsonw__field_s64(j, "storageimpl_data", c->off_st_data);
		jsonw__field_s64(j, "storageimpl_nbytes", c->off_st_nbytes);
		jsonw__name(j, "autogradmeta_requires_grad");
		if (c->off_requires_grad >= 0)
			jsonw__s64(j, c->off_requires_grad);
		else
			jsonw__null(j);
	}
	jsonw__end_object(j);
}

void report__census_json(FILE *f, const struct census_report *o, const struct census *c,
			 const struct census_pause *p)
{
	struct jsonw *j = jsonw__new(f, true);

	if (!j)
		return;
	jsonw__start_object(j);
	json_head(j, o, c, p);
	jsonw__field_u64(j, "tensors_found", c->nr_tensors);
	if (c->layout_ok) {
		jsonw__field_u64(j, "storages", c->nr_storages);
		jsonw__field_u64(j, "bytes", c->bytes);
	}
	json_join(j, o, c);
	jsonw__name(j, "groups");
	jsonw__start_array(j);
	for (size_t i = 0; i < c->nr_groups; i++) {
		const struct census_group *g = &c->groups[i];

		jsonw__start_object(j);
		jsonw__field_string(j, "holder", g->path);
		jsonw__field_string(j, "kind", g->kind);
		jsonw__field_u64(j, "length", g->length);
		jsonw__field_s64(j, "tensors", g->tensors);
		if (c->layout_ok) {
			jsonw__field_s64(j, "storages", g->storages);
			jsonw__field_u64(j, "bytes", g->bytes);
		}
		jsonw__end_object(j);
	}
	jsonw__end_array(j);
	jsonw__name(j, "no_holder");
	jsonw__start_object(j);
	jsonw__field_s64(j, "tensors", c->orphan_tensors);
	if (c->layout_ok)
		jsonw__field_u64(j, "bytes", c->orphan_bytes);
	jsonw__name(j, "graphs");
	jsonw__start_array(j);
	for (size_t i = 0; i < c->nr_graphs; i++)
		jsonw__string(j, c->graphs[i]);
	jsonw__end_array(j);
	jsonw__end_object(j);
	jsonw__name(j, "not_entered");
	jsonw__start_object(j);
	jsonw__name(j, "types");
	jsonw__start_array(j);
	for (int i = 0; i < c->nr_not_entered; i++) {
		jsonw__start_object(j);
		jsonw__field_string(j, "type", c->not_entered[i].type);
		jsonw__field_u64(j, "references", c->not_entered[i].refs);
		jsonw__end_object(j);
	}
	jsonw__end_array(j);
	jsonw__field_u64(j, "other_references", c->not_entered_other);
	jsonw__end_object(j);
	jsonw__name(j, "tensors");
	jsonw__start_array(j);
	for (size_t i = 0; i < c->nr_tensors; i++)
		json_tensor(j, o, c, &c->tensors[i], &o->joined.tensors[i]);
	jsonw__end_array(j);
	jsonw__end_object(j);
	jsonw__free(j);
	fputc('\n', f);
}
