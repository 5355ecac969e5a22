// SPDX-License-Identifier: BSD-2-Clause
/*
 * svg.c - a self-contained interactive flame graph of outstanding bytes.
 *
 * Stacks are merged into a tree (all -> process -> outermost ... innermost
 * frame) whose nodes carry bytes, allocations, memory classes and bytes per
 * verdict; children are laid out widest first and the root is drawn at the
 * bottom. Every frame is a <g> with data-* attributes that the inline script
 * (svg_assets.c) reads; the initial layout is computed here, so viewers
 * without scripts still show the graph. All text goes through xml.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "svg_assets.h"
#include "model/site.h"
#include "xml.h"
#include "trace/probes.h"
#include "util/fmt.h"
#include "util/htab.h"

#define PAD 10
#define ROW 16
#define TOP 70
#define BOTTOM 44
#define CHAR_W 6.7
#define TEXT_RISE 6.5	 /* an 11 px underscore lies 2-3 px under the baseline */
#define MAX_FRAMES 30000 /* beyond this, narrow frames are left out */
#define NAME_LEN 2048

enum nkind { N_ROOT, N_PROC, N_PYTHON, N_CUDA, N_NATIVE };
enum { V_LEAK, V_STEADY, V_UNKNOWN, V_NR };

struct node {
	char *name, *where;
	double growth; /* a leaking stack's site: its growth (bytes/s), else 0 */
	int line;      /* ... and a native site's line (0: none, or lines that differ) */
	uint64_t bytes, allocs, x;
	uint64_t by_verdict[V_NR];
	uint32_t parent, child, next, depth; /* child, next: 0 = none */
	uint8_t kind, classes;
};

struct tree {
	struct node *n;
	uint32_t len, cap, maxdepth;
	struct htab *ix; /* (parent, seed, hash) -> node */
};

