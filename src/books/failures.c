// SPDX-License-Identifier: BSD-2-Clause
/*
 * failures.c - failed allocations in the books: each one kept with its stack
 * in a ring per process; at an out-of-memory failure, the stacks that held the
 * most of its class and the facts of where the device's memory was
 * (explain.h); PyTorch's retry after it freed its cache.
 */
#include <stdlib.h>
#include "explain.h"
#include "failures.h"
#include "proc_int.h"

#define CUDA_ERROR_OUT_OF_MEMORY 2

/* The stacks holding the most memory of the failing call's class, largest first. */
static void top_holders(struct proc *proc, struct failure *f)
{
	const struct agg_key *k;
	struct agg *a;
	size_t it = 0;

	f->nr_holders = 0;
	while ((a = htab__next(proc->aggs, &it, (const void **)&k))) {
		uint32_t i;

		if (!a->bytes || k->cls != f->cls)
			continue;
		for (i = f->nr_holders; i > 0 && f->holders[i - 1].bytes < a->bytes; i--)
			if (i < FAILURE_HOLDERS)
				f->holders[i] = f->holders[i - 1];
		if (i >= FAILURE_HOLDERS)
			continue;
		f->holders[i] = (struct holder){ k->stack, k->cls, a->bytes, a->allocs };
		if (f->nr_holders < FAILURE_HOLDERS)
			f->nr_holders++;
	}
}

/* The failure awaiting PyTorch's retry, or NULL (none, or overwritten in the ring since). */
static struct failure *retry_awaited(struct proc *proc)
{
	if (!proc->retry_open || proc->nr_fails - proc->retry_open >= PROC_MAX_FAILURES)
		return NULL;
	return &proc->fails[(proc->retry_open - 1) % PROC_MAX_FAILURES];
}

/* After a failure of PyTorch's allocator: a segment freed (its cache) or allocated (the retry). */
void failures__retry_note(const struct explain_src *src, struct proc *proc, uint32_t stack,
			  uint8_t cls, uint64_t bytes, bool alloc)
{
	struct failure *f = retry_awaited(proc);
	bool torch;

	if (!f || cls != GL_CLASS_DEVICE)
		return;
	explain__library(src, stack, &torch);
	if (!torch)
		return;
	if (!alloc) {
		f->retry_freed += bytes;
		return;
	}
	f->retry = RETRY_SUCCEEDED;
	proc->retry_open = 0;
}

/* Where the device's memory was when an allocation ran out of it; PyTorch's retry. */
static void oom_facts(const struct explain_src *src, struct proc *proc, const struct gl_call *c,
		      struct failure *f)
{
	struct oom_facts *o = &f->facts;
	struct explain *e = malloc(sizeof(*e));
	struct failure *prev = retry_awaited(proc);

	*o = (struct oom_facts){ .request = c->bytes, .dev = c->dev };
	explain__library(src, f->stack, &o->torch_request);
	if (o->torch_request) {
		if (prev && prev != f) {
			prev->retry = RETRY_FAILED;
			f->is_retry = true;
			proc->retry_open = 0;
		} else {
			f->retry = RETRY_PENDING;
			proc->retry_open = proc->nr_fails;
		}
	}
	if (!e || explain__proc(src, proc, c->hdr.ts, e)) {
		free(e);
		return; /* no memory: the failure keeps its holders, without an explanation */
	}
	o->blocks_seen = e->blocks_seen;
	for (uint32_t i = 0; i < e->ndevs; i++) {
		const struct explain_dev *d = &e->devs[i];

		/* the failing device, or every device when it is not known */
		if (o->dev >= 0 && d->dev != o->dev && d->dev >= 0)
			continue;
		o->held += d->device_bytes;
		o->torch_reserved += d->torch_reserved;
		o->torch_allocated += d->torch_allocated;
		o->free_extents += d->ext.free_bytes;
		o->nr_free += d->ext.nr_free;
		if (d->ext.largest_free > o->largest_free)
			o->largest_free = d->ext.largest_free;
		o->blocks_outside += d->ext.outside_bytes;
		o->leak_bytes += d->leak_bytes;
		o->outside_torch += d->outside_torch;
		if (d->nlibs && d->libs[0].bytes > o->top_lib_bytes) {
			o->top_lib = d->libs[0].name;
			o->top_lib_bytes = d->libs[0].bytes;
		}
	}
	free(e);
	f->has_facts = true;
}

struct failure *failures__record(const struct explain_src *src, struct proc *proc,
				 const struct gl_call *c, uint32_t stack)
{
	struct failure *f = &proc->fails[proc->nr_fails++ % PROC_MAX_FAILURES];

	proc->t.failures++;
	if (c->rc == CUDA_ERROR_OUT_OF_MEMORY)
		proc->t.oom_failures++;
	*f = (struct failure){
		.ts = c->hdr.ts,
		.bytes = c->bytes,
		.stack = stack,
		.api = c->api,
		.cls = c->cls,
		.rc = c->rc,
		.held_device = proc->t.bytes[GL_CLASS_DEVICE],
		.stopped = c->flags & GL_CALL_HELD,
	};
	if (c->rc == CUDA_ERROR_OUT_OF_MEMORY)
		top_holders(proc, f);
	if (c->rc == CUDA_ERROR_OUT_OF_MEMORY && c->cls == GL_CLASS_DEVICE)
		oom_facts(src, proc, c, f);
	return f;
}
