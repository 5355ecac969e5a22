// SPDX-License-Identifier: BSD-2-Clause
/*
 * books.c - applying records to the books.
 *
 * A stack record (at the entry of an allocating call) is unwound, interned and
 * parked per thread; the call record (at its return) with the same sequence
 * number picks it up. BPF has already decided what a call did (struct
 * gl_call.op); user space repeats it on its own tables so that the two can be
 * compared, and attributes each byte to a stack.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "analysis.h"
#include "books.h"
#include "explain.h"
#include "failures.h"
#include "prefetch.h"
#include "proc_int.h"
#include "stacks/native/unwind.h"
#include "stacks/python/python.h"
#include "trace/event.h"
#include "trace/probes.h"
#include "util/log.h"
#include "util/procfs.h"

struct books {
	struct modules *mods;
	struct stacks *stacks;
	struct unwinder *unwinder;
	struct python *python;
	struct procs *procs;
	struct books_opts opts;
	struct books_hooks hooks;
	struct books_counters counters;
	uint64_t now;
	struct prefetches *prefetched; /* maps read while processes lived */
	uint32_t replay_stack;	       /* books__replay_call: the stack the call's entry parked */
	uint32_t taken;		       /* the parked stack the record being applied took */
	bool torch_map_partial; /* PyTorch's blocks stopped being traced once (tensor windows) */
	struct books_observer observers[BOOKS_MAX_OBSERVERS];
};

struct books *books__new(struct modules *m, struct stacks *s, struct unwinder *u, struct python *py,
			 const struct books_opts *o)
{
	struct books *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->mods = m;
	b->stacks = s;
	b->unwinder = u;
	b->python = py;
	b->opts = *o;
	b->procs = procs__new();
	b->prefetched = prefetches__new();
	if (!b->procs || !b->prefetched) {
		procs__free(b->procs);
		prefetches__free(b->prefetched);
		free(b);
		return NULL;
	}
	return b;
}

void books__prefetch_maps(struct books *b, int pid)
{
	if (!b->opts.no_proc_files)
		prefetches__add(b->prefetched, b->mods, pid);
}

void books__free(struct books *b)
{
	if (!b)
		return;
	prefetches__free(b->prefetched);
	procs__free(b->procs);
	free(b);
}

void books__set_hooks(struct books *b, const struct books_hooks *h)
{
	b->hooks = *h;
}

const struct books_hooks *books__hooks(const struct books *b)
{
	return &b->hooks;
}

struct procs *books__procs(struct books *b)
{
	return b->procs;
}

struct stacks *books__stacks(struct books *b)
{
	return b->stacks;
}

struct modules *books__modules(struct books *b)
{
	return b->mods;
}

struct python *books__python(struct books *b)
{
	return b->python;
}

const struct books_opts *books__opts(const struct books *b)
{
	return &b->opts;
}

const struct books_counters *books__counters(const struct books *b)
{
	return &b->counters;
}

void books__torch_map_partial(struct books *b)
{
	b->torch_map_partial = true;
}

bool books__torch_map_complete(const struct books *b)
{
	return !b->torch_map_partial;
}

struct explain_src books__explain_src(struct books *b)
{
	return (struct explain_src){ .stacks = books__stacks(b),
				     .mods = books__modules(b),
				     .torch_map_complete = books__torch_map_complete(b) };
}

uint64_t books__now(const struct books *b)
{
	return b->now;
}

/* A process ends: its running tables go (what it held is kept where asked). */
static void retire(struct books *b, struct proc *proc)
{
	if (b->opts.keep_at_exit)
		proc__keep_at_exit(proc);
	proc__retire(proc);
}

static struct proc *proc_of(struct books *b, const struct gl_hdr *h)
{
	struct proc *proc, *old;
	bool created, live;