struct child_key {
	uint32_t parent, seed;
	uint64_t hash;
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int new_node(struct tree *t, uint32_t parent, const char *name, const char *where,
		    uint8_t kind)
{
	struct node *n;

	if (t->len == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct node *nn = realloc(t->n, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->n = nn;
		t->cap = cap;
	}
	n = &t->n[t->len];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	n->where = strdup(where);
	if (!n->name || !n->where) {
		free(n->name);
		free(n->where);
		return -ENOMEM;
	}
	n->kind = kind;
	n->parent = parent;
	if (t->len) {
		n->depth = t->n[parent].depth + 1;
		n->next = t->n[parent].child;
		t->n[parent].child = t->len;
	}
	if (n->depth > t->maxdepth)
		t->maxdepth = n->depth;
	return t->len++;
}

/* The child of parent called (name, where), created if absent. Returns its index or -errno. */
static int child(struct tree *t, uint32_t parent, const char *name, const char *where, uint8_t kind)
{
	struct child_key key = { .parent = parent };
	uint64_t h = hash_bytes(name, strlen(name), kind);
	uint32_t *slot;
	bool created;
	int id;

	h = hash_bytes(where, strlen(where), h);
	for (;; key.seed++) {
		key.hash = h + key.seed;
		slot = htab__upsert(t->ix, &key, &created);
		if (!slot)
			return -ENOMEM;
		if (created)
			break;
		if (!strcmp(t->n[*slot].name, name) && !strcmp(t->n[*slot].where, where) &&
		    t->n[*slot].kind == kind)
			return *slot;
	}
	id = new_node(t, parent, name, where, kind);
	if (id < 0) {
		htab__delete(t->ix, &key);
		return id;
	}
	slot = htab__lookup(t->ix, &key);
	*slot = id;
	return id;
}

/*
 * A frame's label and where it is. Python frames are labelled with the base
 * name of their file, which keeps the line number visible in narrow frames;
 * the whole path is in where, which also tells frames apart. Native frames
 * are told apart by function and file, not line, as flame graphs merge them.
 */
static void frame_label(const struct snap_frame *fr, char *name, char *where, size_t len)
{
	int n;

	if (fr->kind[0] == 'p') {
		n = snprintf(name, len, "%s (%s:%d)", fr->function ?: "?",
			     fr->file ? base_name(fr->file) : "?", fr->line);
		if (n < 0 || (size_t)n >= len)
			memcpy(name + len - 4, "...", 4);
		n = snprintf(where, len, "Python  %s:%d", fr->file ?: "?", fr->line);
		if (n < 0 || (size_t)n >= len)
			memcpy(where + len - 4, "...", 4);
		return;
	}
	report__frame_name(fr, name, len);
	/* one box per native function, whichever line of it called: the file, not the line */
	if (fr->module && fr->file)
		snprintf(where, len, "%s  %s", base_name(fr->module), fr->file);
	else if (fr->module)
		snprintf(where, len, "%s", base_name(fr->module));
	else
		where[0] = '\0';
}

static uint8_t frame_kind(const struct snap_frame *fr)
{
	if (fr->kind[0] == 'p')
		return N_PYTHON;
	if (fr->module && !strncmp(base_name(fr->module), "libcuda.", 8))
		return N_CUDA;
	return N_NATIVE;
}

static void charge(struct node *n, const struct snap_stack *st)
{
	int v = V_UNKNOWN;

	if (!strcmp(st->verdict, "leak"))
		v = V_LEAK;
	else if (!strcmp(st->verdict, "steady"))
		v = V_STEADY;
	n->bytes += st->outstanding_bytes;
	n->allocs += st->outstanding_allocs;
	n->by_verdict[v] += st->outstanding_bytes;
	if (st->cls < 8)
		n->classes |= 1u << st->cls;
}

static int add_stack(struct tree *t, const struct snap_proc *p, const struct snap_stack *st)
{
	const struct snap_frame *site = site__pick(st);
	char name[NAME_LEN], where[NAME_LEN];
	int id;

	snprintf(name, sizeof(name), "%s (%d)", p->comm, p->pid);
	id = child(t, 0, name, "process", N_PROC);
	if (id < 0)
		return id;
	charge(&t->n[0], st);
	charge(&t->n[id], st);
	for (uint32_t i = st->nframes; i-- > 0;) {
		const struct snap_frame *fr = &st->frames[i];

		frame_label(fr, name, where, sizeof(name));
		id = child(t, id, name, where, frame_kind(fr));
		if (id < 0)
			return id;
		charge(&t->n[id], st);
		/* the leak's own line carries its rate, on the frame rather than on hover */
		if (fr == site && !strcmp(st->verdict, "leak") && st->growth_bytes_per_s > 0) {
			struct node *n = &t->n[id];
			int line = fr->kind[0] == 'n' && fr->file ? fr->line : 0;

			n->line = n->growth == 0 ? line : n->line == line ? line : 0;
			n->growth += st->growth_bytes_per_s;
		}
	}
	return 0;
}

static const struct node *cmp_base;

static int cmp_children(const void *a, const void *b)
{
	const struct node *x = &cmp_base[*(const uint32_t *)a];
	const struct node *y = &cmp_base[*(const uint32_t *)b];

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Orders every node's children widest first and gives them their x. Returns 0 or -ENOMEM. */
static int layout(struct tree *t)
{
	uint32_t *kids = malloc(t->len * sizeof(*kids));

	if (!kids)
		return -ENOMEM;
	cmp_base = t->n;
	for (uint32_t i = 0; i < t->len; i++) {
		uint32_t nk = 0;
		uint64_t x = t->n[i].x;

		for (uint32_t c = t->n[i].child; c; c = t->n[c].next)
			kids[nk++] = c;
		qsort(kids, nk, sizeof(*kids), cmp_children);
		t->n[i].child = nk ? kids[0] : 0;
		for (uint32_t k = 0; k < nk; k++) {
			t->n[kids[k]].next = k + 1 < nk ? kids[k + 1] : 0;
			t->n[kids[k]].x = x;
			x += t->n[kids[k]].bytes;
		}
	}
	free(kids);
	return 0;
}

/*
 * A frame's colour says whether what it holds leaks, then whose code it is: every byte
 * judged a leak is in bright reds and oranges, a share of it in salmon, memory that does
 * not leak in quiet blues, sands and greys (a frame's own hash spreads the shades).
 */
static void put_fill(FILE *f, const struct node *n)
{
	/* base colour and spread, by kind: root, process, Python, libcuda, native */
	static const int quiet[][6] = {
		[N_ROOT] = { 200, 200, 204, 15, 15, 15 },
		[N_PROC] = { 200, 200, 204, 15, 15, 15 },
		[N_PYTHON] = { 150, 185, 215, 30, 30, 25 },
		[N_CUDA] = { 196, 196, 202, 25, 25, 25 },
		[N_NATIVE] = { 214, 204, 178, 25, 25, 25 },
	};
	static const int leak[][6] = {
		[N_ROOT] = { 200, 60, 45, 30, 30, 20 },	  [N_PROC] = { 200, 60, 45, 30, 30, 20 },
		[N_PYTHON] = { 215, 45, 40, 35, 35, 25 }, [N_CUDA] = { 190, 35, 35, 30, 25, 20 },
		[N_NATIVE] = { 235, 95, 25, 20, 55, 25 },
	};
	static const int part[6] = { 240, 160, 130, 12, 30, 30 };
	const int *c = quiet[n->kind];

	if (n->bytes && n->by_verdict[V_LEAK] == n->bytes)
		c = leak[n->kind];
	else if (n->by_verdict[V_LEAK])
		c = part;
	double v = hash_bytes(n->name, strlen(n->name), 0) % 1000 / 1000.0;

	fprintf(f, "rgb(%d,%d,%d)", c[0] + (int)(c[3] * v), c[1] + (int)(c[4] * v),
		c[2] + (int)(c[5] * v));
}

static void put_verdicts(FILE *f, const struct node *n)
{
	static const char *const names[V_NR] = { "leak", "steady", "unknown" };
	char b[32];
	int shown = 0, kinds = 0;

	for (int v = 0; v < V_NR; v++)
		kinds += n->by_verdict[v] != 0;
	for (int v = 0; v < V_NR; v++) {
		if (!n->by_verdict[v])
			continue;
		fprintf(f, "%s%s", shown++ ? ", " : "", names[v]);
		if (kinds > 1)
			fprintf(f, " %s", fmt_bytes(n->by_verdict[v], b, sizeof(b)));
	}
}

static void put_classes(FILE *f, const struct node *n)
{
	int shown = 0;

	for (unsigned int c = 0; c < 8; c++)
		if (n->classes & (1u << c))
			fprintf(f, "%s%s", shown++ ? ", " : "", class__name(c));
}

/*
 * What a frame shows: its name, or for a leak's site its rate and (native) line first,
 * so that they show in a narrow frame: "+40.00 MiB/s wl_demo.c:72 remember_activations".
 */
static void node_label(const struct node *n, char *buf, size_t len)
{
	const char *file = strrchr(n->where, ' ');
	char b[32];

	if (n->growth <= 0) {
		snprintf(buf, len, "%s", n->name);
		return;
	}
	fmt_bytes(u64_of(n->growth), b, sizeof(b));
	if (n->line)
		snprintf(buf, len, "+%s/s %s:%d %s", b, base_name(file ? file + 1 : n->where),
			 n->line, n->name);
	else
		snprintf(buf, len, "+%s/s %s", b, n->name);
}

static void put_node(FILE *f, const struct tree *t, const struct node *n, double scale, double full)
{
	double x = PAD + n->x * scale, w = n == t->n ? full : n->bytes * scale;
	double y = TOP + (double)(t->maxdepth - n->depth) * ROW;
	size_t fit = w > 6 ? (size_t)((w - 6) / CHAR_W) : 0;
	char b[32], label[NAME_LEN + 96];

	node_label(n, label, sizeof(label));
	fprintf(f, "<g class=\"f%s\" data-n=\"",
		n->bytes && n->by_verdict[V_LEAK] == n->bytes ? " leak" : "");
	xml__put(f, n->name, SIZE_MAX);
	if (n->growth > 0) { /* what the frame shows when it differs from its name */
		fputs("\" data-l=\"", f);
		xml__put(f, label, SIZE_MAX);
	}
	fputs("\" data-w=\"", f);
	xml__put(f, n->where, SIZE_MAX);
	fprintf(f, "\" data-x=\"%llu\" data-v=\"%llu\" data-d=\"%u\" data-a=\"%llu\" data-c=\"",
		(unsigned long long)n->x, (unsigned long long)n->bytes, n->depth,
		(unsigned long long)n->allocs);
	put_classes(f, n);
	fputs("\" data-k=\"", f);
	put_verdicts(f, n);
	fputs("\"><title>", f);
	xml__put(f, n->name, SIZE_MAX);
	fprintf(f,
		" (%s, %.1f%% of all)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
		"height=\"%d\" fill=\"",
		fmt_bytes(n->bytes, b, sizeof(b)),
		t->n[0].bytes ? 100.0 * (double)n->bytes / (double)t->n[0].bytes : 0.0, x, y, w,
		ROW - 1);
	put_fill(f, n);
	/* the baseline TEXT_RISE above the bottom: underscores clear a leak's outline */
	fprintf(f, "\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + ROW - TEXT_RISE);
	if (fit >= 3 && xml__chars(label) <= fit) {
		xml__put(f, label, SIZE_MAX);
	} else if (fit >= 3) {
		xml__put(f, label, fit - 2);
		fputs("..", f);
	}
	fputs("</text></g>\n", f);
}

/*
 * The narrowest frame drawn, in pixels: 0.1, or wider when that would draw
 * more than MAX_FRAMES frames (browsers slow down). *left_out counts the rest.
 */
static double min_width(const struct tree *t, double scale, uint32_t *left_out)
{
	static const double steps[] = { 0.1, 0.25, 0.5, 1, 2, 4, 8 };
	uint32_t drawn = 0;
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		drawn = 0;
		for (uint32_t j = 0; j < t->len; j++)
			drawn += !j || t->n[j].bytes * scale >= steps[i];
		if (drawn <= MAX_FRAMES)
			break;
	}
	*left_out = t->len - drawn;
	return i < sizeof(steps) / sizeof(steps[0]) ? steps[i] : steps[i - 1];
}

/* Frames in depth-first order, root first; those narrower than min_w pixels are left out. */
static int put_frames(FILE *f, const struct tree *t, double scale, double full, double min_w)
{
	uint32_t *todo = malloc(t->len * sizeof(*todo));
	uint32_t top = 0;

	if (!todo)
		return -ENOMEM;
	todo[top++] = 0;
	fputs("<g id=\"gl-frames\">\n", f);
	while (top) {
		const struct node *n = &t->n[todo[--top]];
		uint32_t first = top;

		put_node(f, t, n, scale, full);
		for (uint32_t c = n->child; c; c = t->n[c].next)
			if (t->n[c].bytes * scale >= min_w)
				todo[top++] = c;
		for (uint32_t a = first, b = top - 1; top > first && a < b; a++, b--) {
			uint32_t tmp = todo[a];

			todo[a] = todo[b];
			todo[b] = tmp;
		}
	}
	fputs("</g>\n", f);
	free(todo);
	return 0;
}

static void put_button(FILE *f, const char *id, int x, int y, int w, const char *label, bool shown)
{
	fprintf(f,
		"<g id=\"%s\" class=\"btn\"%s><rect x=\"%d\" y=\"%d\" width=\"%d\" "
		"height=\"20\" rx=\"3\"/><text x=\"%d\" y=\"%d\">%s</text></g>\n",
		id, shown ? "" : " style=\"display:none\"", x, y, w, x + 6, y + 14, label);
}

static void put_legend(FILE *f)
{
	static const struct {
		const char *fill, *label;
	} items[] = {
		{ "rgb(220,55,45)", "leak" },		{ "rgb(246,175,150)", "part leaks" },
		{ "rgb(165,200,228)", "Python" },	{ "rgb(226,216,190)", "native" },
		{ "rgb(208,208,214)", "CUDA library" }, { "rgb(230,0,230)", "search match" },
	};
	int x = PAD;

	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		fprintf(f,
			"<rect x=\"%d\" y=\"48\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			"<text x=\"%d\" y=\"58\">%s</text>\n",
			x, items[i].fill, x + 16, items[i].label);
		x += 16 + (int)(strlen(items[i].label) * CHAR_W) + 14;
	}
	fprintf(f,
		"<rect x=\"%d\" y=\"48\" width=\"12\" height=\"12\" fill=\"#fff\" "
		"stroke=\"#8b0000\" stroke-width=\"1.5\"/><text x=\"%d\" y=\"58\">"
		"outline: every byte under it judged a leak</text>\n",
		x, x + 16);
}

/* Which of PyTorch's segments and tensor blocks draw its memory (report__draw_rule()). */
static void put_drawn_note(FILE *f, const struct snapshot *s)
{
	bool rule[REPORT_DRAW_SEGMENTS + 1] = { false };

	for (uint32_t i = 0; i < s->nprocs; i++)
		rule[report__draw_rule(&s->procs[i])] = true;
	if (rule[REPORT_DRAW_BLOCKS])
		fprintf(f, "; PyTorch's tensor blocks drawn%s, not its segments",
			rule[REPORT_DRAW_SEGMENTS] ? " where every one was seen" : "");
	else if (rule[REPORT_DRAW_SEGMENTS])
		fprintf(f, "; PyTorch's segments drawn, not the tensor blocks seen in windows");
}

static void put_header(FILE *f, const struct snapshot *s, const struct svg_opts *o,
		       const struct tree *t, uint32_t width, uint32_t height, uint32_t nstacks,
		       uint32_t left_out)
{
	const char *title = o->title;
	uint32_t nprocs = 0;
	char b[32];

	if (!title)
		title = o->leak_only ? "gpuleak: leaked CUDA memory by stack" :
				       "gpuleak: outstanding CUDA memory by stack";
	for (uint32_t c = t->n[0].child; c; c = t->n[c].next)
		nprocs++;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" id=\"gl\" "
		"width=\"100%%\" viewBox=\"0 0 %u %u\" preserveAspectRatio=\"xMinYMin meet\" "
		"data-width=\"%u\" "
		"data-charw=\"%.1f\">\n<style><![CDATA[\n%s]]></style>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#f6f6f4\"/>\n"
		"<text id=\"gl-title\" x=\"%u\" y=\"22\" text-anchor=\"middle\">",
		width, height, width, CHAR_W, svg__style, width / 2);
	xml__put(f, title, SIZE_MAX);
	fprintf(f,
		"</text>\n<text class=\"sub\" x=\"%u\" y=\"39\" text-anchor=\"middle\">"
		"%s%s in %u stack%s of %u process%s, %.1f s observed",
		width / 2, o->leak_only ? "leaked: " : "", fmt_bytes(t->n[0].bytes, b, sizeof(b)),
		nstacks, nstacks == 1 ? "" : "s", nprocs, nprocs == 1 ? "" : "es", s->duration_s);
	if (left_out)
		fprintf(f, "; %u narrow frames left out", left_out);
	put_drawn_note(f, s);
	fprintf(f, "%s</text>\n", s->complete ? "" : " - INCOMPLETE: events were lost");
	put_button(f, "gl-reset", PAD, 8, 84, "Reset zoom", false);
	fprintf(f,
		"<foreignObject x=\"%u\" y=\"8\" width=\"240\" height=\"24\">"
		"<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"gl-search\" type=\"text\" "
		"placeholder=\"search frames (regex)\"/></foreignObject>\n",
		width - PAD - 240 - 120);
	put_button(f, "gl-search-btn", width - PAD - 112, 8, 56, "Search", true);
	put_button(f, "gl-clear", width - PAD - 50, 8, 50, "Clear", false);
	put_legend(f);
}

/* Lines of the census section: a title and one line per process and per holder. */
static uint32_t census_lines(const struct snapshot *s)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->ncensus; i++)
		n += 1 + s->census[i].nrows + (s->census[i].more_rows > 0);
	return n ? n + 1 : 0;
}

