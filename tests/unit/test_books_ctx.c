// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_books_ctx.c - context teardown in books/books.c: user space drops
 * exactly what BPF's drop_one() (bpf/contexts.bpf.h) drops. cuCtxDestroy drops
 * the non-VMM allocations of the destroyed context and those of unknown
 * context; cuDevicePrimaryCtxReset drops the non-VMM allocations of that
 * device's primary context and those of unknown context. A scripted case,
 * then a long random sequence checked against a model of the BPF books.
 */
#include "books_fixture.h"

#define CTX_A 0xa000 /* device 0, primary */
#define CTX_B 0xb000 /* device 0, created */
#define CTX_C 0xc000 /* device 1, primary */
#define CTX_D 0xd000 /* never announced: device unknown */

static void ctx_new(struct fx *f, uint64_t ctx, int16_t dev, bool primary)
{
	uint16_t api = primary ? GL_API_cuDevicePrimaryCtxRetain : GL_API_cuCtxCreate_v2;

	assert_int_equal(fx_call(f, (struct gl_call){ .api = api, .op = GL_OP_CTX_NEW, .key = ctx,
						       .dev = dev, .flags = primary }), 0);
}

/* What BPF sends for cuCtxDestroy(ctx): key = ctx = the destroyed one, no device. */
static void ctx_destroy(struct fx *f, uint64_t ctx)
{
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuCtxDestroy_v2,
						       .op = GL_OP_CTX_DROP, .key = ctx, .ctx = ctx,
						       .dev = -1 }), 0);
}

/* What BPF sends for cuDevicePrimaryCtxReset(dev): no context, the device. */
static void primary_reset(struct fx *f, int16_t dev)
{
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuDevicePrimaryCtxReset_v2,
						       .op = GL_OP_CTX_DROP, .dev = dev }), 0);
}

static bool held(struct fx *f, uint8_t kind, uint64_t key)
{
	struct alloc_key k = { .key = key, .kind = kind };

	return htab__lookup(fx_proc(f)->allocs, &k) != NULL;
}

static void test_destroy_and_reset(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	ctx_new(f, CTX_A, 0, true);
	ctx_new(f, CTX_B, 0, false);
	ctx_new(f, CTX_C, 1, true);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1, 1, CTX_A);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x2, 2, CTX_B);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x3, 4, 0);
	fx_alloc(f, GL_API_cuMemCreate, 0x4, 8, CTX_A);
	fx_alloc(f, GL_API_cuMemAddressReserve, 0x5, 16, CTX_A);
	fx_alloc(f, GL_API_cuMemHostAlloc, 0x6, 32, CTX_A);
	fx_alloc(f, GL_API_cuArrayCreate_v2, 0x7, 64, CTX_B);
	fx_alloc(f, GL_API_cuIpcOpenMemHandle_v2, 0x8, 128, CTX_A);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x9, 256, CTX_D);
	fx_alloc(f, GL_API_cuMemAllocManaged, 0xa, 512, CTX_C);
	fx_alloc(f, GL_API_cuMemCreate, 0xb, 1024, 0);
	p = fx_proc(f);
	assert_int_equal(p->t.bytes[GL_CLASS_DEVICE], 1 + 2 + 4 + 8 + 64 + 256 + 1024);

	/* B goes: its allocation and its array, and the one of unknown context */
	ctx_destroy(f, CTX_B);
	assert_false(held(f, GL_KIND_DPTR, 0x2));
	assert_false(held(f, GL_KIND_ARRAY, 0x7));
	assert_false(held(f, GL_KIND_DPTR, 0x3));
	assert_int_equal(p->t.dropped_bytes, 2 + 64 + 4);
	assert_int_equal(p->t.bytes[GL_CLASS_DEVICE], 1 + 8 + 256 + 1024);
	assert_int_equal(p->t.nallocs[GL_CLASS_DEVICE], 4);
	/* VMM handles (even of unknown context), reservations and the others stay */
	assert_true(held(f, GL_KIND_DPTR, 0x1));
	assert_true(held(f, GL_KIND_HANDLE, 0x4));
	assert_true(held(f, GL_KIND_VA, 0x5));
	assert_true(held(f, GL_KIND_HOST, 0x6));
	assert_true(held(f, GL_KIND_IPC, 0x8));
	assert_true(held(f, GL_KIND_DPTR, 0x9));
	assert_true(held(f, GL_KIND_DPTR, 0xa));
	assert_true(held(f, GL_KIND_HANDLE, 0xb));
	/* a teardown is not a free call */
	assert_int_equal(p->t.free_calls, 0);

	/* a new context at B's old address is a new context: its allocations are its own */
	ctx_new(f, CTX_B, 0, true);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0xc, 2048, CTX_B);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0xd, 4096, 0);

	/* device 0's primary contexts (A and the new B) go, with the unknown-context one */
	primary_reset(f, 0);
	assert_false(held(f, GL_KIND_DPTR, 0x1));
	assert_false(held(f, GL_KIND_HOST, 0x6));
	assert_false(held(f, GL_KIND_IPC, 0x8));
	assert_false(held(f, GL_KIND_DPTR, 0xc));
	assert_false(held(f, GL_KIND_DPTR, 0xd));
	assert_true(held(f, GL_KIND_HANDLE, 0x4));
	assert_true(held(f, GL_KIND_VA, 0x5));
	assert_true(held(f, GL_KIND_DPTR, 0x9));
	assert_true(held(f, GL_KIND_DPTR, 0xa));
	/* imported memory is not counted as dropped, pinned host memory is */
	assert_int_equal(p->t.dropped_bytes, 2 + 64 + 4 + 1 + 32 + 2048 + 4096);
	assert_int_equal(p->t.bytes[GL_CLASS_HOST_PINNED], 0);
	assert_int_equal(p->t.bytes[GL_CLASS_IMPORTED], 0);
	assert_int_equal(p->t.nallocs[GL_CLASS_IMPORTED], 0);

	/* device 1 has a primary context too; a device with none drops only unknown ones */
	primary_reset(f, 2);
	assert_true(held(f, GL_KIND_DPTR, 0xa));
	assert_true(held(f, GL_KIND_DPTR, 0x9));
	primary_reset(f, 1);
	assert_false(held(f, GL_KIND_DPTR, 0xa));
	assert_int_equal(p->t.bytes[GL_CLASS_MANAGED], 0);
	/* D was never announced: no reset is its, destroying it is */
	assert_true(held(f, GL_KIND_DPTR, 0x9));
	ctx_destroy(f, CTX_D);
	assert_false(held(f, GL_KIND_DPTR, 0x9));
	assert_int_equal(p->t.bytes[GL_CLASS_DEVICE], 8 + 1024);
	assert_int_equal(p->t.bytes[GL_CLASS_ADDRESS], 16);
	/* the aggregates followed */
	{
		struct agg *a = fx_agg(p, fx_api_stack(f, GL_API_cuMemAlloc_v2), GL_CLASS_DEVICE);

		assert_non_null(a);
		assert_int_equal(a->bytes, 0);
		assert_int_equal(a->allocs, 0);
	}
	fx_free(f);
}

