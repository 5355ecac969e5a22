// SPDX-License-Identifier: BSD-2-Clause
/*
 * snap_failures.c - a process's failed allocations in its snapshot: the call,
 * its CUDA error and stack, the stacks that held memory then, and for an
 * out-of-memory failure its facts, cause and retry.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "books/books.h"
#include "books/explain.h"
#include "snapshot_int.h"
#include "trace/probes.h"

static const char *retry_name(uint8_t r)
{
	switch (r) {
	case RETRY_PENDING: return "pending";
	case RETRY_SUCCEEDED: return "succeeded";
	case RETRY_FAILED: return "failed";
	default: return NULL;
	}
}

static int fill_oom(const struct failure *f, struct snap_failure *sf)
{
	const struct oom_facts *o = &f->facts;
	struct oom_explain ex;
	struct snap_oom *so = calloc(1, sizeof(*so));

	if (!so)
		return -ENOMEM;
	oom__classify(o, &ex);
	*so = (struct snap_oom){
		.cause = oom__cause_name(ex.cause),
		.why = strdup(ex.why),
		.action = ex.action,
		.dev = o->dev,
		.torch_request = o->torch_request,
		.blocks_seen = o->blocks_seen,
		.held = o->held,
		.torch_reserved = o->torch_reserved,
		.torch_allocated = o->torch_allocated,
		.free_extents = o->free_extents,
		.largest_free = o->largest_free,
		.nr_free = o->nr_free,
		.leak_bytes = o->leak_bytes,
		.outside_torch = o->outside_torch,
		.top_lib = o->top_lib,
		.top_lib_bytes = o->top_lib_bytes,
		.nvml = o->nvml,
		.dev_total = o->dev_total,
		.dev_free = o->dev_free,
		.others_used = o->others_used,
		.retry = retry_name(f->retry),
		.is_retry = f->is_retry,
		.retry_freed = f->retry_freed,
	};
	sf->oom = so;
	return so->why ? 0 : -ENOMEM;
}

int snap_failures__fill(struct books *b, struct symbolizer *sym, struct proc *proc,
			const struct snapshot_opts *o, struct snap_proc *sp)
{
	uint32_t n = proc__nr_failures(proc);

	sp->failures_list = calloc(n ? n : 1, sizeof(*sp->failures_list));
	if (!sp->failures_list)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct failure *f = proc__failure(proc, i);
		struct snap_failure *sf = &sp->failures_list[i];

		sf->ts = f->ts;
		sf->bytes = f->bytes;
		sf->held_device = f->held_device;
		sf->api = probe__name(f->api);
		sf->error = cuda__error_name(f->rc);
		sf->rc = f->rc;
		sf->cls = f->cls;
		sf->stack = calloc(1, sizeof(*sf->stack));
		if (!sf->stack || snap_stacks__frames(b, sym, o->python, f->stack, sf->stack))
			return -ENOMEM;
		sp->nfailures++;
		if (f->has_facts && fill_oom(f, sf))
			return -ENOMEM;
		if (!f->nr_holders)
			continue;
		sf->holders = calloc(f->nr_holders, sizeof(*sf->holders));
		if (!sf->holders)
			return -ENOMEM;
		for (uint32_t h = 0; h < f->nr_holders; h++) {
			struct snap_stack *hs = &sf->holders[h];

			hs->cls = f->holders[h].cls;
			hs->outstanding_bytes = f->holders[h].bytes;
			hs->outstanding_allocs = f->holders[h].allocs;
			sf->nholders++;
			if (snap_stacks__frames(b, sym, o->python, f->holders[h].stack, hs))
				return -ENOMEM;
		}
	}
	return 0;
}