	proc = procs__get(b->procs, h->pid, h->start_time, &created);
	if (!proc || !created)
		return proc;
	/* a new process with the PID of one whose exit record was lost */
	for (uint32_t i = 0; (old = procs__at(b->procs, i)); i++) {
		if (old != proc && old->t.pid == proc->t.pid && !old->t.exited) {
			old->t.exited = true;
			old->t.exit_ns = h->ts;
			retire(b, old);
		}
	}
	proc->t.first_ns = h->ts;
	proc->device_series = series__new(b->opts.series_width_ns);
	live = !b->opts.no_proc_files && procfs__same_process(h->pid, h->start_time);
	if (!live) {
		/* whatever has this PID now, if anything, is not the process of these records */
		snprintf(proc->t.comm, sizeof(proc->t.comm), "?");
		proc->t.ns_pid = 0;
		proc->t.ppid = 0;
	}
	if (!b->opts.no_proc_files) {
		struct addr_map *early = prefetches__take(b->prefetched, proc);

		/* the process's maps now; if it is gone, as they were while it ran */
		proc->am = live ? addr_map__new(b->mods, h->pid) : NULL;
		if (!proc->am)
			proc->am = early;
		else
			addr_map__free(early);
	}
	/* its parent and ranks as its mapping's record said (records, not /proc) */
	prefetches__parent_of(b->prefetched, proc);
	if (b->hooks.proc_new)
		b->hooks.proc_new(b->hooks.ctx, proc);
	if (b->opts.attach_python && b->python)
		python__attach(b->python, h->pid);
	return proc;
}

/*
 * Address -> frame. On a miss the process's maps are read again (a library
 * was loaded), backing off while misses persist (JIT code has no file). A
 * process whose maps could not be read at its first record (gone already)
 * stays without: its PID may name another process by now.
 */
static void resolve_frame(struct books *b, struct proc *proc, uint64_t now, uint64_t addr,
			  struct frame *f)
{
	uint64_t off;
	uint32_t mod = addr_map__resolve(proc->am, addr, &off);

	if (!mod && addr_map__refresh_after_miss(proc->am, now))
		mod = addr_map__resolve(proc->am, addr, &off);
	if (mod)
		*f = (struct frame){ .addr = off, .mod = mod, .kind = FRAME_NATIVE };
	else
		*f = (struct frame){ .addr = addr, .kind = FRAME_UNKNOWN };
}

static uint32_t intern_stack(struct books *b, struct proc *proc, const struct stack_view *v)
{
	struct stack_owner who = { .pid = proc->t.pid,
				   .start_time = proc->t.start_time,
				   .am = proc->am };
	struct frame frames[GL_MAX_FP_FRAMES + GL_MAX_PY_FRAMES + 1];
	uint64_t ips[UNWIND_MAX_FRAMES];
	int n_ips, n = 0;

	n_ips = unwind__stack(b->unwinder, &who, v, ips, UNWIND_MAX_FRAMES);
	if (n_ips <= 0) /* no native stack: the traced function itself still tells something */
		frames[n++] = (struct frame){ .mod = v->rec->api, .kind = FRAME_API };
	for (int i = 0; i < n_ips && n < (int)(sizeof(frames) / sizeof(frames[0])); i++) {
		/* return addresses point after the call: symbolize the call itself */
		uint64_t addr = i == 0 ? ips[i] : ips[i] - 1;

		resolve_frame(b, proc, v->rec->hdr.ts, addr, &frames[n++]);
	}
	if (b->python)
		n = python__merge(b->python, &who, v, frames, n,
				  sizeof(frames) / sizeof(frames[0]));
	return stacks__intern(b->stacks, frames, n);
}

static void apply_stack(struct books *b, const struct stack_view *v)
{
	struct pending_key k;
	struct pending *p;
	struct proc *proc;

	proc = proc_of(b, &v->rec->hdr);
	if (!proc || !proc->pending)
		return;
	k = (struct pending_key){ v->rec->hdr.tid, v->rec->seq % GL_MAX_NEST };
	p = htab__upsert(proc->pending, &k, NULL);
	if (!p)
		return;
	p->seq = v->rec->seq;
	p->stack = intern_stack(b, proc, v);
	b->taken = p->stack;
}

