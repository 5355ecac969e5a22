// SPDX-License-Identifier: BSD-2-Clause
/*
 * winlog.c - the tensor level's windows (see winlog.h): the last
 * SNAP_MAX_WINDOWS of them in a ring, the time attached, and the view the
 * reports print.
 */
#include <string.h>
#include "winlog.h"

static const char *const why_names[TIER_NR_WHY] = {
	[TIER_WHY_START] = "start",	[TIER_WHY_DUTY] = "duty",
	[TIER_WHY_GROWTH] = "growth",	[TIER_WHY_CAPACITY] = "capacity",
	[TIER_WHY_REQUEST] = "request",
};

const char *winlog__why_name(unsigned int why)
{
	return why < TIER_NR_WHY ? why_names[why] : "unknown";
}

/* The newest window's slot. */
static uint32_t newest(const struct winlog *w)
{
	return (w->windows_total - 1) % SNAP_MAX_WINDOWS;
}

void winlog__init(struct winlog *w, const char *mode, uint64_t sample_bytes, uint64_t start_ns)
{
	memset(w, 0, sizeof(*w));
	w->start_ns = start_ns;
	w->sample_bytes = sample_bytes;
	if (mode && !strcmp(mode, "off")) {
		w->mode = "off";
		w->phase = WINLOG_OFF;
	} else if (mode && (!strcmp(mode, "full") || !strcmp(mode, "sampled"))) {
		w->mode = mode[0] == 'f' ? "full" : "sampled";
		w->phase = WINLOG_FULL;
	} else {
		w->mode = "windowed";
		w->phase = WINLOG_IDLE;
	}
}

void winlog__set_start(struct winlog *w, uint64_t start_ns)
{
	w->start_ns = start_ns;
}

void winlog__open(struct winlog *w, uint64_t ts, enum tier_why why)
{
	uint32_t i;

	if (w->phase == WINLOG_OFF || w->phase == WINLOG_FULL)
		return;
	if (w->phase != WINLOG_IDLE)
		winlog__close(w, ts);
	i = w->windows_total++ % SNAP_MAX_WINDOWS;
	w->win_start[i] = ts;
	w->win_end[i] = 0;
	w->win_why[i] = why < TIER_NR_WHY ? why : TIER_WHY_REQUEST;
	w->phase = WINLOG_ARMED;
}

void winlog__tail(struct winlog *w)
{
	if (w->phase == WINLOG_ARMED)
		w->phase = WINLOG_TAIL;
}

void winlog__close(struct winlog *w, uint64_t ts)
{
	uint32_t i;

	if (w->phase != WINLOG_ARMED && w->phase != WINLOG_TAIL)
		return;
	i = newest(w);
	if (ts < w->win_start[i])
		ts = w->win_start[i];
	w->win_end[i] = ts;
	w->armed_ns += ts - w->win_start[i];
	w->last_end = ts;
	w->phase = WINLOG_IDLE;
}

void winlog__stop(struct winlog *w)
{
	w->phase = WINLOG_OFF;
}

enum winlog_phase winlog__phase(const struct winlog *w)
{
	return w->phase;
}

uint64_t winlog__last_end(const struct winlog *w)
{
	return w->last_end;
}

bool winlog__current(const struct winlog *w, uint64_t *start, enum tier_why *why)
{
	if (w->phase != WINLOG_ARMED && w->phase != WINLOG_TAIL)
		return false;
	*start = w->win_start[newest(w)];
	*why = w->win_why[newest(w)];
	return true;
}

uint64_t winlog__total(const struct winlog *w)
{
	return w->windows_total;
}

void winlog__view(const struct winlog *w, uint64_t now, struct snap_tensors *v)
{
	uint64_t total = w->windows_total, start = w->start_ns;
	uint32_t n = total < SNAP_MAX_WINDOWS ? total : SNAP_MAX_WINDOWS;
	bool open = w->phase == WINLOG_ARMED || w->phase == WINLOG_TAIL;

	memset(v, 0, sizeof(*v));
	v->mode = w->mode;
	v->sample_bytes = w->sample_bytes;
	v->windows_total = total;
	v->armed = w->phase == WINLOG_FULL || open;
	v->until_ns = w->phase == WINLOG_IDLE ? w->last_end : 0;
	if (w->phase == WINLOG_FULL)
		v->coverage = w->sample_bytes ? "sampled" : "complete";
	else if (w->phase == WINLOG_OFF)
		v->coverage = "none";
	else if (total == 1 && w->phase == WINLOG_ARMED && w->win_start[0] <= start)
		v->coverage = "complete"; /* the first window, still open */
	else
		v->coverage = "windowed";
	v->armed_s = w->armed_ns / 1e9;
	if (open && now > w->win_start[newest(w)])
		v->armed_s += (now - w->win_start[newest(w)]) / 1e9;
	if (w->phase == WINLOG_FULL)
		v->armed_s = now > start ? (now - start) / 1e9 : 0;
	v->nwindows = n;
	for (uint32_t j = 0; j < n; j++) {
		uint32_t i = (total - n + j) % SNAP_MAX_WINDOWS;

		v->windows[j] = (struct snap_window){
			.start_s = w->win_start[i] > start ? (w->win_start[i] - start) / 1e9 : 0,
			.end_s = w->win_end[i] ? (w->win_end[i] - start) / 1e9 : -1,
			.why = winlog__why_name(w->win_why[i]),
		};
	}
}
