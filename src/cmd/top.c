// SPDX-License-Identifier: BSD-2-Clause
/*
 * top.c - `gpuleak top`: a full-screen view (ncurses) of the GPUs, the
 * processes and the stacks that grow the most, as nvtop and htop show theirs.
 * The screen is the terminal's alternate one, redrawn every --interval, at
 * once on a key or a resize, and nothing is wider than the terminal. Keys move
 * in the process and stack lists, sort, filter and show a help. When stdout is
 * not a terminal, each refresh is printed as plain text after a separator.
 */
#include <ctype.h>
#include <curses.h>
#include <term.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "gpu/sampler.h"
#include "session/session.h"
#include "model/site.h"
#include "model/snapshot.h"
#include "report/report.h"
#include "top.h"
#include "trace/probes.h"
#include "util/clock.h"
#include "util/fmt.h"
#include "util/log.h"

#define STEP_MS 100
#define MAX_GPUS 16

enum pane { PANE_PROCS, PANE_STACKS };

struct row {
	const struct snap_proc *p;
	const struct snap_stack *st; /* NULL in the process list */
	char site[160];
};

struct view {
	enum gl_sort sort;
	enum pane pane;
	int sel[2], first[2]; /* selected row, first row shown, per pane */
	char filter[64];      /* substring of comm, PID or site; "" for all */
	bool editing;	      /* typing the filter */
	int only_pid;	      /* Enter on a process: only its stacks; 0 for all */
	bool help;
	int open_pid;	  /* Enter on a stack: its frames are shown (0: none) */
	uint32_t open_id; /* ... the stack's id */
	uint32_t max_stacks;
	struct row *procs, *stacks;
	size_t nprocs, nstacks;
};

static const char *const sort_names[] = { "growth", "bytes", "name" };

static uint64_t proc_bytes(const struct snap_proc *p)
{
	return p->bytes[GL_CLASS_DEVICE] + p->bytes[GL_CLASS_MANAGED] +
	       p->bytes[GL_CLASS_HOST_PINNED];
}

static int cmp_double(double a, double b)
{
	return a > b ? -1 : a < b;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
}

static enum gl_sort sorting; /* qsort's comparators read it */

static int by_proc(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c = 0;

	if (sorting == GL_SORT_NAME)
		c = strcmp(x->p->comm, y->p->comm);
	else if (sorting == GL_SORT_BYTES)
		c = cmp_u64(proc_bytes(x->p), proc_bytes(y->p));
	else
		c = cmp_double(report__proc_growth(x->p), report__proc_growth(y->p));
	return c ?: cmp_u64(proc_bytes(x->p), proc_bytes(y->p)) ?: x->p->pid - y->p->pid;
}

static int by_stack(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c = 0;

	if (sorting == GL_SORT_NAME)
		c = strcmp(x->site, y->site);
	else if (sorting == GL_SORT_BYTES)
		c = cmp_u64(x->st->outstanding_bytes, y->st->outstanding_bytes);
	else
		c = cmp_double(x->st->growth_bytes_per_s, y->st->growth_bytes_per_s);
	return c								   ?:
		       cmp_u64(x->st->outstanding_bytes, y->st->outstanding_bytes) ?:
		       (int)x->st->id - (int)y->st->id;
}

static bool matches(const struct view *v, const struct snap_proc *p, const char *site)
{
	char pid[16];

	if (!v->filter[0])
		return true;
	snprintf(pid, sizeof(pid), "%d", p->pid);
	return strstr(p->comm, v->filter) || !strcmp(pid, v->filter) ||
	       (site && strstr(site, v->filter));
}

/* The two lists of a snapshot, filtered and sorted as the view says. */
static int build_rows(struct view *v, const struct snapshot *s)
{
	size_t cap = 0;

	free(v->procs);
	free(v->stacks);
	v->procs = v->stacks = NULL;
	v->nprocs = v->nstacks = 0;
	for (uint32_t i = 0; i < s->nprocs; i++)
		cap += s->procs[i].nstacks;
	v->procs = calloc(s->nprocs ? s->nprocs : 1, sizeof(*v->procs));
	v->stacks = calloc(cap ? cap : 1, sizeof(*v->stacks));
	if (!v->procs || !v->stacks)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		bool any = matches(v, p, NULL);

		for (uint32_t j = 0; j < p->nstacks; j++) {
			struct row *r = &v->stacks[v->nstacks];

			if (!report__is_memory_class(p->stacks[j].cls))
				continue;
			r->p = p;
			r->st = &p->stacks[j];
			report__site(r->st, r->site, sizeof(r->site));
			if (!matches(v, p, r->site))
				continue;
			any = true;
			if (!v->only_pid || v->only_pid == p->pid)
				v->nstacks++;
		}
		if (any)
			v->procs[v->nprocs++] = (struct row){ .p = p };
	}
	sorting = v->sort;
	qsort(v->procs, v->nprocs, sizeof(*v->procs), by_proc);
	qsort(v->stacks, v->nstacks, sizeof(*v->stacks), by_stack);
	if (v->max_stacks && v->nstacks > v->max_stacks)
		v->nstacks = v->max_stacks;
	return 0;
}

