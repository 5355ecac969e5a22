/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tiers.h - when the tensor level is traced.
 *
 * The driver level (segments, VMM, pinned host memory) is traced always and
 * exactly: a training step makes a fraction of a driver call. PyTorch's
 * allocator probes fire for every tensor block, hundreds of times a step, so
 * by default (--tensors windowed) they are attached only in windows, each
 * process's its own (the tracer's links for its PID: the other processes'
 * semaphores stay 0): its first when it is found (tracing starts, or later in
 * a host-wide session), then when its driver-level memory grows past its
 * high-water mark, when its device nears its capacity, and on its own duty
 * cycle, with its automatic windows bounded to --tensor-duty of the time; a
 * request (SIGUSR1, serve's POST /tensors/arm) opens one in every process
 * (each as soon as it is between windows). A window traces both probes
 * for --tensor-window, then frees only for a short tail (blocks in flight at
 * its end are given back), then neither: detached, the USDT semaphores drop
 * to 0 and PyTorch skips the probes. The process's next window forgets the
 * blocks its last one left (their frees were not seen) and starts over. --tensors full
 * keeps both probes attached all the time; --tensors off never attaches them.
 */
#ifndef GL_TIERS_H
#define GL_TIERS_H

#include <stdbool.h>
#include <stdint.h>
#include "model/snapshot.h"
#include "model/winlog.h"

struct session;
struct tiers;

/* What a window did, for a hook (a recording keeps it). */
enum tier_event {
	TIER_OPEN = 1, /* a window opened (forgot: the last window's blocks were forgotten) */
	TIER_TAIL,     /* its tail began: frees only; the blocks stop being PyTorch's whole map */
	TIER_CLOSE,    /* it closed: neither probe until the next */
	TIER_STOP,     /* windows stopped (the kernel's books could not be reset) */
};

/* Told of every window event (of process pid's windows), in the order the books saw them. */
struct tier_hook {
	void (*window)(void *ctx, int pid, enum tier_event ev, enum tier_why why, uint64_t ts,
		       bool forgot);
	void *ctx;
};

/* NULL with errno set. The session must outlive it. */
struct tiers *tiers__new(struct session *s);
void tiers__free(struct tiers *t);
/* Periodic work: opens and closes windows. Returns 0 or -errno (said on stderr). */
int tiers__step(struct tiers *t, uint64_t now_ns);
/* Asks for a window now (async-signal-safe: the next step opens it). */
void tiers__request(struct tiers *t);
/*
 * What the tensor level covers now over the session (valid until the next
 * step): the mode, whether any process is armed, every process's windows
 * counted (the list of windows is each process's: tiers__proc_view).
 */
const struct snap_tensors *tiers__view(struct tiers *t, uint64_t now_ns);
/* What it covers now in process pid (none of its own: nothing traced yet), into *out. */
void tiers__proc_view(struct tiers *t, int pid, uint64_t now_ns, struct snap_tensors *out);
/*
 * Tells hook (copied) of every window event from now on, and at once of the
 * windows open now (as opened with nothing forgotten: the hook saw
 * nothing before it). Its calls come after the books have applied every
 * record the tracer had drained before the event.
 */
void tiers__set_hook(struct tiers *t, const struct tier_hook *hook);

#endif /* GL_TIERS_H */