static void put_census_line(FILE *f, uint32_t y, const char *cls)
{
	fprintf(f, "<text class=\"%s\" x=\"%d\" y=\"%u\">", cls, PAD, y);
}

/* attach --census: what holds the tensors, each holder beside the line that allocated them. */
static void put_census(FILE *f, const struct snapshot *s, uint32_t y)
{
	char b1[32], b2[32];

	if (!s->ncensus)
		return;
	put_census_line(f, y, "census");
	fputs("Census: the live tensors and what holds them (allocated at, when the books know "
	      "the line)</text>\n",
	      f);
	for (uint32_t i = 0; i < s->ncensus; i++) {
		const struct snap_census *c = &s->census[i];

		y += ROW;
		put_census_line(f, y, "census");
		if (!c->valid) {
			fprintf(f, "PID %d: PyTorch's layout not verified, no figures</text>\n",
				c->pid);
			continue;
		}
		fprintf(f, "PID %d: %zu tensors in %zu storages, %s", c->pid, c->tensors,
			c->storages, fmt_bytes(c->bytes, b1, sizeof(b1)));
		if (c->paused)
			fprintf(f, " (paused %.1f ms)", c->pause_ns / 1e6);
		if (c->orphan_tensors)
			fprintf(f, "; %d with no Python holder (%s)", c->orphan_tensors,
				fmt_bytes(c->orphan_bytes, b2, sizeof(b2)));
		if (c->pre_attach_tensors)
			fprintf(f, "; %d from before attach (%s)", c->pre_attach_tensors,
				fmt_bytes(c->pre_attach_bytes, b2, sizeof(b2)));
		fputs("</text>\n", f);
		for (uint32_t r = 0; r < c->nrows; r++) {
			const struct snap_census_row *row = &c->rows[r];

			y += ROW;
			put_census_line(f, y, row->leak ? "census leak" : "census");
			fprintf(f, "  %d tensor%s, %s, held by ", row->tensors,
				row->tensors == 1 ? "" : "s",
				fmt_bytes(row->bytes, b1, sizeof(b1)));
			xml__put(f, row->holder ? row->holder : "?", SIZE_MAX);
			fprintf(f, " (%s)", row->kind);
			if (row->site) {
				fputs(" \xe2\x86\x90 allocated at ", f); /* a left arrow */
				xml__put(f, row->site, SIZE_MAX);
				if (row->leak)
					fputs(", judged to leak", f);
			}
			fputs("</text>\n", f);
		}
		if (c->more_rows) {
			y += ROW;
			put_census_line(f, y, "census");
			fprintf(f, "  and %u more holders</text>\n", c->more_rows);
		}
	}
}

