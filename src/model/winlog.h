/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * winlog.h - the log of the tensor level's windows as the reports name them:
 * when PyTorch's allocator probes were attached, why, and what the figures of
 * class torch_block cover now. Pure (no clock, no tracer): tiers.c keeps one
 * for a live session and replay.c rebuilds one from a recording's window
 * records, so that both give the same snap_tensors for the same events.
 */
#ifndef GL_WINLOG_H
#define GL_WINLOG_H

#include <stdbool.h>
#include <stdint.h>
#include "snapshot.h"

enum winlog_phase {
	WINLOG_OFF,   /* --tensors off: never attached */
	WINLOG_FULL,  /* --tensors full or sampled: always attached */
	WINLOG_ARMED, /* windowed, in a window: both probes */
	WINLOG_TAIL,  /* windowed, the window's tail: frees only */
	WINLOG_IDLE,  /* windowed, between windows (or before the first) */
};

/* Why a window was opened (snap_window.why names them; recordings keep the number). */
enum tier_why {
	TIER_WHY_START = 0, /* tracing started */
	TIER_WHY_DUTY,	    /* the duty cycle */
	TIER_WHY_GROWTH,    /* a process's driver-level memory passed its high-water mark */
	TIER_WHY_CAPACITY,  /* a device is nearly full */
	TIER_WHY_REQUEST,   /* SIGUSR1 or POST /tensors/arm */
	TIER_NR_WHY,
};

/* Fields are winlog.c's; embed it and use the functions. */
struct winlog {
	enum winlog_phase phase;
	const char *mode; /* static */
	uint64_t sample_bytes;
	uint64_t start_ns; /* tracing started */
	uint64_t last_end; /* end of the last window (0: none yet) */
	uint64_t armed_ns; /* closed windows */
	uint64_t windows_total;
	uint64_t win_start[SNAP_MAX_WINDOWS], win_end[SNAP_MAX_WINDOWS];
	uint8_t win_why[SNAP_MAX_WINDOWS];
};

/*
 * Starts an empty log: mode as --tensors names it ("off", "full", "sampled";
 * anything else is "windowed", idle until its first window), sample_bytes as
 * --tensor-sample (0: every stack), tracing started at start_ns.
 */
void winlog__init(struct winlog *w, const char *mode, uint64_t sample_bytes, uint64_t start_ns);
/* Tracing started at start_ns after all (a recording whose session record was lost). */
void winlog__set_start(struct winlog *w, uint64_t start_ns);
/* A window opens at ts (windowed only; one still open is closed at ts first). */
void winlog__open(struct winlog *w, uint64_t ts, enum tier_why why);
/* The open window's tail starts (frees only). */
void winlog__tail(struct winlog *w);
/* The open window closes at ts (a ts before its start counts as its start). */
void winlog__close(struct winlog *w, uint64_t ts);
/* No more windows: the tensor level's coverage is "none" from now on. */
void winlog__stop(struct winlog *w);
enum winlog_phase winlog__phase(const struct winlog *w);
/* End of the last closed window (0: none). */
uint64_t winlog__last_end(const struct winlog *w);
/* Whether a window is open (in its tail too); then when it opened and why. */
bool winlog__current(const struct winlog *w, uint64_t *start, enum tier_why *why);
/* Windows opened so far. */
uint64_t winlog__total(const struct winlog *w);
/* What the tensor level covers at now, into *out (its strings are static). */
void winlog__view(const struct winlog *w, uint64_t now, struct snap_tensors *out);
/* The name of why (as in the JSON); "unknown" out of range. */
const char *winlog__why_name(unsigned int why);

#endif /* GL_WINLOG_H */