/* A non-primary context on the reset device is not the primary context. */
static void test_reset_spares_created_contexts(void **state)
{
	struct fx *f = fx_new(true);

	ctx_new(f, CTX_A, 0, false);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1, 1, CTX_A);
	primary_reset(f, 0);
	assert_true(held(f, GL_KIND_DPTR, 0x1));
	/* an announcement as primary later makes it one */
	ctx_new(f, CTX_A, 0, true);
	primary_reset(f, 0);
	assert_false(held(f, GL_KIND_DPTR, 0x1));
	fx_free(f);
}

/* A model of BPF's books: its allocs map (raw context values) and its ctx_dev map. */
#define M_ALLOCS 64
#define M_CTXS 4

struct m_alloc {
	bool live;
	uint8_t kind, cls;
	uint64_t key, size, ctx;
};

struct m_ctx {
	bool known; /* in ctx_dev */
	int16_t dev;
	bool primary;
};

struct model {
	struct m_alloc a[M_ALLOCS];
	struct m_ctx c[M_CTXS + 1]; /* index = ctx value / 0x1000, 0 unused */
	uint64_t bytes[GL_CLASS_SLOTS], n[GL_CLASS_SLOTS], dropped;
};

static const uint16_t m_apis[] = {
	GL_API_cuMemAlloc_v2,	   GL_API_cuMemAllocManaged,	 GL_API_cuMemHostAlloc,
	GL_API_cuMemHostRegister_v2, GL_API_cuMemCreate,	 GL_API_cuMemAddressReserve,
	GL_API_cuArrayCreate_v2,   GL_API_cuMipmappedArrayCreate, GL_API_cuIpcOpenMemHandle_v2,
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* drop_one() of bpf/contexts.bpf.h, for a teardown (all_kinds = 0). */
static bool m_drops(const struct model *m, const struct m_alloc *a, uint64_t ctx, int dev)
{
	const struct m_ctx *c = a->ctx ? &m->c[a->ctx / 0x1000] : NULL;

	if (a->kind == GL_KIND_HANDLE || a->kind == GL_KIND_MAPPING || a->kind == GL_KIND_VA)
		return false;
	if (a->ctx && dev < 0 && a->ctx != ctx)
		return false;
	if (a->ctx && dev >= 0 && !(c->known && c->dev == dev && c->primary))
		return false;
	return true;
}

/* How many allocations each kind of teardown dropped with a known context. */
static int m_known_ctx_drops[2];

static void m_drop(struct model *m, uint64_t ctx, int dev)
{
	for (int i = 0; i < M_ALLOCS; i++) {
		struct m_alloc *a = &m->a[i];

		if (!a->live || !m_drops(m, a, ctx, dev))
			continue;
		m->bytes[a->cls] -= a->size;
		m->n[a->cls]--;
		if (a->cls != GL_CLASS_ADDRESS && a->cls != GL_CLASS_IMPORTED)
			m->dropped += a->size;
		if (a->ctx)
			m_known_ctx_drops[dev >= 0]++;
		a->live = false;
	}
}

static void check_against_model(struct fx *f, const struct model *m, int step)
{
	struct proc *p = fx_proc(f);

	for (int c = 0; c < GL_CLASS_SLOTS; c++)
		if (p->t.bytes[c] != m->bytes[c] || p->t.nallocs[c] != m->n[c])
			fail_msg("step %d: class %s: books %llu bytes in %llu, BPF %llu in %llu",
				 step, class__name(c), (unsigned long long)p->t.bytes[c],
				 (unsigned long long)p->t.nallocs[c],
				 (unsigned long long)m->bytes[c], (unsigned long long)m->n[c]);
	if (p->t.dropped_bytes != m->dropped)
		fail_msg("step %d: dropped %llu, BPF dropped %llu", step,
			 (unsigned long long)p->t.dropped_bytes, (unsigned long long)m->dropped);
	for (int i = 0; i < M_ALLOCS; i++)
		if (m->a[i].live != held(f, m->a[i].kind, m->a[i].key))
			fail_msg("step %d: allocation %d (kind %u) %s", step, i, m->a[i].kind,
				 m->a[i].live ? "lost" : "kept");
}

static void test_random_against_bpf_rule(void **state)
{
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct fx *f = fx_new(true);
		struct model *m = calloc(1, sizeof(*m));

		assert_non_null(m);
		rng_state = 0x9e3779b97f4a7c15ULL * seed;
		/* the process's first record, so that fx_proc() finds it */
		assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_FORK, NULL, NULL), 0);
		for (int step = 0; step < 400; step++) {
			uint64_t r = rng() % 100, ctx = (rng() % (M_CTXS + 1)) * 0x1000;
			int16_t dev = rng() % 2;

			if (r < 10) {
				bool primary = rng() % 2;

				ctx_new(f, ctx ? ctx : 0x1000, dev, primary);
				m->c[ctx ? ctx / 0x1000 : 1] = (struct m_ctx){ true, dev, primary };
			} else if (r < 70) {
				int i = rng() % M_ALLOCS;
				uint16_t api = m_apis[rng() % (sizeof(m_apis) / sizeof(m_apis[0]))];
				const struct gl_api_desc *d = probe__desc(api);
				struct m_alloc *a = &m->a[i];
				uint64_t size = 1 + rng() % 1000;

				if (a->live)
					continue; /* keys stay unique per slot */
				*a = (struct m_alloc){ true, d->kind, d->cls, 0x100000 + i * 16,
						       size, ctx };
				fx_alloc(f, api, a->key, size, ctx);
				m->bytes[a->cls] += size;
				m->n[a->cls]++;
			} else if (r < 80) {
				int i = rng() % M_ALLOCS;
				struct m_alloc *a = &m->a[i];

				if (!a->live)
					continue;
				assert_int_equal(fx_call(f, (struct gl_call){
					.api = GL_API_cuMemFree_v2, .op = GL_OP_FREE,
					.kind = a->kind, .key = a->key, .bytes = a->size,
					.cls = a->cls, .dev = -1 }), 0);
				m->bytes[a->cls] -= a->size;
				m->n[a->cls]--;
				a->live = false;
			} else if (r < 90) {
				m_drop(m, ctx, -1);
				if (ctx)
					m->c[ctx / 0x1000].known = false;
				ctx_destroy(f, ctx);
			} else {
				m_drop(m, 0, dev);
				primary_reset(f, dev);
			}
			check_against_model(f, m, step);
		}
		free(m);
		fx_free(f);
	}
	/* the sequence did exercise both rules with known contexts */
	assert_true(m_known_ctx_drops[0] > 100);
	assert_true(m_known_ctx_drops[1] > 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_destroy_and_reset),
		cmocka_unit_test(test_reset_spares_created_contexts),
		cmocka_unit_test(test_random_against_bpf_rule),
	};

	return cmocka_run_group_tests_name("books_ctx", tests, NULL, NULL);
}
