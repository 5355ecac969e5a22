// SPDX-License-Identifier: BSD-2-Clause
/*
 * pattern.c - leak patterns from a leaking stack's counts and frames. Each
 * hint says what it rests on; a stack whose evidence fits none gets none.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "pattern.h"
#include "gpuleak_abi.h"
#include "util/fmt.h"

#define MIN_KEPT 4 /* a pattern of steps needs this many of them */

static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= len && len >= 4)
		memcpy(buf + len - 4, "...", 4);
}

/* The first frame (innermost first) whose function contains one of the words, or NULL. */
static const struct snap_frame *frame_with(const struct snap_stack *st, const char *const *words)
{
	for (uint32_t i = 0; i < st->nframes; i++) {
		const char *fn = st->frames[i].function;

		for (size_t w = 0; fn && words[w]; w++)
			if (strstr(fn, words[w]))
				return &st->frames[i];
	}
	return NULL;
}

static const char *fn_name(const struct snap_frame *f)
{
	return f->function ? f->function : "?";
}

static bool has_python(const struct snap_stack *st)
{
	for (uint32_t i = 0; i < st->nframes; i++)
		if (st->frames[i].kind && !strcmp(st->frames[i].kind, "python"))
			return true;
	return false;
}

const char *pattern__of(const struct snap_stack *st, char *evidence, size_t len)
{
	static const char *const autograd[] = { "autograd::Engine", "evaluate_function", "backward",
						NULL };
	static const char *const forward[] = { "forward", "__call__", "_call_impl", NULL };
	const struct snap_frame *f;
	uint64_t freed = st->allocs > st->outstanding_allocs ? st->allocs - st->outstanding_allocs :
							       0;
	char b[2][32];

	evidence[0] = '\0';
	if (!st->verdict || strcmp(st->verdict, "leak"))
		return NULL;
	if (st->cls == GL_CLASS_HOST_PINNED && st->outstanding_allocs >= MIN_KEPT) {
		say(evidence, len,
		    "%llu pinned host buffers allocated here are held (%s), %llu "
		    "freed",
		    (unsigned long long)st->outstanding_allocs,
		    fmt_bytes(st->outstanding_bytes, b[0], sizeof(b[0])),
		    (unsigned long long)freed);
		return "pinned buffers kept";
	}
	if (st->cls != GL_CLASS_TORCH_BLOCK && st->cls != GL_CLASS_DEVICE)
		return NULL;
	/* one tensor (or two) re-created larger each time: the old one freed, the new larger */
	if (st->outstanding_allocs <= 2 && freed >= MIN_KEPT && st->frees >= MIN_KEPT) {
		say(evidence, len,
		    "%llu allocation%s held (%s) after %llu re-allocations: each "
		    "new one larger, the old freed, as a tensor attribute extended "
		    "with torch.cat is",
		    (unsigned long long)st->outstanding_allocs,
		    st->outstanding_allocs == 1 ? "" : "s",
		    fmt_bytes(st->outstanding_bytes, b[0], sizeof(b[0])),
		    (unsigned long long)freed);
		return "module attribute growing";
	}
	if (st->outstanding_allocs < MIN_KEPT || freed * 4 > st->allocs)
		return NULL; /* most of what it allocated is freed: no step keeps its own */
	if (st->cls == GL_CLASS_TORCH_BLOCK && (f = frame_with(st, autograd))) {
		say(evidence, len,
		    "%llu of %llu blocks allocated under %s are held (%s): tensors "
		    "of the backward pass kept from step to step, as a loss kept "
		    "with its graph keeps them",
		    (unsigned long long)st->outstanding_allocs, (unsigned long long)st->allocs,
		    fn_name(f), fmt_bytes(st->outstanding_bytes, b[0], sizeof(b[0])));
		return "graph kept alive across steps";
	}
	f = frame_with(st, forward);
	say(evidence, len,
	    "%llu of %llu allocated here are held (%s)%s%s: one more is kept each "
	    "step, %s",
	    (unsigned long long)st->outstanding_allocs, (unsigned long long)st->allocs,
	    fmt_bytes(st->outstanding_bytes, b[0], sizeof(b[0])), f ? ", under " : "",
	    f ? fn_name(f) : "",
	    has_python(st) ? "as when outputs or losses are stored in a list" :
			     "as when each step's buffer is kept and never freed");
	return "outputs kept across steps";
}

const char *pattern__fix(const struct snap_stack *st, const char *pattern)
{
	bool py = has_python(st);

	if (!strcmp(pattern, "pinned buffers kept"))
		return py ? "reuse one pinned buffer across steps, or drop the step's reference "
			    "once its copy is done" :
			    "reuse one pinned buffer across steps, or cuMemFreeHost each once "
			    "its copy is done";
	if (!strcmp(pattern, "module attribute growing"))
		return py ? "keep a bounded window (slice it, or a deque with maxlen) or "
			    ".detach().cpu() copies" :
			    "free the old buffer when a larger one replaces it, or bound its growth";
	if (!strcmp(pattern, "graph kept alive across steps"))
		return "accumulate loss.item() (or loss.detach()), not the loss with its graph";
	return py ? "keep .item() of numbers and .detach().cpu() of tensors that are kept, "
		    "or do not keep them" :
		    "free each step's buffer (cuMemFree) once it is used, or reuse one";
}