#define SVG_LEAK_LINES 3 /* leaks told in words under the graph */

/* The leaking stacks shown, fastest first (at most SVG_LEAK_LINES); their count. */
static uint32_t top_leaks(const struct snapshot *s, const struct snap_proc **procs,
			  const struct snap_stack **stacks)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nprocs; i++) {
		enum report_draw rule = report__draw_rule(&s->procs[i]);

		for (uint32_t j = 0; j < s->procs[i].nstacks; j++) {
			const struct snap_stack *st = &s->procs[i].stacks[j];
			uint32_t at = n;

			if (!st->outstanding_bytes || !st->verdict || strcmp(st->verdict, "leak") ||
			    !report__drawn(rule, st))
				continue;
			while (at > 0 &&
			       stacks[at - 1]->growth_bytes_per_s < st->growth_bytes_per_s)
				at--;
			if (at == SVG_LEAK_LINES)
				continue;
			if (n < SVG_LEAK_LINES)
				n++;
			memmove(&stacks[at + 1], &stacks[at], (n - 1 - at) * sizeof(*stacks));
			memmove(&procs[at + 1], &procs[at], (n - 1 - at) * sizeof(*procs));
			stacks[at] = st;
			procs[at] = &s->procs[i];
		}
	}
	return n;
}

/* Lines of the leaks' panel: a title, per leak its headline (and its hint and fix), a gap. */
static uint32_t leak_lines(const struct snapshot *s)
{
	const struct snap_proc *p[SVG_LEAK_LINES];
	const struct snap_stack *st[SVG_LEAK_LINES];
	uint32_t n = top_leaks(s, p, st), lines = 0;

	for (uint32_t i = 0; i < n; i++)
		lines += st[i]->pattern ? 3 : 1;
	return lines ? lines + 2 : 0;
}