/* The stack parked by this call's entry, or a stack naming the API alone. */
static uint32_t take_stack(struct books *b, struct proc *proc, const struct gl_call *c)
{
	struct pending_key k = { c->hdr.tid, c->seq % GL_MAX_NEST };
	struct pending *p = htab__lookup(proc->pending, &k);
	struct frame api = { .mod = c->api, .kind = FRAME_API };
	uint32_t stack;

	if (b->replay_stack) {
		b->taken = b->replay_stack;
		b->replay_stack = 0;
		return b->taken;
	}
	if (p && p->seq == c->seq) {
		stack = p->stack;
		htab__delete(proc->pending, &k);
		b->taken = stack;
		return stack;
	}
	/* a sampled-out tensor block has no stack by design */
	if ((probe__desc(c->api)->flags & GL_API_STACK) &&
	    !(b->opts.sample_bytes && c->api == GL_API_pytorch_malloc))
		b->counters.stack_missing++;
	return stacks__intern(b->stacks, &api, 1);
}

static struct agg *agg_of(struct books *b, struct proc *proc, uint32_t stack, uint8_t cls)
{
	struct agg_key k = { .stack = stack, .cls = cls };
	bool created;
	struct agg *a = htab__upsert(proc->aggs, &k, &created);

	if (a && created)
		a->series = series__new(b->opts.series_width_ns);
	return a;
}

static void account(struct proc *proc, struct agg *a, uint8_t cls, int dev, int64_t bytes,
		    int64_t n, uint64_t ts)
{
	if (cls >= GL_CLASS_SLOTS)
		return;
	if (cls == GL_CLASS_DEVICE) {
		if (dev >= 0 && dev < PROC_MAX_DEVICES)
			proc->t.dev_bytes[dev] += bytes;
		else
			proc->t.unknown_dev_bytes += bytes;
	}
	proc->t.bytes[cls] += bytes;
	proc->t.nallocs[cls] += n;
	if (cls == GL_CLASS_DEVICE && proc->t.bytes[cls] > proc->t.peak_device)
		proc->t.peak_device = proc->t.bytes[cls];
	if (cls == GL_CLASS_DEVICE)
		series__add(proc->device_series, ts, proc->t.bytes[cls]);
	if (!a)
		return;
	a->bytes += bytes;
	a->allocs += n;
	if ((cls == GL_CLASS_DEVICE || cls == GL_CLASS_TORCH_BLOCK) && dev >= 0 &&
	    dev < PROC_MAX_DEVICES)
		a->dev_bytes[dev] += bytes;
	if (a->bytes > a->peak_bytes)
		a->peak_bytes = a->bytes;
	series__add(a->series, ts, a->bytes);
}

static void remove_alloc(struct books *b, struct proc *proc, const struct alloc_key *k,
			 const struct alloc_val *v, uint64_t ts)
{
	struct agg *a = agg_of(b, proc, v->stack, v->cls);

	if (a) {
		a->total_frees++;
		a->free_bytes += v->size;
	}
	if (v->cls < GL_CLASS_SLOTS)
		proc->t.free_bytes[v->cls] += v->size;
	account(proc, a, v->cls, v->dev, -(int64_t)v->size, -1, ts);
	htab__delete(proc->allocs, k);
}

/*
 * Whether context ctx was torn down after the call of record c entered (the
 * teardown's number is above the count the call noted, gl_call.teardowns):
 * the call acted on memory the driver dropped with that context. A call that
 * entered after the teardown acts on a new context at the same address.
 */
static bool ctx_gone(const struct proc *proc, uint64_t ctx, const struct gl_call *c)
{
	for (uint16_t i = 0; ctx && i < proc->nr_ctxs; i++)
		if (proc->ctxs[i].dead_ctx == ctx && proc->ctxs[i].dead_nr > c->teardowns)
			return true;
	return false;
}

/*
 * The key of a new allocation is still in these books. When BPF saw it too,
 * the release of the old one was never seen: it goes. Otherwise the old one's
 * free is in flight (its entry took the key out of BPF's books): it stays
 * outstanding under its number until that free's record comes.
 */
static void displace(struct books *b, struct proc *proc, const struct gl_call *c,
		     const struct alloc_key *k, struct alloc_val *v)
{
	struct alloc_key fk = { .key = v->id, .kind = ALLOC_KIND_FREEING };
	struct alloc_val old = *v, *nv;

	if (!(c->flags & GL_CALL_REPLACED) && old.id && c->id) {
		nv = htab__upsert(proc->allocs, &fk, NULL);
		if (nv) {
			*nv = old;
			htab__delete(proc->allocs, k);
			return;
		}
	}
	remove_alloc(b, proc, k, &old, c->hdr.ts);
}

