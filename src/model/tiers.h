/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tiers.h - when the tensor level is traced.
 *
 * The driver level (segments, VMM, pinned host memory) is traced always and
 * exactly: a training step makes a fraction of a driver call. PyTorch's
 * allocator probes fire for every tensor block, hundreds of times a step, so
 * by default (--tensors windowed) they are attached only in windows: the
 * first when tracing starts, then when a process's driver-level memory grows
 * past its high-water mark, when a device nears its capacity, on request
 * (SIGUSR1, serve's POST /tensors/arm), and on a duty cycle, with automatic
 * windows bounded to --tensor-duty of the time. A window traces both probes
 * for --tensor-window, then frees only for a short tail (blocks in flight at
 * its end are given back), then neither: detached, the USDT semaphores drop
 * to 0 and PyTorch skips the probes. The next window forgets the blocks the
 * last one left (their frees were not seen) and starts over. --tensors full
 * keeps both probes attached all the time; --tensors off never attaches them.
 */
#ifndef GL_TIERS_H
#define GL_TIERS_H

#include <stdbool.h>
#include <stdint.h>
#include "snapshot.h"
#include "winlog.h"

struct session;
struct tiers;

/* What a window did, for a hook (a recording keeps it). */
enum tier_event {
	TIER_OPEN = 1, /* a window opened (forgot: the last window's blocks were forgotten) */
	TIER_TAIL,     /* its tail began: frees only; the blocks stop being PyTorch's whole map */
	TIER_CLOSE,    /* it closed: neither probe until the next */
	TIER_STOP,     /* windows stopped (the kernel's books could not be reset) */
};

/* Told of every window event, in the order the books saw them. */
struct tier_hook {
	void (*window)(void *ctx, enum tier_event ev, enum tier_why why, uint64_t ts, bool forgot);
	void *ctx;
};

/* NULL with errno set. The session must outlive it. */
struct tiers *tiers__new(struct session *s);
void tiers__free(struct tiers *t);
/* Periodic work: opens and closes windows. Returns 0 or -errno (said on stderr). */
int tiers__step(struct tiers *t, uint64_t now_ns);
/* Asks for a window now (async-signal-safe: the next step opens it). */
void tiers__request(struct tiers *t);
/* What the tensor level covers now, for a snapshot (valid until the next step). */
const struct snap_tensors *tiers__view(struct tiers *t, uint64_t now_ns);
/*
 * Tells hook (copied) of every window event from now on, and at once of the
 * window open now, if any (as opened with nothing forgotten: the hook saw
 * nothing before it). Its calls come after the books have applied every
 * record the tracer had drained before the event.
 */
void tiers__set_hook(struct tiers *t, const struct tier_hook *hook);

#endif /* GL_TIERS_H */