/* The answer in words, under the graph: each leak's rate, line and process, then its
 * pattern, evidence and usual fix; the whole line in a title when it is cut. */
static uint32_t put_leaks(FILE *f, const struct snapshot *s, uint32_t y, uint32_t width)
{
	const struct snap_proc *p[SVG_LEAK_LINES];
	const struct snap_stack *st[SVG_LEAK_LINES];
	uint32_t n = top_leaks(s, p, st);
	size_t chars = (width - 2 * PAD) / 8; /* 13 px monospace: about 7.8 px a character */
	char b1[32], b2[32], site[256], line[1024], hint[1024], fix[512];

	if (!n)
		return y;
	fprintf(f, "<text class=\"leaks title\" x=\"%d\" y=\"%u\">%s</text>\n", PAD, y,
		n == 1 ? "The leak:" : "The leaks, fastest first:");
	for (uint32_t i = 0; i < n; i++) {
		const char *texts[3] = { line, NULL, NULL };

		report__site(st[i], site, sizeof(site));
		snprintf(line, sizeof(line), "+%s/s at %s, PID %d %s: %s held in %llu allocations",
			 fmt_bytes((uint64_t)st[i]->growth_bytes_per_s, b1, sizeof(b1)), site,
			 p[i]->pid, p[i]->comm, fmt_bytes(st[i]->outstanding_bytes, b2, sizeof(b2)),
			 (unsigned long long)st[i]->outstanding_allocs);
		if (st[i]->pattern) {
			snprintf(hint, sizeof(hint), "  %s? %s", st[i]->pattern, st[i]->evidence);
			snprintf(fix, sizeof(fix), "  the usual fix: %s", st[i]->fix);
			texts[1] = hint;
			texts[2] = fix;
		}
		for (int k = 0; k < 3 && texts[k]; k++) {
			y += ROW;
			fprintf(f, "<text class=\"leaks%s\" x=\"%d\" y=\"%u\">", k ? "" : " head",
				PAD, y);
			if (strlen(texts[k]) > chars) {
				fputs("<title>", f);
				xml__put(f, texts[k], SIZE_MAX);
				fputs("</title>", f);
				xml__put(f, texts[k], chars - 3);
				fputs("...", f);
			} else {
				xml__put(f, texts[k], SIZE_MAX);
			}
			fputs("</text>\n", f);
		}
	}
	return y + ROW;
}