static void apply_alloc(struct books *b, struct proc *proc, const struct gl_call *c)
{
	struct alloc_key k = { .key = c->key, .kind = c->kind };
	uint32_t stack = take_stack(b, proc, c);
	struct alloc_val *v, copy;
	struct agg *a;
	int dev;

	proc->t.alloc_calls++;
	if (c->flags & GL_CALL_TABLE_FULL)
		return; /* BPF does not hold it either: both books leave it out */
	v = htab__lookup(proc->allocs, &k);
	if (v)
		displace(b, proc, c, &k, v);
	v = htab__upsert(proc->allocs, &k, NULL);
	if (!v)
		return;
	*v = (struct alloc_val){
		.size = c->bytes,
		.id = c->id,
		.stack = stack,
		.ctx = proc__ctx_index(proc, c->ctx),
		.cls = c->cls,
		.dev = (int8_t)c->dev,
		.t_ms = c->hdr.ts > proc->t.first_ns ?
				(uint32_t)((c->hdr.ts - proc->t.first_ns) / 1000000 + 1) :
				1,
	};
	if (v->dev < 0 && v->ctx && proc->ctxs[v->ctx - 1].dev >= 0)
		v->dev = (int8_t)proc->ctxs[v->ctx - 1].dev; /* learned by proc__learn_device() */
	dev = v->dev;
	if (dev < 0 && c->cls == GL_CLASS_DEVICE && c->kind == GL_KIND_DPTR)
		proc__note_unknown_dev(proc, c->key, c->bytes);
	if (c->cls < GL_CLASS_SLOTS)
		proc->t.alloc_bytes[c->cls] += c->bytes;
	a = agg_of(b, proc, stack, c->cls);
	if (a) {
		a->total_allocs++;
		a->alloc_bytes += c->bytes;
		if (!a->first_ns)
			a->first_ns = c->hdr.ts;
		a->last_ns = c->hdr.ts;
	}
	account(proc, a, c->cls, dev, c->bytes, 1, c->hdr.ts);
	if (c->kind == GL_KIND_TORCH && proc->nr_unknown)
		proc__learn_device(proc, c->key, c->dev);
	if (proc->retry_open) {
		struct explain_src src = books__explain_src(b);

		failures__retry_note(&src, proc, stack, c->cls, c->bytes, true);
	}
	if (c->kind != GL_KIND_HANDLE && c->kind != GL_KIND_MAPPING && c->kind != GL_KIND_VA &&
	    ctx_gone(proc, c->ctx, c)) {
		/* made in flight while its context was torn down: dropped with it */
		copy = *v;
		if (copy.cls != GL_CLASS_ADDRESS && copy.cls != GL_CLASS_IMPORTED)
			proc->t.dropped_bytes += copy.size;
		remove_alloc(b, proc, &k, &copy, c->hdr.ts);
	}
}

/*
 * A free BPF matched. Its key may name a newer allocation already (see
 * displace()): the number says which one it took.
 */
static void apply_free(struct books *b, struct proc *proc, const struct gl_call *c)
{
	struct alloc_key k = { .key = c->key, .kind = c->kind };
	struct alloc_key fk = { .key = c->id, .kind = ALLOC_KIND_FREEING };
	struct alloc_val *v = htab__lookup(proc->allocs, &k), copy;

	proc->t.free_calls++;
	if (v && c->id && v->id && v->id != c->id) {
		struct alloc_val *f = htab__lookup(proc->allocs, &fk);

		if (f) {
			v = f;
			k = fk;
		}
	} else if (!v && c->id) {
		v = htab__lookup(proc->allocs, &fk);
		k = fk;
	}
	if (!v) {
		if (c->cls != GL_CLASS_ADDRESS && c->cls != GL_CLASS_IMPORTED &&
		    ctx_gone(proc, c->ctx, c) && proc->t.dropped_bytes >= c->bytes) {
			/* freed in flight while its context was torn down: the teardown's
			 * record came first and dropped what this call had freed */
			proc->t.dropped_bytes -= c->bytes;
			return;
		}
		b->counters.user_unmatched++;
		return;
	}
	copy = *v;
	remove_alloc(b, proc, &k, &copy, c->hdr.ts);
	if (proc->retry_open) {
		struct explain_src src = books__explain_src(b);

		failures__retry_note(&src, proc, copy.stack, copy.cls, copy.size, false);
	}
}

