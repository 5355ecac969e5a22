/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * books_fixture.h - books fed by hand: ring-buffer records (struct gl_call,
 * gl_stack, gl_proc) built as BPF builds them and applied with
 * books__apply, with no /proc files and no Python. procfs_root points at an
 * empty directory of its own so that nothing of the real machine leaks in.
 */
#ifndef GL_BOOKS_FIXTURE_H
#define GL_BOOKS_FIXTURE_H

#include "unit.h"
#include "books/books.h"
#include "books/proc_int.h" /* white-box: the books' own view of a process */
#include "stacks/native/unwind.h"
#include "trace/probes.h"
#include "util/procfs.h"

#define PID 4242
#define START 777000000ULL

struct fx {
	struct modules *m;
	struct stacks *s;
	struct unwinder *u;
	struct books *b;
	char root[64];
	uint64_t clock_ns;
	uint64_t teardowns; /* ctx_teardowns: contexts' teardowns begun */
	uint64_t seq;
	/* what the hooks saw */
	int proc_new, proc_end, failures;
	uint32_t last_event;
	uint64_t end_device_bytes; /* device bytes in the books when proc_end ran */
	struct failure last_failure;
};

static void fx_on_new(void *ctx, struct proc *proc)
{
	((struct fx *)ctx)->proc_new++;
}

static void fx_on_end(void *ctx, struct proc *proc, uint32_t event)
{
	struct fx *f = ctx;

	f->proc_end++;
	f->last_event = event;
	f->end_device_bytes = proc->t.bytes[GL_CLASS_DEVICE];
}

static void fx_on_failure(void *ctx, struct proc *proc, const struct failure *fl)
{
	struct fx *f = ctx;

	f->failures++;
	f->last_failure = *fl;
}

/* Books with options o (a series width of a second where o leaves it 0). */
static UNIT_UNUSED struct fx *fx_new_opts(struct books_opts o)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct books_hooks h = {
		.proc_new = fx_on_new, .proc_end = fx_on_end, .failure = fx_on_failure,
	};

	assert_non_null(f);
	if (!o.series_width_ns)
		o.series_width_ns = 1000000000ULL;
	snprintf(f->root, sizeof(f->root), "/tmp/glbooksXXXXXX");
	assert_non_null(mkdtemp(f->root));
	procfs_root = f->root;
	f->m = modules__new();
	f->s = stacks__new();
	f->u = unwinder__new(f->m, GL_STACK_FP);
	assert_non_null(f->m);
	assert_non_null(f->s);
	assert_non_null(f->u);
	f->b = books__new(f->m, f->s, f->u, NULL, &o);
	assert_non_null(f->b);
	h.ctx = f;
	books__set_hooks(f->b, &h);
	f->clock_ns = 1000000000ULL;
	f->teardowns = 100;
	return f;
}

static UNIT_UNUSED struct fx *fx_new(bool no_proc_files)
{
	return fx_new_opts((struct books_opts){ .no_proc_files = no_proc_files });
}

static UNIT_UNUSED void fx_free(struct fx *f)
{
	books__free(f->b);
	unwinder__free(f->u);
	stacks__free(f->s);
	modules__free(f->m);
	procfs_root = "/proc";
	unit_rm_tree(f->root);
	free(f);
}

/* Fills what BPF's fill_hdr() fills; zero fields take the fixture's defaults. */
static void fx_hdr(struct fx *f, struct gl_hdr *h, uint32_t type, uint32_t size)
{
	h->type = type;
	h->size = size;
	if (!h->pid)
		h->pid = PID;
	if (!h->tid)
		h->tid = h->pid;
	if (!h->start_time)
		h->start_time = START;
	if (!h->ts)
		h->ts = f->clock_ns += 1000000;
}

/* A call record; with no teardowns, the count now (a teardown's: the next number). */
static UNIT_UNUSED int fx_call(struct fx *f, struct gl_call c)
{
	fx_hdr(f, &c.hdr, GL_REC_CALL, sizeof(c));
	if (!c.teardowns)
		c.teardowns = c.op == GL_OP_CTX_DROP ? ++f->teardowns : f->teardowns;
	return books__apply_bytes(f->b, &c, sizeof(c));
}

/* A successful allocation by api of key (kind and class from the probe table). */
static UNIT_UNUSED void fx_alloc(struct fx *f, uint16_t api, uint64_t key, uint64_t bytes,
				 uint64_t ctx)
{
	const struct gl_api_desc *d = probe__desc(api);

	assert_int_equal(fx_call(f, (struct gl_call){ .api = api, .op = GL_OP_ALLOC,
						       .kind = d->kind, .cls = d->cls, .key = key,
						       .bytes = bytes, .ctx = ctx, .dev = -1,
						       .seq = ++f->seq }), 0);
}

/* A free that BPF matched (bytes and class are the allocation's, as BPF sends them). */
static UNIT_UNUSED void fx_free_key(struct fx *f, uint16_t api, uint64_t key, uint64_t bytes,
				    uint8_t cls)
{
	assert_int_equal(fx_call(f, (struct gl_call){ .api = api, .op = GL_OP_FREE,
						       .kind = probe__desc(api)->kind, .cls = cls,
						       .key = key, .bytes = bytes, .dev = -1,
						       .seq = ++f->seq }), 0);
}

/* A stack record for the next call of tid: ips innermost first. */
static UNIT_UNUSED int fx_stack(struct fx *f, uint32_t tid, uint64_t seq, uint16_t api,
				const uint64_t *ips, uint16_t n)
{
	uint64_t buf[(sizeof(struct gl_stack) + GL_MAX_FP_FRAMES * 8) / 8];
	struct gl_stack *s = (struct gl_stack *)buf;

	assert_true(n <= GL_MAX_FP_FRAMES);
	memset(buf, 0, sizeof(buf));
	s->hdr.tid = tid;
	fx_hdr(f, &s->hdr, GL_REC_STACK, sizeof(*s) + n * 8);
	s->seq = seq;
	s->api = api;
	s->nr_ips = n;
	memcpy(s + 1, ips, n * 8);
	return books__apply_bytes(f->b, buf, s->hdr.size);
}

static UNIT_UNUSED int fx_proc_event(struct fx *f, uint32_t pid, uint64_t start, uint32_t event,
				     const char *comm, const struct gl_proc_stats *st)
{
	struct gl_proc r = { .hdr = { .pid = pid, .start_time = start }, .event = event };

	fx_hdr(f, &r.hdr, GL_REC_PROC, sizeof(r));
	if (comm)
		snprintf(r.comm, sizeof(r.comm), "%s", comm);
	if (st)
		r.stats = *st;
	return books__apply_bytes(f->b, &r, sizeof(r));
}

static UNIT_UNUSED struct proc *fx_proc(struct fx *f)
{
	struct proc *p = procs__find_pid(books__procs(f->b), PID);

	assert_non_null(p);
	return p;
}

/* The aggregate of (stack, class), or NULL. */
static UNIT_UNUSED struct agg *fx_agg(struct proc *p, uint32_t stack, uint8_t cls)
{
	struct agg_key k = { .stack = stack, .cls = cls };

	return htab__lookup(p->aggs, &k);
}

/* Id of the stack made of the API frame alone (what a call without a stack gets). */
static UNIT_UNUSED uint32_t fx_api_stack(struct fx *f, uint16_t api)
{
	struct frame fr = { .mod = api, .kind = FRAME_API };

	return stacks__intern(f->s, &fr, 1);
}

#endif /* GL_BOOKS_FIXTURE_H */
