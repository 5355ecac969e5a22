// SPDX-License-Identifier: BSD-2-Clause
/*
 * top.c - `gpuleak top`: a refreshing view of processes and their growing
 * stacks, like the top-style tools. On a terminal the screen is redrawn and
 * keys are read ('q' quits, 's' switches the sort); elsewhere each refresh is
 * printed after a separator line, as plain text.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "report/report.h"
#include "report/snapshot.h"
#include "session.h"
#include "top.h"
#include "util/log.h"

#define STEP_MS 100

struct term {
	bool raw;
	struct termios saved;
};

static void term_raw(struct term *t)
{
	struct termios tio;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved))
		return;
	tio = t->saved;
	tio.c_lflag &= ~(ICANON | ECHO);
	tio.c_cc[VMIN] = 0;
	tio.c_cc[VTIME] = 0;
	t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &tio) == 0;
}

static void term_restore(struct term *t)
{
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Reads pending keys; returns true when the user asked to quit. */
static bool read_keys(struct term *t, struct top_opts *to, bool *redraw)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char c;

	while (t->raw && poll(&pfd, 1, 0) == 1 && read(STDIN_FILENO, &c, 1) == 1) {
		if (c == 'q' || c == 'Q')
			return true;
		if (c == 's' || c == 'S') {
			to->sort_bytes = !to->sort_bytes;
			*redraw = true;
		}
	}
	return false;
}

static void draw(struct session *s, const struct top_opts *to, bool tty)
{
	struct snapshot *snap = session__snapshot(s, 0);

	if (!snap)
		return;
	if (tty)
		fputs("\033[H\033[2J", stdout);
	else
		fputs("---\n", stdout);
	report__top(stdout, snap, to);
	if (tty)
		fputs("\n[q] quit  [s] sort by growth/bytes\n", stdout);
	fflush(stdout);
	snapshot__free(snap);
}

int top__run(const struct gl_opts *o)
{
	struct top_opts to = { .sort_bytes = o->sort == GL_SORT_BYTES, .max_stacks = o->top ? o->top : 20 };
	bool tty = isatty(STDOUT_FILENO), done = false, redraw = false;
	struct term term = {};
	struct session *s;
	uint64_t next;
	int status;

	s = session__new(o, &status);
	if (!s)
		return status;
	status = session__start(s);
	if (tty)
		term_raw(&term);
	next = 0;
	while (!status && !done) {
		struct timespec ts;
		uint64_t now;

		status = session__step(s, STEP_MS, &done);
		if (read_keys(&term, &to, &redraw))
			done = true;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
		if (!status && (now >= next || redraw || done)) {
			draw(s, &to, tty);
			next = now + o->interval_ms * 1000000ULL;
			redraw = false;
		}
	}
	term_restore(&term);
	session__free(s);
	return status;
}