static void apply_failure(struct books *b, struct proc *proc, const struct gl_call *c)
{
	struct explain_src src = books__explain_src(b);
	struct failure *f = failures__record(&src, proc, c, take_stack(b, proc, c));

	if (f->has_facts && b->hooks.oom_nvml)
		b->hooks.oom_nvml(b->hooks.ctx, proc->t.pid, f->facts.dev, &f->facts);
	if (b->hooks.failure)
		b->hooks.failure(b->hooks.ctx, proc, f);
}

static bool ctx_is_primary_of(const struct proc *proc, uint16_t idx, int dev)
{
	const struct proc_ctx *pc = idx ? &proc->ctxs[idx - 1] : NULL;

	return pc && pc->primary && pc->dev == dev;
}

/* Context teardown: drop exactly what BPF dropped (the same rule as drop_one()). */
static void apply_ctx_drop(struct books *b, struct proc *proc, const struct gl_call *c)
{
	uint16_t idx = proc__ctx_index(proc, c->ctx);
	struct alloc_key *drop = NULL;
	const struct alloc_key *k;
	struct alloc_val *v;
	size_t it = 0, n = 0;

	drop = malloc((htab__count(proc->allocs) + 1) * sizeof(*drop));
	if (!drop)
		return;
	proc->t.ctx_drops++;
	while ((v = htab__next(proc->allocs, &it, (const void **)&k))) {
		/* one being freed: BPF's teardown does not see it either (claim_key()) */
		if (k->kind == GL_KIND_HANDLE || k->kind == GL_KIND_MAPPING ||
		    k->kind == GL_KIND_VA || k->kind == ALLOC_KIND_FREEING)
			continue;
		if (v->ctx && c->dev < 0 && v->ctx != idx)
			continue;
		if (v->ctx && c->dev >= 0 && !ctx_is_primary_of(proc, v->ctx, c->dev))
			continue;
		drop[n++] = *k;
	}
	for (size_t i = 0; i < n; i++) {
		struct alloc_val val = *(struct alloc_val *)htab__lookup(proc->allocs, &drop[i]);

		if (val.cls != GL_CLASS_ADDRESS && val.cls != GL_CLASS_IMPORTED)
			proc->t.dropped_bytes += val.size;
		remove_alloc(b, proc, &drop[i], &val, c->hdr.ts);
	}
	free(drop);
	/* calls that entered before the teardown and come after it (c->bytes: BPF's time) */
	for (uint16_t i = 0; i < proc->nr_ctxs; i++) {
		struct proc_ctx *pc = &proc->ctxs[i];

		if (c->dev < 0 ? i + 1 != idx : !(pc->primary && pc->dev == c->dev))
			continue;
		pc->dead_ctx = pc->ctx;
		pc->dead_nr = c->teardowns;
	}
	if (c->dev < 0 && idx)
		proc->ctxs[idx - 1].ctx = 0; /* destroyed: a new context may reuse the value */
}

static void apply_call(struct books *b, const struct gl_call *c)
{
	struct proc *proc = proc_of(b, &c->hdr);
	uint16_t idx;

	if (log_level >= LOG_TRACE)
		log_msg(LOG_TRACE,
			"call %d/%d %s rc=%d op=%u kind=%u key=0x%llx bytes=%llu cls=%u "
			"ctx=0x%llx dev=%d flags=0x%x",
			c->hdr.pid, c->hdr.tid, probe__name(c->api), c->rc, c->op, c->kind,
			(unsigned long long)c->key, (unsigned long long)c->bytes, c->cls,
			(unsigned long long)c->ctx, c->dev, c->flags);
	if (!proc || !proc->allocs)
		return;
	proc->t.last_ns = c->hdr.ts;
	if (b->opts.rank_env && !b->opts.no_proc_files)
		proc__read_ranks(proc);
	switch (c->op) {
	case GL_OP_ALLOC: apply_alloc(b, proc, c); break;
	case GL_OP_FREE: apply_free(b, proc, c); break;
	case GL_OP_UNMATCHED_FREE:
		proc->t.free_calls++;
		proc->t.unmatched_frees++;
		break;
	case GL_OP_FAIL: apply_failure(b, proc, c); break;
	case GL_OP_CTX_DROP: apply_ctx_drop(b, proc, c); break;
	case GL_OP_CTX_NEW:
		idx = proc__ctx_index(proc, c->key);
		if (idx) {
			proc->ctxs[idx - 1].dev = c->dev;
			proc->ctxs[idx - 1].primary = c->flags & 1;
		}
		break;
	case GL_OP_NONE:
		if (c->flags & GL_CALL_CTX_GONE)
			proc->t.ctx_drops++; /* the teardown's own record drops it here */
		if (c->rc && (probe__desc(c->api)->role == GL_ROLE_FREE ||
			      probe__desc(c->api)->role == GL_ROLE_VMM_RELEASE))
			proc->t.failed_frees++;
		break;
	}
}