/* One line at y, cut at the screen's width; attr for the whole line when it is selected. */
static void line(int y, int attr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(int y, int attr, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (y < 0 || y >= LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	attrset(attr);
	mvaddnstr(y, 0, buf, COLS);
	if (attr & A_REVERSE)
		for (int x = (int)strlen(buf); x < COLS; x++)
			mvaddch(y, x, ' ');
	attrset(A_NORMAL);
}

/*
 * A header line per GPU: NVML's used and free when it answers, the memory the
 * traced processes hold on it and how fast that grows.
 */
static int draw_gpus(int y, int max_lines, const struct snapshot *s, const struct nvml_sample *nv)
{
	uint64_t traced[MAX_GPUS] = {}, unknown = 0;
	double growth[MAX_GPUS] = {}, unknown_growth = 0;
	int ndev = 0, shown = 0;
	char a[32], b[32], c[32], g[32];

	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		uint64_t held = p->unknown_dev_bytes;

		for (int d = 0; d < MAX_GPUS; d++)
			held += p->dev_bytes[d];
		if (p->unknown_dev_bytes) {
			unknown += p->unknown_dev_bytes;
			unknown_growth +=
				p->device_growth_bytes_per_s * p->unknown_dev_bytes / held;
		}
		for (int d = 0; d < MAX_GPUS; d++) {
			/* with NVML, the row is the GPU the ordinal was matched to */
			int row = !nv ? d : snap_gpu_named(p, d) ? p->gpus[d].nvml_index : -1;
			double share = p->device_growth_bytes_per_s * p->dev_bytes[d] / held;

			if (!p->dev_bytes[d])
				continue;
			if (row < 0 || row >= MAX_GPUS) {
				unknown += p->dev_bytes[d];
				unknown_growth += share;
				continue;
			}
			traced[row] += p->dev_bytes[d];
			growth[row] += share;
			if (row + 1 > ndev)
				ndev = row + 1;
		}
	}
	/* a machine with one GPU: device memory of no known device is on it */
	if (nv && nv->ndevices == 1 && unknown) {
		traced[0] += unknown;
		growth[0] += unknown_growth;
		unknown = 0;
	}
	if (nv && (int)nv->ndevices > ndev)
		ndev = nv->ndevices < MAX_GPUS ? (int)nv->ndevices : MAX_GPUS;
	for (int d = 0; d < ndev && shown < max_lines; d++, shown++) {
		fmt_bytes(traced[d], c, sizeof(c));
		fmt_rate(growth[d], g, sizeof(g));
		if (nv && d < (int)nv->ndevices && nv->devs[d].total) {
			const struct nvml_device *dev = &nv->devs[d];
			uint64_t used =
				dev->total - (dev->free < dev->total ? dev->free : dev->total);

			fmt_bytes(used, a, sizeof(a));
			fmt_bytes(dev->free, b, sizeof(b));
			line(y + shown, A_BOLD,
			     "GPU%d used %s (%.0f%%)  free %s  traced %s  growth %s", d, a,
			     100.0 * used / dev->total, b, c, g);
		} else {
			line(y + shown, A_BOLD, "GPU%d traced %s  growth %s  (used/free: no NVML)",
			     d, c, g);
		}
	}
	if (unknown && shown < max_lines) {
		fmt_bytes(unknown, c, sizeof(c));
		fmt_rate(unknown_growth, g, sizeof(g));
		line(y + shown++, A_BOLD,
		     "GPU? traced %s  growth %s  (device not known, or not matched to NVML's)", c,
		     g);
	}
	if (!shown && max_lines > 0) {
		line(y, A_BOLD, "GPU: no device memory seen yet");
		shown = 1;
	}
	return shown;
}

/* A line per job (ranks of one launcher): its memory and the rank out of balance. */
static int draw_jobs(int y, int max_lines, const struct snapshot *s)
{
	char buf[400];
	int shown = 0;

	for (uint32_t i = 0; i < s->njobs && shown < max_lines; i++, shown++)
		line(y + shown, A_BOLD, "%s", report__job_line(s, &s->jobs[i], buf, sizeof(buf)));
	return shown;
}

static void proc_line(int y, int attr, const struct row *r)
{
	char d[32], t[32], g[32], gs[160];
	const struct snap_proc *p = r->p;

	fmt_bytes(p->bytes[GL_CLASS_DEVICE], d, sizeof(d));
	fmt_bytes(p->bytes[GL_CLASS_TORCH_BLOCK], t, sizeof(t));
	fmt_rate(report__proc_growth(p), g, sizeof(g));
	if (COLS >= 80)
		line(y, attr, "%7d %-15.15s %11s %11s %12s %7llu %s%s", p->pid, p->comm, d, t, g,
		     (unsigned long long)p->outstanding_allocs, p->exited ? "exited" : "running",
		     report__gpus_short(p, gs, sizeof(gs)));
	else
		line(y, attr, "%7d %-12.12s %10s %11s %s", p->pid, p->comm, d, g,
		     p->exited ? "exited" : "run");
}

/* Colour pairs, where the terminal has colours. */
enum { PAIR_LEAK = 1 };

/* How a stack's row is drawn for its verdict: a leak in bold red, unknown dim. */
static int verdict_attr(const char *verdict)
{
	if (!strcmp(verdict, "leak"))
		return A_BOLD | (has_colors() ? COLOR_PAIR(PAIR_LEAK) : 0);
	return strcmp(verdict, "unknown") ? A_NORMAL : A_DIM;
}

static void stack_line(int y, int attr, const struct row *r)
{
	char b[32], g[32];

	if (!(attr & A_REVERSE))
		attr |= verdict_attr(r->st->verdict);
	fmt_bytes(r->st->outstanding_bytes, b, sizeof(b));
	fmt_rate(r->st->growth_bytes_per_s, g, sizeof(g));
	if (COLS >= 100)
		line(y, attr, "%7d %-11s %10s %7llu %12s %-7s %s", r->p->pid,
		     class__name(r->st->cls), b, (unsigned long long)r->st->outstanding_allocs, g,
		     r->st->verdict, r->site);
	else
		line(y, attr, "%7d %10s %11s %-7s %s", r->p->pid, b, g, r->st->verdict, r->site);
}

/* Keeps the selection inside the list and on screen (rows lines). */
static void clamp(struct view *v, enum pane pane, size_t n, int rows)
{
	int *sel = &v->sel[pane], *first = &v->first[pane];

	if (*sel >= (int)n)
		*sel = (int)n - 1;
	if (*sel < 0)
		*sel = 0;
	if (rows < 1)
		rows = 1;
	if (*sel < *first)
		*first = *sel;
	if (*sel >= *first + rows)
		*first = *sel - rows + 1;
	if (*first < 0)
		*first = 0;
}

static void draw_list(struct view *v, enum pane pane, int y, int rows)
{
	size_t n = pane == PANE_PROCS ? v->nprocs : v->nstacks;
	struct row *list = pane == PANE_PROCS ? v->procs : v->stacks;

	clamp(v, pane, n, rows);
	for (int i = 0; i < rows && v->first[pane] + i < (int)n; i++) {
		int at = v->first[pane] + i;
		int attr = at == v->sel[pane] && v->pane == pane ? A_REVERSE : A_NORMAL;

		if (pane == PANE_PROCS)
			proc_line(y + i, attr, &list[at]);
		else
			stack_line(y + i, attr, &list[at]);
	}
	if (!n)
		line(y, A_DIM, "  (none%s)", v->filter[0] || v->only_pid ? " that match" : " yet");
}

static const char *const help_lines[] = {
	"gpuleak top: keys",
	"",
	"  Up/Down, j/k    move in the list",
	"  PgUp/PgDn       a page up or down",
	"  Home/End        first or last row",
	"  Tab             processes <-> stacks",
	"  Enter           on a process: its stacks only",
	"                  (again: every process);",
	"                  on a stack: its frames",
	"  s               next sort: growth, bytes, name",
	"  g / b / n       sort by growth / bytes / name",
	"  /               filter by name, PID or site",
	"                  (Enter keeps it, Esc clears)",
	"  h, ?            this help (any key closes it)",
	"  q               quit",
};

static void draw_help(void)
{
	int n = sizeof(help_lines) / sizeof(help_lines[0]);

	for (int i = 0; i < n && i < LINES - 1; i++)
		line(i, i ? A_NORMAL : A_BOLD, "%s", help_lines[i]);
}

/*
 * The frames of the open stack, innermost first, the plumbing folded as in the text
 * report. Returns false when that stack is not in the lists any more.
 */
static bool draw_frames(const struct view *v)
{
	const struct row *r = NULL;
	char name[256], b[32];
	int y = 0;

	for (size_t i = 0; i < v->nstacks && !r; i++)
		if (v->stacks[i].p->pid == v->open_pid && v->stacks[i].st->id == v->open_id)
			r = &v->stacks[i];
	if (!r)
		return false;
	line(y++, A_BOLD, "PID %d: %s %s, %s", r->p->pid, class__name(r->st->cls),
	     fmt_bytes(r->st->outstanding_bytes, b, sizeof(b)), r->st->verdict);
	if (r->st->why)
		line(y++, verdict_attr(r->st->verdict), "  %s", r->st->why);
	if (r->st->pattern)
		line(y++, A_NORMAL, "  hint: %s? %s", r->st->pattern, r->st->evidence);
	line(y++, A_NORMAL, "  at %s", r->site);
	for (uint32_t i = 0; i < r->st->nframes && y < LINES - 1; i++) {
		const struct snap_frame *f = &r->st->frames[i];
		uint32_t end = i;

		while (i && end < r->st->nframes && site__is_plumbing(&r->st->frames[end]))
			end++;
		if (end - i >= 2) {
			line(y++, A_DIM, "  #%-3u %u frames of plumbing", i, end - i);
			i = end - 1;
			continue;
		}
		report__frame_name(f, name, sizeof(name));
		if (f->kind[0] == 'p')
			line(y++, A_NORMAL, "  #%-3u %s (%s:%d)", i, name, f->file ? f->file : "?",
			     f->line);
		else if (f->file && f->line)
			line(y++, A_NORMAL, "  #%-3u %s  %s:%d", i, name, f->file, f->line);
		else
			line(y++, A_NORMAL, "  #%-3u %s", i, name);
	}
	line(LINES - 1, A_REVERSE, "any key: back to the lists");
	return true;
}

static void draw(struct view *v, const struct snapshot *s, const struct nvml_sample *nv)
{
	int y = 0, avail, proc_rows, stack_rows;
	char note[160];

	erase();
	if (v->help) {
		draw_help();
		refresh();
		return;
	}
	if (v->open_pid && draw_frames(v)) {
		refresh();
		return;
	}
	v->open_pid = 0; /* gone from the lists */
	line(y++, A_BOLD, "gpuleak top - %.0f s, %u process%s, %llu lost%s  sort: %s%s%s%s",
	     s->duration_s, s->nprocs, s->nprocs == 1 ? "" : "es",
	     (unsigned long long)s->lost_events, s->complete ? "" : " (incomplete)",
	     sort_names[v->sort], v->filter[0] ? "  filter: " : "", v->filter,
	     v->only_pid ? "  (one process)" : "");
	/* every line but the status line: GPUs take at most a quarter */
	y += draw_gpus(y, LINES / 4 > 0 ? LINES / 4 : 1, s, nv);
	if (report__top_unseen(s, note, sizeof(note)))
		line(y++, A_DIM, "%s", note);
	y += draw_jobs(y, LINES / 8, s);
	avail = LINES - y - 1 - 2; /* the status line, two list headers */
	proc_rows = (int)v->nprocs < avail / 3 ? (int)v->nprocs : avail / 3;
	if (proc_rows < 1)
		proc_rows = 1;
	stack_rows = avail - proc_rows;
	if (COLS >= 80)
		line(y++, A_UNDERLINE, "%7s %-15s %11s %11s %12s %7s %s", "PID", "COMM", "DEVICE",
		     "TORCH", "GROWTH", "ALLOCS", "STATE");
	else
		line(y++, A_UNDERLINE, "%7s %-12s %10s %11s %s", "PID", "COMM", "DEVICE", "GROWTH",
		     "STATE");
	draw_list(v, PANE_PROCS, y, proc_rows);
	y += proc_rows;
	if (COLS >= 100)
		line(y++, A_UNDERLINE, "%7s %-11s %10s %7s %12s %-7s %s", "PID", "MEMORY", "HELD",
		     "ALLOCS", "GROWTH", "VERDICT", "SITE");
	else
		line(y++, A_UNDERLINE, "%7s %10s %11s %-7s %s", "PID", "HELD", "GROWTH", "VERDICT",
		     "SITE");
	if (stack_rows > 0)
		draw_list(v, PANE_STACKS, y, stack_rows);
	if (v->editing)
		line(LINES - 1, A_REVERSE, "filter: %s_", v->filter);
	else
		line(LINES - 1, A_REVERSE,
		     "q quit  h help  Tab list  s sort  / filter  Enter one "
		     "process");
	refresh();
}

static void move_sel(struct view *v, int delta)
{
	size_t n = v->pane == PANE_PROCS ? v->nprocs : v->nstacks;
	int *sel = &v->sel[v->pane];

	*sel += delta;
	if (*sel >= (int)n)
		*sel = (int)n - 1;
	if (*sel < 0)
		*sel = 0;
}

/* The filter being typed; returns true when the lists change. */
static bool filter_key(struct view *v, int c)
{
	size_t len = strlen(v->filter);

	if (c == '\r' || c == '\n' || c == KEY_ENTER) {
		v->editing = false;
	} else if (c == 27) {
		v->editing = false;
		v->filter[0] = '\0';
	} else if (c == KEY_BACKSPACE || c == 127 || c == 8) {
		if (len)
			v->filter[len - 1] = '\0';
	} else if (c >= 0 && c < 256 && isprint(c) && len + 1 < sizeof(v->filter)) {
		v->filter[len] = (char)c;
		v->filter[len + 1] = '\0';
	} else {
		return false;
	}
	return true;
}

/* Returns true when the user asked to quit; *rebuild when the lists must be rebuilt. */
static bool handle_key(struct view *v, int c, bool *rebuild)
{
	int page = LINES / 3 > 1 ? LINES / 3 : 1;

	if (v->editing) {
		*rebuild = filter_key(v, c);
		return false;
	}
	if (v->open_pid && c != KEY_RESIZE) {
		v->open_pid = 0;
		return false;
	}
	if (v->help && c != KEY_RESIZE) {
		v->help = false;
		return c == 'q' || c == 'Q';
	}
	switch (c) {
	case 'q':
	case 'Q': return true;
	case 'h':
	case '?': v->help = true; break;
	case KEY_UP:
	case 'k': move_sel(v, -1); break;
	case KEY_DOWN:
	case 'j': move_sel(v, 1); break;
	case KEY_PPAGE: move_sel(v, -page); break;
	case KEY_NPAGE: move_sel(v, page); break;
	case KEY_HOME: move_sel(v, -1000000); break;
	case KEY_END: move_sel(v, 1000000); break;
	case '\t': v->pane = v->pane == PANE_PROCS ? PANE_STACKS : PANE_PROCS; break;
	case 's':
	case 'S':
		v->sort = (v->sort + 1) % 3;
		*rebuild = true;
		break;
	case 'g':
	case 'b':
	case 'n':
		v->sort = c == 'g' ? GL_SORT_GROWTH : c == 'b' ? GL_SORT_BYTES : GL_SORT_NAME;
		*rebuild = true;
		break;
	case '/': v->editing = true; break;
	case '\r': /* Enter, with nonl() */
	case '\n':
	case KEY_ENTER:
		if (v->pane == PANE_PROCS && v->nprocs) {
			int pid = v->procs[v->sel[PANE_PROCS]].p->pid;

			v->only_pid = v->only_pid == pid ? 0 : pid;
			v->sel[PANE_STACKS] = v->first[PANE_STACKS] = 0;
			*rebuild = true;
		} else if (v->pane == PANE_STACKS && v->nstacks) {
			const struct row *r = &v->stacks[v->sel[PANE_STACKS]];

			v->open_pid = r->p->pid;
			v->open_id = r->st->id;
		}
		break;
	default: break;
	}
	return false;
}

static struct top_opts plain_opts(const struct gl_opts *o)
{
	return (struct top_opts){ .sort_bytes = o->sort == GL_SORT_BYTES,
				  .sort_name = o->sort == GL_SORT_NAME,
				  .max_stacks = o->top ? o->top : 20 };
}

/* stdout is not a terminal: a text block per refresh. */
static int run_plain(struct session *s, const struct gl_opts *o)
{
	struct top_opts to = plain_opts(o);
	uint64_t next = 0;
	bool done = false;
	int status = EXIT_OK;

	while (!status && !done) {
		status = session__step(s, STEP_MS, &done);
		if (!status && (now_ns() >= next || done)) {
			struct snapshot *snap = session__snapshot(s, 0, true);

			if (snap) {
				fputs("---\n", stdout);
				report__top(stdout, snap, &to);
				fflush(stdout);
				snapshot__free(snap);
			}
			next = now_ns() + o->interval_ms * 1000000ULL;
		}
	}
	return status;
}

static const char *term_name(void)
{
	const char *t = getenv("TERM");

	return t ? t : "";
}

/* Whether ncurses knows the terminal: asked before tracing starts, so a bad TERM costs nothing. */
static int terminal_usable(void)
{
	int err = 0;

	if (setupterm(NULL, STDOUT_FILENO, &err) != OK) {
		log_error("cannot drive the terminal (TERM=%s): %s: set TERM to your terminal's "
			  "type, or pipe top's output to see text",
			  term_name(),
			  err == 0 ? "no terminfo entry for it" : "its terminfo entry is unusable");
		return EXIT_RUNTIME;
	}
	del_curterm(cur_term);
	return EXIT_OK;
}

static int draw_loop(struct session *s, const struct gl_opts *o)
{
	struct view v = { .sort = o->sort, .max_stacks = o->top };
	struct snapshot *snap = NULL;
	uint64_t next = 0;
	bool done = false, quit = false;
	int status = EXIT_OK;
	SCREEN *scr = newterm(NULL, stdout, stdin);

	if (!scr) {
		log_error("cannot start the screen on TERM=%s: %s", term_name(), strerror(errno));
		return EXIT_RUNTIME;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	if (has_colors()) {
		start_color();
		use_default_colors();
		init_pair(PAIR_LEAK, COLOR_RED, -1);
	}
	timeout(STEP_MS);
	curs_set(0);
	set_escdelay(25);
	while (!status && !done && !quit) {
		bool rebuild = false, redraw = false;
		int c;

		status = session__step(s, 0, &done);
		while ((c = getch()) != ERR && !quit) {
			quit = handle_key(&v, c, &rebuild);
			redraw = true;
			timeout(0);
		}
		timeout(STEP_MS);
		if (status || quit)
			break;
		if (now_ns() >= next || done) {
			snapshot__free(snap);
			snap = session__snapshot(s, 0, true);
			next = now_ns() + o->interval_ms * 1000000ULL;
			rebuild = true;
		}
		if (snap && rebuild && build_rows(&v, snap)) {
			status = EXIT_RUNTIME;
			break;
		}
		if (snap && (rebuild || redraw))
			draw(&v, snap, gpu_sampler__get(session__gpus(s)));
	}
	endwin();
	delscreen(scr);
	free(v.procs);
	free(v.stacks);
	snapshot__free(snap);
	return status;
}

/*
 * While the screen is drawn, messages on a terminal's stderr would scribble on
 * it: they go to a file, copied to stderr when the screen is gone.
 */
static FILE *hold_stderr(int *saved)
{
	FILE *f;

	*saved = -1;
	if (!isatty(STDERR_FILENO) || !(f = tmpfile()))
		return NULL;
	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	if (*saved < 0 || dup2(fileno(f), STDERR_FILENO) < 0) {
		if (*saved >= 0)
			close(*saved);
		*saved = -1;
		fclose(f);
		return NULL;
	}
	return f;
}

static void release_stderr(FILE *f, int saved)
{
	char buf[4096];
	size_t n;

	if (!f)
		return;
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(f);
}

static int run_screen(struct session *s, const struct gl_opts *o)
{
	int saved_fd;
	FILE *held = hold_stderr(&saved_fd);
	int status = draw_loop(s, o);

	release_stderr(held, saved_fd);
	return status;
}

int top__run(const struct gl_opts *o)
{
	bool screen = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	struct session *s;
	int status;

	if (screen && (status = terminal_usable()))
		return status;
	s = session__new(o, &status);
	if (!s)
		return status;
	status = session__start(s);
	if (!status)
		status = screen ? run_screen(s, o) : run_plain(s, o);
	session__free(s);
	return status;
}