static bool shown(enum report_draw rule, const struct snap_stack *st, bool leak_only)
{
	return report__drawn(rule, st) && st->outstanding_bytes &&
	       (!leak_only || !strcmp(st->verdict, "leak"));
}

int report__svg(FILE *f, const struct snapshot *s, const struct svg_opts *o)
{
	uint32_t width = o->width ? o->width : 1200, nstacks = 0, height, left_out;
	struct tree t = { 0 };
	double full, scale, min_w;
	int err = -ENOMEM;

	if (width < 600)
		width = 600;
	t.ix = htab__new(sizeof(struct child_key), sizeof(uint32_t));
	if (!t.ix || new_node(&t, 0, "all", "", N_ROOT) < 0)
		goto cleanup;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		enum report_draw rule = report__draw_rule(&s->procs[i]);

		for (uint32_t j = 0; j < s->procs[i].nstacks; j++) {
			if (!shown(rule, &s->procs[i].stacks[j], o->leak_only))
				continue;
			err = add_stack(&t, &s->procs[i], &s->procs[i].stacks[j]);
			if (err)
				goto cleanup;
			nstacks++;
		}
	}
	err = layout(&t);
	if (err)
		goto cleanup;
	full = width - 2 * PAD;
	scale = t.n[0].bytes ? full / t.n[0].bytes : 0;
	height = TOP + (t.maxdepth + 1) * ROW + BOTTOM + (census_lines(s) + leak_lines(s)) * ROW;
	min_w = min_width(&t, scale, &left_out);
	put_header(f, s, o, &t, width, height, nstacks, left_out);
	err = put_frames(f, &t, scale, full, min_w);
	if (err)
		goto cleanup;
	put_census(f, s,
		   put_leaks(f, s, TOP + (t.maxdepth + 1) * ROW + ROW + 8, width) +
			   (leak_lines(s) ? ROW : 0));
	fprintf(f,
		"<text id=\"gl-details\" x=\"%d\" y=\"%u\">%s</text>\n"
		"<text id=\"gl-details2\" x=\"%d\" y=\"%u\"></text>\n"
		"<text id=\"gl-matched\" x=\"%u\" y=\"58\" text-anchor=\"end\"></text>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
		PAD, height - 24,
		nstacks ? "Hover a frame for details, click to zoom, Ctrl-F to search." :
			  "No outstanding memory.",
		PAD, height - 9, width - PAD, svg__script);
	err = fflush(f) || ferror(f) ? -EIO : 0;
cleanup:
	for (uint32_t i = 0; i < t.len; i++) {
		free(t.n[i].name);
		free(t.n[i].where);
	}
	free(t.n);
	htab__free(t.ix);
	return err;
}