static void apply_proc(struct books *b, const struct gl_proc *r)
{
	struct proc *proc;

	if (r->event == GL_PROC_LIBLOAD) {
		prefetches__mapping_seen(b->prefetched, b->procs, r, b->opts.rank_env,
					 !b->opts.no_proc_files);
		if (b->hooks.libs_changed)
			b->hooks.libs_changed(b->hooks.ctx, r->hdr.pid);
		return;
	}
	proc = proc_of(b, &r->hdr);
	if (!proc)
		return;
	switch (r->event) {
	case GL_PROC_FORK:
		/* the parent at the fork, which /proc no longer tells once the child is reaped */
		proc->t.ppid = (int)r->ppid;
		return;
	case GL_PROC_EXEC:
		if (!proc->t.ppid)
			proc->t.ppid = (int)r->ppid; /* 0 in recordings from before it */
		proc->t.final = r->stats;
		proc->t.has_final = true;
		if (b->hooks.proc_end)
			b->hooks.proc_end(b->hooks.ctx, proc, r->event);
		if (b->opts.attach_python && b->python) {
			/* a new image has its own interpreter, or none */
			python__detach(b->python, r->hdr.pid);
			python__attach(b->python, r->hdr.pid);
		}
		proc__clear_books(proc);
		memcpy(proc->t.comm, r->comm, sizeof(proc->t.comm));
		proc->t.comm[sizeof(proc->t.comm) - 1] = '\0';
		proc->t.has_final = false;
		if (proc->am)
			addr_map__refresh(proc->am);
		return;
	case GL_PROC_EXIT:
		if (r->comm[0]) {
			memcpy(proc->t.comm, r->comm, sizeof(proc->t.comm));
			proc->t.comm[sizeof(proc->t.comm) - 1] = '\0';
		}
		if (!proc->t.exited)
			proc->t.exit_code = r->exit_code;
		books__exited(b, proc, &r->stats, r->hdr.ts);
		return;
	}
}

void books__note_unheld(struct books *b, const struct gl_proc *r)
{
	struct proc *proc = proc_of(b, &r->hdr);

	if (!proc)
		return;
	proc->t.unheld++;
	memcpy(proc->t.unheld_lib, r->lib.name, sizeof(r->lib.name));
	proc->t.unheld_lib[sizeof(r->lib.name)] = '\0';
}

void books__exited(struct books *b, struct proc *proc, const struct gl_proc_stats *final,
		   uint64_t ts)
{
	if (proc->t.exited)
		return;
	proc->t.exited = true;
	proc->t.exit_ns = ts;
	proc->t.final = *final;
	proc->t.has_final = true;
	retire(b, proc);
	if (b->hooks.proc_end)
		b->hooks.proc_end(b->hooks.ctx, proc, GL_PROC_EXIT);
	if (b->opts.attach_python && b->python)
		python__detach(b->python, proc->t.pid);
}

bool books__gone(struct books *b, struct proc *proc, uint64_t now_ns, uint64_t read_ns)
{
	if (proc->t.exited)
		return true;
	if (!proc->gone_seen_ns)
		proc->gone_seen_ns = now_ns;
	if (read_ns <= proc->gone_seen_ns)
		return false;
	proc->t.exited = true;
	proc->t.exit_ns = b->now;
	retire(b, proc);
	return true;
}

void books__set_identity(struct proc *proc, const char *comm, int ns_pid, uint64_t first_ns)
{
	snprintf(proc->t.comm, sizeof(proc->t.comm), "%.*s", (int)sizeof(proc->t.comm) - 1, comm);
	proc->t.ns_pid = ns_pid;
	proc->t.first_ns = first_ns;
}

int books__apply(struct books *b, const struct event *ev)
{
	int type = ev->type;

	if (type < 0) {
		b->counters.malformed++;
		return -EINVAL;
	}
	b->counters.records[type]++;
	if (ev->hdr->ts > b->now)
		b->now = ev->hdr->ts;
	b->taken = 0;
	switch (type) {
	case GL_REC_STACK: apply_stack(b, &ev->stack); break;
	case GL_REC_CALL: apply_call(b, ev->call); break;
	case GL_REC_PROC: apply_proc(b, ev->proc); break;
	}
	if (b->hooks.applied)
		b->hooks.applied(b->hooks.ctx, ev->hdr, ev->hdr->size, b->taken);
	for (int i = 0; i < BOOKS_MAX_OBSERVERS; i++)
		if (b->observers[i].fn)
			b->observers[i].fn(b->observers[i].ctx, ev->hdr, ev->hdr->size, b->taken);
	return 0;
}

int books__apply_bytes(struct books *b, const void *data, size_t size)
{
	struct event ev = { .type = -EINVAL };

	event__decode(data, size, &ev);
	return books__apply(b, &ev);
}

int books__observe(struct books *b, books_applied_fn fn, void *ctx)
{
	for (int i = 0; i < BOOKS_MAX_OBSERVERS; i++)
		if (!b->observers[i].fn) {
			b->observers[i] = (struct books_observer){ fn, ctx };
			return 0;
		}
	return -ENOSPC;
}

void books__unobserve(struct books *b, books_applied_fn fn, void *ctx)
{
	for (int i = 0; i < BOOKS_MAX_OBSERVERS; i++)
		if (b->observers[i].fn == fn && b->observers[i].ctx == ctx)
			b->observers[i] = (struct books_observer){ 0 };
}

int books__replay_call(struct books *b, const struct gl_call *c, uint32_t stack)
{
	int err;

	if (c->hdr.type != GL_REC_CALL) {
		b->counters.malformed++;
		return -EINVAL;
	}
	b->replay_stack = stack;
	err = books__apply_bytes(b, c, sizeof(*c));
	b->replay_stack = 0;
	return err;
}

int books__forget_kind(struct books *b, uint8_t kind, uint64_t ts, uint64_t *forgotten)
{
	return books__forget_kind_pid(b, kind, 0, ts, forgotten);
}

int books__forget_kind_pid(struct books *b, uint8_t kind, int pid, uint64_t ts, uint64_t *forgotten)
{
	uint64_t n_all = 0;

	for (uint32_t i = 0; i < procs__count(b->procs); i++) {
		struct proc *proc = procs__at(b->procs, i);
		struct alloc_key *drop;
		const struct alloc_key *k;
		struct alloc_val *v;
		const struct agg_key *ak;
		struct agg *a;
		size_t it = 0, n = 0;

		if (!proc || !proc->allocs || proc->t.exited || (pid > 0 && proc->t.pid != pid))
			continue;
		drop = malloc((htab__count(proc->allocs) + 1) * sizeof(*drop));
		if (!drop)
			return -ENOMEM;
		while ((v = htab__next(proc->allocs, &it, (const void **)&k)))
			if (k->kind == kind)
				drop[n++] = *k;
		for (size_t j = 0; j < n; j++) {
			struct alloc_val val =
				*(struct alloc_val *)htab__lookup(proc->allocs, &drop[j]);

			remove_alloc(b, proc, &drop[j], &val, ts);
		}
		free(drop);
		n_all += n;
		/* the history of what was forgotten goes with it */
		it = 0;
		while ((a = htab__next(proc->aggs, &it, (const void **)&ak)))
			if (ak->cls == GL_CLASS_TORCH_BLOCK && kind == GL_KIND_TORCH)
				series__reset(a->series);
	}
	if (forgotten)
		*forgotten = n_all;
	return 0;
}
