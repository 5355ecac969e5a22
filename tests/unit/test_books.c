// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_books.c - books/books.c and procs.c fed synthetic ring-buffer records:
 * allocations and frees of every kind, unmatched frees, frees of keys user
 * space never saw, replaced keys, failures with their stacks, stacks matched
 * to calls, exec, exit, PID reuse and malformed records.
 */
#include "books_fixture.h"
#include "books/explain.h"
#include "model/snapshot.h"

static void expect_class(struct proc *p, uint8_t cls, uint64_t bytes, uint64_t n)
{
	if (p->t.bytes[cls] != bytes || p->t.nallocs[cls] != n)
		fail_msg("class %s: %llu bytes in %llu allocations, expected %llu in %llu",
			 class__name(cls), (unsigned long long)p->t.bytes[cls],
			 (unsigned long long)p->t.nallocs[cls], (unsigned long long)bytes,
			 (unsigned long long)n);
}

/* One (alloc api, free api, class) per allocation namespace. */
static const struct {
	uint16_t alloc, free;
	uint8_t cls;
} families[] = {
	{ GL_API_cuMemAlloc_v2, GL_API_cuMemFree_v2, GL_CLASS_DEVICE },
	{ GL_API_cuMemAllocManaged, GL_API_cuMemFree_v2, GL_CLASS_MANAGED },
	{ GL_API_cuMemAllocAsync_ptsz, GL_API_cuMemFreeAsync, GL_CLASS_DEVICE },
	{ GL_API_cuMemHostAlloc, GL_API_cuMemFreeHost, GL_CLASS_HOST_PINNED },
	{ GL_API_cuMemHostRegister_v2, GL_API_cuMemHostUnregister, GL_CLASS_HOST_PINNED },
	{ GL_API_cuMemCreate, GL_API_cuMemRelease, GL_CLASS_DEVICE },
	{ GL_API_cuMemAddressReserve, GL_API_cuMemAddressFree, GL_CLASS_ADDRESS },
	{ GL_API_cuArrayCreate_v2, GL_API_cuArrayDestroy, GL_CLASS_DEVICE },
	{ GL_API_cuMipmappedArrayCreate, GL_API_cuMipmappedArrayDestroy, GL_CLASS_DEVICE },
	{ GL_API_cuIpcOpenMemHandle_v2, GL_API_cuIpcCloseMemHandle, GL_CLASS_IMPORTED },
};

#define NFAMILIES (sizeof(families) / sizeof(families[0]))

static void test_alloc_free_each_kind(void **state)
{
	for (size_t i = 0; i < NFAMILIES; i++) {
		struct fx *f = fx_new(true);
		uint8_t cls = families[i].cls;
		struct proc *p;

		fx_alloc(f, families[i].alloc, 0x7f0000001000, 1 << 20, 0);
		fx_alloc(f, families[i].alloc, 0x7f0000200000, 3 << 20, 0);
		p = fx_proc(f);
		expect_class(p, cls, 4 << 20, 2);
		assert_int_equal(p->t.alloc_calls, 2);
		assert_int_equal(p->t.peak_device, cls == GL_CLASS_DEVICE ? 4 << 20 : 0);
		fx_free_key(f, families[i].free, 0x7f0000001000, 1 << 20, cls);
		expect_class(p, cls, 3 << 20, 1);
		fx_free_key(f, families[i].free, 0x7f0000200000, 3 << 20, cls);
		expect_class(p, cls, 0, 0);
		assert_int_equal(p->t.free_calls, 2);
		assert_int_equal(p->t.unmatched_frees, 0);
		assert_int_equal(books__counters(f->b)->user_unmatched, 0);
		assert_int_equal(p->t.peak_device, cls == GL_CLASS_DEVICE ? 4 << 20 : 0);
		/* no other class moved */
		for (uint8_t c = 0; c < GL_CLASS_SLOTS; c++)
			expect_class(p, c, 0, 0);
		fx_free(f);
	}
}

/* The same key in two namespaces is two allocations; a free touches its own kind only. */
static void test_kinds_are_namespaces(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	fx_alloc(f, GL_API_cuMemHostAlloc, 0x1000, 200, 0);
	fx_alloc(f, GL_API_cuMemCreate, 0x1000, 400, 0);
	fx_alloc(f, GL_API_cuMemAddressReserve, 0x1000, 800, 0);
	p = fx_proc(f);
	expect_class(p, GL_CLASS_DEVICE, 500, 2);
	expect_class(p, GL_CLASS_HOST_PINNED, 200, 1);
	expect_class(p, GL_CLASS_ADDRESS, 800, 1);
	fx_free_key(f, GL_API_cuMemFreeHost, 0x1000, 200, GL_CLASS_HOST_PINNED);
	expect_class(p, GL_CLASS_HOST_PINNED, 0, 0);
	expect_class(p, GL_CLASS_DEVICE, 500, 2);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 100, GL_CLASS_DEVICE);
	expect_class(p, GL_CLASS_DEVICE, 400, 1);
	expect_class(p, GL_CLASS_ADDRESS, 800, 1);
	fx_free(f);
}

static void test_unmatched_free(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	/* BPF had no record of it: allocated before attach */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemFree_v2,
						       .op = GL_OP_UNMATCHED_FREE,
						       .kind = GL_KIND_DPTR, .key = 0x2000,
						       .cls = GL_CLASS_DEVICE, .dev = -1 }), 0);
	p = fx_proc(f);
	assert_int_equal(p->t.unmatched_frees, 1);
	assert_int_equal(p->t.free_calls, 1);
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	/* an unmatched free of a key user space holds changes nothing either */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemFree_v2,
						       .op = GL_OP_UNMATCHED_FREE,
						       .kind = GL_KIND_DPTR, .key = 0x1000,
						       .cls = GL_CLASS_DEVICE, .dev = -1 }), 0);
	assert_int_equal(p->t.unmatched_frees, 2);
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	assert_int_equal(books__counters(f->b)->user_unmatched, 0);
	fx_free(f);
}

/* BPF matched a free whose allocation record user space never got: counted, never negative. */
static void test_free_of_unknown_key(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x5000, 4096, GL_CLASS_DEVICE);
	p = fx_proc(f);
	assert_int_equal(books__counters(f->b)->user_unmatched, 1);
	assert_int_equal(p->t.free_calls, 1);
	assert_int_equal(p->t.unmatched_frees, 0);
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	/* the right key in the wrong namespace is unknown too */
	fx_free_key(f, GL_API_cuMemFreeHost, 0x1000, 100, GL_CLASS_HOST_PINNED);
	assert_int_equal(books__counters(f->b)->user_unmatched, 2);
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	expect_class(p, GL_CLASS_HOST_PINNED, 0, 0);
	fx_free(f);
}

/* The driver handed out a key again before we saw it freed: the old allocation is gone. */
static void test_replaced_key(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t ips_a[] = { 0x401000, 0x402000 }, ips_b[] = { 0x401000, 0x403000 };
	uint32_t sa, sb;
	struct agg *a, *b;
	struct proc *p;

	assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips_a, 2), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips_b, 2), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 300, 0);
	p = fx_proc(f);
	assert_int_equal(stacks__count(f->s), 2);
	sa = 1, sb = 2;
	expect_class(p, GL_CLASS_DEVICE, 300, 1);
	assert_int_equal(p->t.alloc_calls, 2);
	assert_int_equal(p->t.free_calls, 0);
	a = fx_agg(p, sa, GL_CLASS_DEVICE);
	b = fx_agg(p, sb, GL_CLASS_DEVICE);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->bytes, 0);
	assert_int_equal(a->allocs, 0);
	assert_int_equal(a->total_allocs, 1);
	assert_int_equal(a->total_frees, 1);
	assert_int_equal(a->free_bytes, 100);
	assert_int_equal(a->peak_bytes, 100);
	assert_int_equal(b->bytes, 300);
	assert_int_equal(b->allocs, 1);
	/* a replacement in another class moves the bytes between classes */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAllocManaged,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_MANAGED, .key = 0x1000,
						       .bytes = 50, .dev = -1,
						       .seq = ++f->seq }), 0);
	expect_class(p, GL_CLASS_DEVICE, 0, 0);
	expect_class(p, GL_CLASS_MANAGED, 50, 1);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 50, GL_CLASS_MANAGED);
	expect_class(p, GL_CLASS_MANAGED, 0, 0);
	assert_int_equal(books__counters(f->b)->user_unmatched, 0);
	fx_free(f);
}

/* BPF's table was full: neither side holds it, so neither may free it. */
static void test_table_full(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x1000,
						       .bytes = 100, .dev = -1,
						       .flags = GL_CALL_TABLE_FULL,
						       .seq = ++f->seq }), 0);
	p = fx_proc(f);
	assert_int_equal(p->t.alloc_calls, 1);
	expect_class(p, GL_CLASS_DEVICE, 0, 0);
	assert_int_equal(htab__count(p->allocs), 0);
	fx_free(f);
}

static void test_stacks_attributed(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t ips[] = { 0x7f00aa001000, 0x401234, 0x405678 };
	const struct frame *fr;
	uint32_t n, id;
	struct agg *a;
	struct proc *p;

	/* two allocations from the same call site: one stack, one aggregate */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips, 3), 0);
		fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000 + i * 0x1000, 1000, 0);
	}
	p = fx_proc(f);
	assert_int_equal(stacks__count(f->s), 1);
	id = 1;
	fr = stacks__get(f->s, id, &n);
	assert_int_equal(n, 3);
	/* no maps: absolute addresses; return addresses point at the call (minus one) */
	assert_int_equal(fr[0].kind, FRAME_UNKNOWN);
	assert_int_equal(fr[0].addr, 0x7f00aa001000);
	assert_int_equal(fr[1].addr, 0x401233);
	assert_int_equal(fr[2].addr, 0x405677);
	a = fx_agg(p, id, GL_CLASS_DEVICE);
	assert_non_null(a);
	assert_int_equal(a->bytes, 2000);
	assert_int_equal(a->allocs, 2);
	assert_int_equal(a->total_allocs, 2);
	assert_int_equal(a->alloc_bytes, 2000);
	assert_true(a->first_ns > 0 && a->last_ns > a->first_ns);
	assert_int_equal(books__counters(f->b)->stack_missing, 0);

	/* a stack from another thread, or for another call number, is not this call's */
	assert_int_equal(fx_stack(f, PID + 1, f->seq + 1, GL_API_cuMemAlloc_v2, ips, 2), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x9000, 10, 0);
	assert_int_equal(books__counters(f->b)->stack_missing, 1);
	assert_int_equal(fx_stack(f, PID, f->seq + 5, GL_API_cuMemAlloc_v2, ips, 2), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0xa000, 10, 0);
	assert_int_equal(books__counters(f->b)->stack_missing, 2);
	a = fx_agg(p, fx_api_stack(f, GL_API_cuMemAlloc_v2), GL_CLASS_DEVICE);
	assert_non_null(a);
	assert_int_equal(a->bytes, 20);
	assert_int_equal(a->allocs, 2);

	/* an empty stack record names the API alone; so does an API without stacks */
	assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips, 0), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0xb000, 10, 0);
	assert_int_equal(books__counters(f->b)->stack_missing, 2);
	assert_int_equal(a->allocs, 3);
	fx_alloc(f, GL_API_cuIpcOpenMemHandle, 0xc000, 0, 0);
	assert_int_equal(books__counters(f->b)->stack_missing, 2);
	assert_non_null(fx_agg(p, fx_api_stack(f, GL_API_cuIpcOpenMemHandle), GL_CLASS_IMPORTED));

	/* the free goes back to the allocation's own stack */
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 1000, GL_CLASS_DEVICE);
	a = fx_agg(p, id, GL_CLASS_DEVICE);
	assert_int_equal(a->bytes, 1000);
	assert_int_equal(a->allocs, 1);
	assert_int_equal(a->total_frees, 1);
	assert_int_equal(a->peak_bytes, 2000);
	fx_free(f);
}

static void test_failures(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t ips[] = { 0x1111, 0x2222 };
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 5000, 0);
	assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips, 2), 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_FAIL, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .bytes = 1ULL << 40,
						       .rc = 2, .dev = -1, .seq = ++f->seq }), 0);
	p = fx_proc(f);
	assert_int_equal(p->t.failures, 1);
	assert_int_equal(p->t.oom_failures, 1);
	assert_int_equal(p->nr_fails, 1);
	assert_int_equal(p->fails[0].bytes, 1ULL << 40);
	assert_int_equal(p->fails[0].rc, 2);
	assert_int_equal(p->fails[0].api, GL_API_cuMemAlloc_v2);
	assert_int_equal(p->fails[0].held_device, 5000);
	assert_int_not_equal(p->fails[0].stack, STACK_NONE);
	assert_int_not_equal(p->fails[0].stack, fx_api_stack(f, GL_API_cuMemAlloc_v2));
	{
		uint32_t n;
		const struct frame *fr = stacks__get(f->s, p->fails[0].stack, &n);

		assert_int_equal(n, 2);
		assert_int_equal(fr[0].addr, 0x1111);
		assert_int_equal(fr[1].addr, 0x2221);
	}
	assert_int_equal(f->failures, 1);
	assert_int_equal(f->last_failure.bytes, 1ULL << 40);
	/* nothing changed in the books, and no aggregate was made for the failure */
	expect_class(p, GL_CLASS_DEVICE, 5000, 1);
	assert_int_equal(p->t.alloc_calls, 1);

	/* a failure that is not out of memory; then more than the ring holds */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemHostAlloc,
						       .op = GL_OP_FAIL, .kind = GL_KIND_HOST,
						       .cls = GL_CLASS_HOST_PINNED, .bytes = 7,
						       .rc = 1, .dev = -1, .seq = ++f->seq }), 0);
	assert_int_equal(p->t.failures, 2);
	assert_int_equal(p->t.oom_failures, 1);
	for (int i = 0; i < PROC_MAX_FAILURES + 3; i++)
		assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
							       .op = GL_OP_FAIL,
							       .kind = GL_KIND_DPTR,
							       .cls = GL_CLASS_DEVICE,
							       .bytes = 100 + i, .rc = 2, .dev = -1,
							       .seq = ++f->seq }), 0);
	assert_int_equal(p->t.failures, PROC_MAX_FAILURES + 5);
	assert_int_equal(p->nr_fails, PROC_MAX_FAILURES + 5);
	assert_int_equal(p->fails[(p->nr_fails - 1) % PROC_MAX_FAILURES].bytes,
			 100 + PROC_MAX_FAILURES + 2);
	assert_int_equal(f->failures, PROC_MAX_FAILURES + 5);
	fx_free(f);
}

/* A failed free changes nothing but is counted; a failed allocation-side no-op is not. */
static void test_failed_free(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemFree_v2, .op = GL_OP_NONE,
						       .kind = GL_KIND_DPTR, .key = 0x1, .rc = 1,
						       .dev = -1 }), 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemRelease, .op = GL_OP_NONE,
						       .kind = GL_KIND_HANDLE, .key = 0x1,
						       .rc = 400, .dev = -1 }), 0);
	p = fx_proc(f);
	assert_int_equal(p->t.failed_frees, 2);
	/* a mapping, and a deferred release, succeed without changing the books */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemMap, .op = GL_OP_NONE,
						       .kind = GL_KIND_MAPPING, .key = 0x1,
						       .dev = -1 }), 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemRelease, .op = GL_OP_NONE,
						       .kind = GL_KIND_HANDLE, .key = 0x1,
						       .flags = GL_CALL_DEFERRED, .dev = -1 }), 0);
	assert_int_equal(p->t.failed_frees, 2);
	assert_int_equal(p->t.free_calls, 0);
	assert_int_equal(p->t.failures, 0);
	fx_free(f);
}

static void test_exec_clears_books(void **state)
{
	struct fx *f = fx_new(true);
	struct gl_proc_stats st = { .start_time = START, .alloc_calls = 2 };
	uint64_t ips[] = { 0x1000 };
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0x5000);
	fx_alloc(f, GL_API_cuMemHostAlloc, 0x2000, 200, 0x5000);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemFree_v2,
						       .op = GL_OP_UNMATCHED_FREE,
						       .kind = GL_KIND_DPTR, .key = 0x9,
						       .dev = -1 }), 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_FAIL, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .rc = 2, .bytes = 1,
						       .dev = -1, .seq = ++f->seq }), 0);
	/* a stack parked for a call that the exec interrupted */
	assert_int_equal(fx_stack(f, PID, 1000, GL_API_cuMemAlloc_v2, ips, 1), 0);
	p = fx_proc(f);
	assert_int_equal(htab__count(p->pending), 1);
	st.bytes[GL_CLASS_DEVICE] = 100;
	assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_EXEC, "newprog", &st), 0);
	/* the hook saw the books as they were */
	assert_int_equal(f->proc_end, 1);
	assert_int_equal(f->last_event, GL_PROC_EXEC);
	assert_int_equal(f->end_device_bytes, 100);
	/* then they start over, as BPF's do (close_books zeroes every counter) */
	assert_ptr_equal(fx_proc(f), p);
	assert_false(p->t.exited);
	assert_false(p->t.has_final);
	assert_string_equal(p->t.comm, "newprog");
	for (uint8_t c = 0; c < GL_CLASS_SLOTS; c++)
		expect_class(p, c, 0, 0);
	assert_int_equal(htab__count(p->allocs), 0);
	assert_int_equal(htab__count(p->aggs), 0);
	assert_int_equal(htab__count(p->pending), 0);
	assert_int_equal(p->nr_ctxs, 0);
	assert_int_equal(p->nr_fails, 0);
	assert_int_equal(p->t.alloc_calls, 0);
	assert_int_equal(p->t.free_calls, 0);
	assert_int_equal(p->t.failures, 0);
	assert_int_equal(p->t.oom_failures, 0);
	assert_int_equal(p->t.unmatched_frees, 0);
	assert_int_equal(p->t.peak_device, 0);
	/* the old program's keys mean nothing now */
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 100, GL_CLASS_DEVICE);
	assert_int_equal(books__counters(f->b)->user_unmatched, 1);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 64, 0);
	expect_class(p, GL_CLASS_DEVICE, 64, 1);
	assert_int_equal(p->t.alloc_calls, 1);
	assert_int_equal(procs__count(books__procs(f->b)), 1);
	fx_free(f);
}

static void test_exit(void **state)
{
	struct fx *f = fx_new(true);
	struct gl_proc_stats st = { .start_time = START, .alloc_calls = 1, .failures = 3 };
	struct proc *p;
	uint64_t ips[] = { 0x1 };

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	st.bytes[GL_CLASS_DEVICE] = 100;
	st.allocs[GL_CLASS_DEVICE] = 1;
	assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_EXIT, "worker", &st), 0);
	p = fx_proc(f);
	assert_true(p->t.exited);
	assert_int_equal(p->t.exit_ns, f->clock_ns);
	assert_true(p->t.has_final);
	assert_int_equal(p->t.final.failures, 3);
	assert_int_equal(p->t.final.bytes[GL_CLASS_DEVICE], 100);
	assert_string_equal(p->t.comm, "worker");
	assert_int_equal(f->proc_end, 1);
	assert_int_equal(f->last_event, GL_PROC_EXIT);
	/* the figures at exit stay for the report; the tables a live process needs go */
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	assert_null(p->allocs);
	assert_null(p->pending);
	assert_null(p->am);
	/* records that were in flight are ignored, not applied to a dead process */
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x2000, 100, 0);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 100, GL_CLASS_DEVICE);
	assert_int_equal(fx_stack(f, PID, 99, GL_API_cuMemAlloc_v2, ips, 1), 0);
	expect_class(p, GL_CLASS_DEVICE, 100, 1);
	assert_int_equal(p->t.alloc_calls, 1);
	assert_int_equal(procs__count(books__procs(f->b)), 1);
	fx_free(f);
}

static void test_exit_keeps_comm_when_record_has_none(void **state)
{
	struct fx *f = fx_new(true);

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_EXEC, "named", NULL), 0);
	assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_EXIT, "", NULL), 0);
	assert_string_equal(fx_proc(f)->t.comm, "named");
	fx_free(f);
}

/*
 * Gone from /proc with no exit record: its records committed before then may
 * still wait in the ring, so it is taken as exited only once the reader is past
 * the time it was first seen gone; its late records land on it until then.
 */
static void test_gone_waits_for_the_reader(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	p = fx_proc(f);
	assert_false(books__gone(f->b, p, 5000, 4999));
	assert_false(p->t.exited);
	assert_non_null(p->allocs);
	/* a record it made before it went, read after the first pass */
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x2000, 50, 0);
	assert_int_equal(procs__count(books__procs(f->b)), 1);
	expect_class(p, GL_CLASS_DEVICE, 150, 2);
	/* a later pass: the reader is past the first pass, not past this one's time */
	assert_true(books__gone(f->b, p, 9000, 5001));
	assert_true(p->t.exited);
	assert_false(p->t.has_final);
	assert_int_equal(p->t.exit_ns, f->clock_ns);
	assert_null(p->allocs);
	expect_class(p, GL_CLASS_DEVICE, 150, 2);
	assert_int_equal(f->proc_end, 0);
	assert_true(books__gone(f->b, p, 9500, 9400));
	fx_free(f);
}

/* A PID reused by a new process (its start time differs) starts with empty books. */
static void test_pid_reuse(void **state)
{
	struct fx *f = fx_new(true);
	struct procs *ps;
	struct proc *old, *young;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	old = fx_proc(f);
	/* the old process's exit record was lost; the new one allocates the same key */
	assert_int_equal(fx_call(f, (struct gl_call){ .hdr.start_time = START + 1,
						       .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x1000,
						       .bytes = 7, .dev = -1, .seq = 1 }), 0);
	ps = books__procs(f->b);
	assert_int_equal(procs__count(ps), 2);
	assert_int_equal(f->proc_new, 2);
	young = procs__find_pid(ps, PID);
	assert_ptr_not_equal(young, old);
	assert_ptr_equal(procs__at(ps, 0), old);
	assert_ptr_equal(procs__at(ps, 1), young);
	assert_int_equal(young->t.start_time, START + 1);
	expect_class(young, GL_CLASS_DEVICE, 7, 1);
	assert_int_equal(young->t.alloc_calls, 1);
	/* the old one is taken as exited when the new one appeared, its figures kept */
	assert_true(old->t.exited);
	assert_int_equal(old->t.exit_ns, f->clock_ns);
	expect_class(old, GL_CLASS_DEVICE, 100, 1);
	assert_null(old->allocs);
	/* a late record of the old process does not touch the new one */
	fx_free_key(f, GL_API_cuMemFree_v2, 0x1000, 100, GL_CLASS_DEVICE);
	expect_class(young, GL_CLASS_DEVICE, 7, 1);
	expect_class(old, GL_CLASS_DEVICE, 100, 1);
	/* a third process with the same PID after a clean exit of the second */
	assert_int_equal(fx_proc_event(f, PID, START + 1, GL_PROC_EXIT, "b", NULL), 0);
	assert_int_equal(fx_proc_event(f, PID, START + 2, GL_PROC_FORK, "c", NULL), 0);
	assert_int_equal(procs__count(ps), 3);
	assert_int_equal(procs__find_pid(ps, PID)->t.start_time, START + 2);
	assert_false(procs__find_pid(ps, PID)->t.exited);
	/* the second's exit time is its own exit record's, not the third's arrival */
	assert_int_equal(young->t.exit_ns, f->clock_ns - 1000000);
	fx_free(f);
}

static void test_processes_separate(void **state)
{
	struct fx *f = fx_new(true);
	struct procs *ps;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .hdr.pid = PID + 1,
						       .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x1000,
						       .bytes = 5, .dev = -1, .seq = 1 }), 0);
	ps = books__procs(f->b);
	assert_int_equal(procs__count(ps), 2);
	expect_class(procs__find_pid(ps, PID), GL_CLASS_DEVICE, 100, 1);
	expect_class(procs__find_pid(ps, PID + 1), GL_CLASS_DEVICE, 5, 1);
	assert_false(procs__find_pid(ps, PID)->t.exited);
	assert_null(procs__find_pid(ps, PID + 2));
	fx_free(f);
}

/* A library mapped where BPF could not hold the process: its figures say so. */
static void test_unheld_mapping_noted(void **state)
{
	struct fx *f = fx_new(true);
	struct gl_proc r = { .hdr = { .pid = PID, .start_time = START }, .event = GL_PROC_LIBLOAD };
	const struct proc_totals *t;

	fx_hdr(f, &r.hdr, GL_REC_PROC, sizeof(r));
	r.lib.held = 2;
	memset(r.lib.name, 'x', sizeof(r.lib.name)); /* no NUL: the name is cut at its size */
	memcpy(r.lib.name, "libcuda.so.1", 12);
	books__note_unheld(f->b, &r);
	books__note_unheld(f->b, &r);
	t = proc__totals(fx_proc(f));
	assert_int_equal(t->unheld, 2);
	assert_int_equal(strlen(t->unheld_lib), sizeof(r.lib.name));
	assert_memory_equal(t->unheld_lib, "libcuda.so.1xx", 14);
	fx_free(f);
}

static void test_malformed_counted(void **state)
{
	struct fx *f = fx_new(true);
	struct gl_call c = { .hdr = { .type = GL_REC_CALL, .size = sizeof(c), .pid = PID,
				      .start_time = START, .ts = 5 },
			     .api = GL_NR_APIS, .op = GL_OP_ALLOC };
	struct gl_hdr h = { .type = 99, .size = sizeof(h), .pid = PID };
	const struct books_counters *bc = books__counters(f->b);

	assert_int_equal(books__apply_bytes(f->b, &c, sizeof(c)), -EINVAL);
	c.api = GL_API_cuMemAlloc_v2;
	assert_int_equal(books__apply_bytes(f->b, &c, sizeof(c) - 8), -EINVAL);
	assert_int_equal(books__apply_bytes(f->b, &h, sizeof(h)), -EINVAL);
	assert_int_equal(books__apply_bytes(f->b, &h, 4), -EINVAL);
	assert_int_equal(bc->malformed, 4);
	for (int i = 0; i < GL_NR_REC_TYPES; i++)
		assert_int_equal(bc->records[i], 0);
	assert_int_equal(procs__count(books__procs(f->b)), 0);
	assert_int_equal(f->proc_new, 0);
	assert_int_equal(books__now(f->b), 0);

	assert_int_equal(books__apply_bytes(f->b, &c, sizeof(c)), 0);
	assert_int_equal(bc->records[GL_REC_CALL], 1);
	assert_int_equal(bc->malformed, 4);
	assert_int_equal(books__now(f->b), 5);
	fx_free(f);
}

static void test_counters_and_clock(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t ips[] = { 1 };
	const struct books_counters *bc = books__counters(f->b);

	assert_int_equal(fx_stack(f, PID, 1, GL_API_cuMemAlloc_v2, ips, 1), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_int_equal(fx_proc_event(f, PID, START, GL_PROC_FORK, NULL, NULL), 0);
	assert_int_equal(bc->records[GL_REC_STACK], 1);
	assert_int_equal(bc->records[GL_REC_CALL], 1);
	assert_int_equal(bc->records[GL_REC_PROC], 1);
	assert_int_equal(books__now(f->b), f->clock_ns);
	/* a record from a CPU that lags does not move the clock back */
	assert_int_equal(fx_call(f, (struct gl_call){ .hdr.ts = 5, .api = GL_API_cuMemFree_v2,
						       .op = GL_OP_UNMATCHED_FREE,
						       .kind = GL_KIND_DPTR, .key = 2 }), 0);
	assert_int_equal(books__now(f->b), f->clock_ns);
	assert_ptr_equal(books__stacks(f->b), f->s);
	assert_ptr_equal(books__modules(f->b), f->m);
	assert_int_equal(f->proc_new, 1);
	fx_free(f);
}

/* A process under fx's procfs root, alive since start (boot-time ns) with environment env
 * (entries separated by '\0', envlen bytes). */
static void fake_proc_since(struct fx *f, int pid, uint64_t start, const char *env, size_t envlen)
{
	long hz = sysconf(_SC_CLK_TCK);
	char path[128], stat[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%d", f->root, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(stat, sizeof(stat),
		 "%d (rank) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n", pid,
		 (unsigned long long)(start / (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100))));
	snprintf(path, sizeof(path), "%s/%d/stat", f->root, pid);
	unit_write_file(path, stat);
	snprintf(path, sizeof(path), "%s/%d/environ", f->root, pid);
	fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(env, 1, envlen, fp), envlen);
	fclose(fp);
}

/* The same, alive with the fixture's start time: the process of its records. */
static void fake_live_proc(struct fx *f, int pid, const char *env, size_t envlen)
{
	fake_proc_since(f, pid, START, env, envlen);
}

/* What /proc says of fx's process PID: its name, and 17 in its own PID namespace. */
static void name_proc(struct fx *f, const char *comm)
{
	char path[128], line[64];

	snprintf(path, sizeof(path), "%s/%d/comm", f->root, PID);
	snprintf(line, sizeof(line), "%s\n", comm);
	unit_write_file(path, line);
	snprintf(path, sizeof(path), "%s/%d/status", f->root, PID);
	unit_write_file(path, "NSpid:\t4242\t17\n");
}

/* Books take no name from whatever process now has the records' PID. */
static void test_no_proc_files(void **state)
{
	struct fx *f = fx_new(true);
	char path[128];

	snprintf(path, sizeof(path), "%s/%d", f->root, PID);
	assert_int_equal(mkdir(path, 0755), 0);
	name_proc(f, "someoneelse");
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_string_equal(fx_proc(f)->t.comm, "?");
	assert_int_equal(fx_proc(f)->t.ns_pid, 0);
	fx_free(f);

	/* live books do, from the process of the records */
	f = fx_new(false);
	fake_live_proc(f, PID, "", 0);
	name_proc(f, "train (rank 0)");
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_string_equal(fx_proc(f)->t.comm, "train (rank 0)");
	assert_int_equal(fx_proc(f)->t.ns_pid, 17);
	expect_class(fx_proc(f), GL_CLASS_DEVICE, 1, 1);
	fx_free(f);

	/* but not from a process that started later with its PID (it was gone) */
	f = fx_new(false);
	fake_proc_since(f, PID, START + 5000000000ULL, "", 0);
	name_proc(f, "someoneelse");
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_string_equal(fx_proc(f)->t.comm, "?");
	assert_int_equal(fx_proc(f)->t.ns_pid, 0);
	expect_class(fx_proc(f), GL_CLASS_DEVICE, 1, 1);
	fx_free(f);
}

/*
 * --ranks-from-env: the ranks are read when the process maps a traced library,
 * so a rank killed before its first call is read keeps them; one seen only by
 * its calls is read at the first, while it lives, and one already gone has none;
 * the figures BPF read at the mapping stand without /proc.
 */
static void test_ranks_read_at_the_mapping_outlive_the_process(void **state)
{
	static const char env[] = "PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0";
	struct gl_proc r = { .hdr = { .pid = PID, .start_time = START }, .event = GL_PROC_LIBLOAD,
			     .ppid = 4000 };
	struct fx *f = fx_new_opts((struct books_opts){ .rank_env = true });
	char path[128];
	const struct proc_totals *t;

	fake_live_proc(f, PID, env, sizeof(env) - 1);
	fx_hdr(f, &r.hdr, GL_REC_PROC, sizeof(r));
	r.lib.kind = GL_LIB_CUDA;
	assert_int_equal(books__apply_bytes(f->b, &r, sizeof(r)), 0);
	/* killed: gone from /proc before the books reach its first call */
	snprintf(path, sizeof(path), "%s/%d", f->root, PID);
	unit_rm_tree(path);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	t = proc__totals(fx_proc(f));
	assert_int_equal(t->rank, 3);
	assert_int_equal(t->local_rank, 1);
	assert_int_equal(t->world_size, 8);
	assert_int_equal(t->ppid, 4000);
	fx_free(f);

	/* no mapping seen: read at the first call, while it lives */
	f = fx_new_opts((struct books_opts){ .rank_env = true });
	fake_live_proc(f, PID, env, sizeof(env) - 1);
	fake_live_proc(f, PID + 1, env, sizeof(env) - 1);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_int_equal(proc__totals(fx_proc(f))->rank, 3);
	/* and one gone by then has none */
	snprintf(path, sizeof(path), "%s/%d", f->root, PID + 1);
	unit_rm_tree(path);
	assert_int_equal(fx_call(f, (struct gl_call){ .hdr = { .pid = PID + 1 },
						       .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x2000,
						       .bytes = 1, .dev = -1, .seq = ++f->seq }),
			 0);
	t = proc__totals(procs__find_pid(books__procs(f->b), PID + 1));
	assert_int_equal(t->rank, -1);
	assert_int_equal(t->world_size, -1);
	fx_free(f);

	/* read by BPF at the mapping (env_read): the record's figures, with no /proc at all
	 * (dead by the time its record is read, or a recording replayed) */
	f = fx_new_opts((struct books_opts){ .rank_env = true, .no_proc_files = true });
	fx_hdr(f, &r.hdr, GL_REC_PROC, sizeof(r));
	r.lib.env[0] = 5;
	r.lib.env[1] = -1;
	r.lib.env[2] = 6;
	r.lib.env_read = 1;
	assert_int_equal(books__apply_bytes(f->b, &r, sizeof(r)), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	t = proc__totals(fx_proc(f));
	assert_int_equal(t->rank, 5);
	assert_int_equal(t->local_rank, -1);
	assert_int_equal(t->world_size, 6);
	fx_free(f);
	/* and without --ranks-from-env, none */
	f = fx_new_opts((struct books_opts){ .no_proc_files = true });
	fx_hdr(f, &r.hdr, GL_REC_PROC, sizeof(r));
	assert_int_equal(books__apply_bytes(f->b, &r, sizeof(r)), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 1, 0);
	assert_int_equal(proc__totals(fx_proc(f))->rank, -1);
	fx_free(f);
}

/* Context indexes: stable per value, 0 for none, and many of them. */
static void test_ctx_index(void **state)
{
	struct procs *ps = procs__new();
	struct proc *p;
	bool created;

	assert_non_null(ps);
	p = procs__get(ps, PID, START, &created);
	assert_non_null(p);
	assert_true(created);
	assert_ptr_equal(procs__get(ps, PID, START, &created), p);
	assert_false(created);
	assert_int_equal(proc__ctx_index(p, 0), 0);
	assert_int_equal(proc__ctx_index(p, 0xa), 1);
	assert_int_equal(proc__ctx_index(p, 0xb), 2);
	assert_int_equal(proc__ctx_index(p, 0xa), 1);
	assert_int_equal(p->ctxs[0].dev, -1);
	assert_false(p->ctxs[0].primary);
	/* a process that made contexts by the tens of thousands (past 2^15) */
	for (uint64_t c = 1; c <= 33000; c++)
		assert_int_equal(proc__ctx_index(p, 0x100000 + c), c + 2);
	assert_int_equal(proc__ctx_index(p, 0xb), 2);
	assert_int_equal(proc__ctx_index(p, 0x100000 + 32767), 32769);
	assert_int_equal(p->ctxs[32768].ctx, 0x100000 + 32767);
	assert_true(proc__mem(p) > 0);
	procs__remove(ps, p);
	assert_int_equal(procs__count(ps), 0);
	assert_null(procs__find_pid(ps, PID));
	procs__free(ps);
	procs__free(NULL);
}

/* A PyTorch block of device D inside a driver allocation of unknown device: that allocation
 * is on D, and so is everything allocated in its context, before and after. */
static void fx_block(struct fx *f, uint64_t ptr, uint64_t bytes, int16_t dev)
{
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_pytorch_malloc, .op = GL_OP_ALLOC,
						       .kind = GL_KIND_TORCH,
						       .cls = GL_CLASS_TORCH_BLOCK, .key = ptr,
						       .bytes = bytes, .dev = dev, .seq = ++f->seq }),
			 0);
}

static void test_block_device_learned(void **state)
{
	struct fx *f = fx_new(true);
	struct proc *p;

	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x10000000, 20 << 20, 0);	 /* no context known */
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x20000000, 20 << 20, 0xc1); /* context, no device */
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x30000000, 1 << 20, 0xc1);  /* a workspace in it */
	/* many more, gone by the time a block comes: the list of candidates stays bounded */
	for (uint64_t i = 0; i < 3000; i++)
		fx_alloc(f, GL_API_cuMemAlloc_v2, 0x40000000 + i * 4096, 4096, 0);
	for (uint64_t i = 0; i < 3000; i++)
		fx_free_key(f, GL_API_cuMemFree_v2, 0x40000000 + i * 4096, 4096, GL_CLASS_DEVICE);
	p = fx_proc(f);
	assert_int_equal(p->t.unknown_dev_bytes, 41 << 20);
	assert_true(p->nr_unknown <= 1024);

	fx_block(f, 0x30000000 + (1 << 20), 4096, 3); /* just past the workspace: in nothing */
	assert_int_equal(p->t.unknown_dev_bytes, 41 << 20);
	fx_block(f, 0x10000000 + 4096, 4096, 2);
	assert_int_equal(p->t.dev_bytes[2], 20 << 20);
	assert_int_equal(p->t.unknown_dev_bytes, 21 << 20);
	fx_block(f, 0x20000000 + (20 << 20) - 4096, 4096, 1);
	assert_int_equal(p->t.dev_bytes[1], 21 << 20);
	assert_int_equal(p->t.unknown_dev_bytes, 0);
	assert_int_equal(p->t.dev_bytes[3], 0);
	/* the context's device is known from now on; a free takes from its device */
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x50000000, 2 << 20, 0xc1);
	assert_int_equal(p->t.dev_bytes[1], 23 << 20);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x20000000, 20 << 20, GL_CLASS_DEVICE);
	assert_int_equal(p->t.dev_bytes[1], 3 << 20);
	fx_free_key(f, GL_API_cuMemFree_v2, 0x10000000, 20 << 20, GL_CLASS_DEVICE);
	assert_int_equal(p->t.dev_bytes[2], 0);
	expect_class(p, GL_CLASS_DEVICE, 3 << 20, 2);
	fx_free(f);
}

static struct gl_proc_stats live_stats;

static int fake_bpf_stats(void *ctx, int pid, struct gl_proc_stats *out)
{
	*out = live_stats;
	return 0;
}

static bool snap_consistent(struct fx *f, const uint64_t *stats)
{
	struct snapshot_opts o = { .now_ns = f->clock_ns, .bpf_stats = fake_bpf_stats,
				   .stats = stats };
	struct snapshot *snap = snapshot__build(f->b, NULL, &o);
	bool ok;

	assert_non_null(snap);
	assert_int_equal(snap->nprocs, 1);
	ok = snap->procs[0].consistent;
	snapshot__free(snap);
	return ok;
}

/* The verdict of the process's only stack, the snapshot taken at now_ns (judge_ns for PID
 * where that is not 0). */
static char *verdict_at(struct fx *f, uint64_t now_ns, uint64_t judge_ns)
{
	struct snapshot_opts o = { .now_ns = now_ns, .judge_pid = judge_ns ? PID : 0,
				   .judge_ns = judge_ns };
	struct snapshot *snap = snapshot__build(f->b, NULL, &o);
	char *v;

	assert_non_null(snap);
	assert_int_equal(snap->nprocs, 1);
	assert_int_equal(snap->procs[0].nstacks, 1);
	v = strdup(snap->procs[0].stacks[0].verdict);
	snapshot__free(snap);
	return v;
}

/*
 * A process gpuleak holds at its failure (--census-on-oom) makes no call while held: a
 * snapshot taken after a long pause would see a plateau that is gpuleak's own. Judged as
 * of the failure, the staircase is the leak it was.
 */
static void test_a_held_process_is_judged_as_of_its_failure(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t failure;
	char *v;

	for (uint64_t i = 0; i < 30; i++) {
		f->clock_ns += 1000000000ULL;
		fx_alloc(f, GL_API_cuMemAlloc_v2, 0x7f0000000000 + (i << 24), 1 << 20, 0);
	}
	failure = f->clock_ns;
	v = verdict_at(f, failure, 0);
	assert_string_equal(v, "leak");
	free(v);
	v = verdict_at(f, failure + 20000000000ULL, 0); /* 20 s later: flat since */
	assert_string_equal(v, "steady");
	free(v);
	v = verdict_at(f, failure + 20000000000ULL, failure);
	assert_string_equal(v, "leak");
	free(v);
	fx_free(f);
	(void)state;
}

/*
 * A running process's kernel counters, read while it calls, are ahead of the drained
 * records by the changes the kernel counted whose records are not applied yet; its
 * final books, and any reading after lost records, must agree exactly.
 */
static void test_live_books_agree_within_calls_in_flight(void **state)
{
	uint64_t stats[GL_NR_STATS] = {};
	struct fx *f = fx_new(true);
	struct proc *p;

	for (uint64_t i = 0; i < 10; i++)
		fx_alloc(f, GL_API_cuMemAlloc_v2, 0x7f0000000000 + (i << 24), 1 << 20, 0);
	p = fx_proc(f);
	live_stats = (struct gl_proc_stats){ .start_time = p->t.start_time, .alloc_calls = 10 };
	live_stats.bytes[GL_CLASS_DEVICE] = 10 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 10;
	assert_true(snap_consistent(f, stats));
	/* three more calls counted by the kernel, their records not drained yet */
	live_stats.alloc_calls = 13;
	live_stats.bytes[GL_CLASS_DEVICE] = 13 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 13;
	assert_true(snap_consistent(f, stats));
	/* more allocations than calls in flight */
	live_stats.bytes[GL_CLASS_DEVICE] = 14 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 14;
	assert_false(snap_consistent(f, stats));
	/* an allocation and a free in flight: the same count, other bytes */
	live_stats.alloc_calls = 11;
	live_stats.free_calls = 1;
	live_stats.bytes[GL_CLASS_DEVICE] = 11 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 10;
	assert_true(snap_consistent(f, stats));
	/* the same count with other bytes and no call in flight is a disagreement */
	live_stats.alloc_calls = 10;
	live_stats.free_calls = 0;
	assert_false(snap_consistent(f, stats));
	/* a teardown in flight is a change to come as well */
	live_stats.ctx_drops = 1;
	live_stats.bytes[GL_CLASS_DEVICE] = 0;
	live_stats.allocs[GL_CLASS_DEVICE] = 0;
	assert_false(snap_consistent(f, stats)); /* it may move one allocation, not ten */
	live_stats.bytes[GL_CLASS_DEVICE] = 9 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 9;
	assert_true(snap_consistent(f, stats));
	/* user space ahead of the kernel is no reading in flight */
	live_stats.ctx_drops = 0;
	live_stats.alloc_calls = 9;
	assert_false(snap_consistent(f, stats));
	/* after lost call records no slack hides a difference */
	live_stats.alloc_calls = 13;
	live_stats.bytes[GL_CLASS_DEVICE] = 13 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 13;
	stats[GL_STAT_LOST_CALL] = 1;
	assert_false(snap_consistent(f, stats));
	/* exited in the kernel, its last records (its exit's too) not read yet, as when a
	 * bundle is written at a failure: the same slack */
	stats[GL_STAT_LOST_CALL] = 0;
	live_stats.exit_time = p->t.start_time + 1;
	assert_true(snap_consistent(f, stats));
	live_stats.bytes[GL_CLASS_DEVICE] = 14 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 14;
	assert_false(snap_consistent(f, stats));
	live_stats.bytes[GL_CLASS_DEVICE] = 13 << 20;
	live_stats.allocs[GL_CLASS_DEVICE] = 13;
	assert_true(snap_consistent(f, stats));
	/* its exit record read with those figures: final books agree to the byte or not at
	 * all, and three calls are missing */
	assert_int_equal(fx_proc_event(f, PID, p->t.start_time, GL_PROC_EXIT, "", &live_stats),
			 0);
	assert_false(snap_consistent(f, stats));
	fx_free(f);
}

/* A call record of the fixture's process: op on key with the allocation number id. */
static void fx_numbered(struct fx *f, uint8_t op, uint64_t key, uint64_t bytes, uint64_t id,
			uint16_t flags)
{
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2, .op = op,
						       .kind = GL_KIND_DPTR, .cls = GL_CLASS_DEVICE,
						       .key = key, .bytes = bytes, .id = id,
						       .flags = flags, .dev = -1,
						       .seq = ++f->seq }), 0);
}

/* The memory breakdown's device bytes, over every device, as the books hold them. */
static void expect_breakdown(struct fx *f, struct proc *p, uint64_t device_bytes)
{
	struct explain_src src = books__explain_src(f->b);
	struct explain *e = malloc(sizeof(*e));
	uint64_t sum = 0, outside = 0;

	assert_non_null(e);
	assert_int_equal(explain__proc(&src, p, books__now(f->b), e), 0);
	for (uint32_t i = 0; i < e->ndevs; i++) {
		sum += e->devs[i].device_bytes;
		outside += e->devs[i].outside_torch;
	}
	free(e);
	assert_int_equal(sum, device_bytes);
	assert_int_equal(outside, device_bytes); /* none of it is PyTorch's */
}

/*
 * The driver gave an address freed on one thread to an allocation on another before the
 * free's record came: both stay outstanding until it comes, and each free takes the
 * allocation its number names, in either order.
 */
static void test_address_reused_before_free_returns(void **state)
{
	struct fx *f = fx_new(true);
	uint64_t ips_a[] = { 0x401000, 0x402000 }, ips_b[] = { 0x401000, 0x403000 };
	struct proc *p;

	for (int order = 0; order < 2; order++) {
		uint64_t a = 10 + order * 2, b = a + 1;

		assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips_a, 2), 0);
		fx_numbered(f, GL_OP_ALLOC, 0x1000, 100, a, 0);
		assert_int_equal(fx_stack(f, PID, f->seq + 1, GL_API_cuMemAlloc_v2, ips_b, 2), 0);
		fx_numbered(f, GL_OP_ALLOC, 0x1000, 300, b, 0);
		p = fx_proc(f);
		expect_class(p, GL_CLASS_DEVICE, 400, 2);
		assert_int_equal(fx_agg(p, 1, GL_CLASS_DEVICE)->bytes, 100);
		assert_int_equal(fx_agg(p, 2, GL_CLASS_DEVICE)->bytes, 300);
		/* the memory breakdown counts the one whose free is in flight too */
		expect_breakdown(f, p, 400);
		fx_numbered(f, GL_OP_FREE, 0x1000, order ? 300 : 100, order ? b : a, 0);
		expect_class(p, GL_CLASS_DEVICE, order ? 100 : 300, 1);
		assert_int_equal(fx_agg(p, order ? 2 : 1, GL_CLASS_DEVICE)->bytes, 0);
		fx_numbered(f, GL_OP_FREE, 0x1000, order ? 100 : 300, order ? a : b, 0);
		expect_class(p, GL_CLASS_DEVICE, 0, 0);
		assert_int_equal(books__counters(f->b)->user_unmatched, 0);
	}
	/* BPF saw the key still booked: the old allocation's release was never seen */
	fx_numbered(f, GL_OP_ALLOC, 0x2000, 100, 20, 0);
	fx_numbered(f, GL_OP_ALLOC, 0x2000, 300, 21, GL_CALL_REPLACED);
	expect_class(p, GL_CLASS_DEVICE, 300, 1);
	fx_free(f);
}

/* Calls in flight while their context was torn down: what the driver dropped goes. */
static void test_ctx_teardown_with_calls_in_flight(void **state)
{
	const uint64_t ctx = 0xc7c7;
	struct fx *f = fx_new(true);
	uint64_t before;
	struct proc *p;

	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuCtxCreate_v2,
						       .op = GL_OP_CTX_NEW, .key = ctx,
						       .dev = 0 }), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x1000, 100, ctx);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x2000, 200, ctx);
	before = f->teardowns; /* the calls below entered before the teardown */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuCtxDestroy_v2,
						       .op = GL_OP_CTX_DROP, .key = ctx, .ctx = ctx,
						       .dev = -1 }), 0);
	p = fx_proc(f);
	expect_class(p, GL_CLASS_DEVICE, 0, 0);
	assert_int_equal(p->t.dropped_bytes, 300);
	/* an allocation that returned after the teardown's record: dropped with it */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x3000,
						       .bytes = 50, .ctx = ctx, .dev = -1,
						       .teardowns = before }), 0);
	expect_class(p, GL_CLASS_DEVICE, 0, 0);
	assert_int_equal(p->t.alloc_calls, 3);
	assert_int_equal(p->t.dropped_bytes, 350);
	/* a free that freed 0x1000 before the teardown, its record after it */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemFree_v2,
						       .op = GL_OP_FREE, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x1000,
						       .bytes = 100, .ctx = ctx, .dev = -1,
						       .teardowns = before }), 0);
	assert_int_equal(p->t.dropped_bytes, 250);
	assert_int_equal(books__counters(f->b)->user_unmatched, 0);
	assert_int_equal(p->t.ctx_drops, 1);
	/* a new context at the same address: its allocations are its own */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuCtxCreate_v2,
						       .op = GL_OP_CTX_NEW, .key = ctx,
						       .dev = 0 }), 0);
	fx_alloc(f, GL_API_cuMemAlloc_v2, 0x4000, 70, ctx);
	expect_class(p, GL_CLASS_DEVICE, 70, 1);
	/* a primary context reset with an allocation in flight */
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuDevicePrimaryCtxRetain,
						       .op = GL_OP_CTX_NEW, .key = 0x9999,
						       .flags = 1, .dev = 1 }), 0);
	before = f->teardowns;
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuDevicePrimaryCtxReset,
						       .op = GL_OP_CTX_DROP, .dev = 1 }), 0);
	assert_int_equal(fx_call(f, (struct gl_call){ .api = GL_API_cuMemAlloc_v2,
						       .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
						       .cls = GL_CLASS_DEVICE, .key = 0x5000,
						       .bytes = 30, .ctx = 0x9999, .dev = 1,
						       .teardowns = before }), 0);
	expect_class(p, GL_CLASS_DEVICE, 70, 1);
	assert_int_equal(p->t.dropped_bytes, 280);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_free_each_kind),
		cmocka_unit_test(test_kinds_are_namespaces),
		cmocka_unit_test(test_unmatched_free),
		cmocka_unit_test(test_free_of_unknown_key),
		cmocka_unit_test(test_replaced_key),
		cmocka_unit_test(test_table_full),
		cmocka_unit_test(test_stacks_attributed),
		cmocka_unit_test(test_failures),
		cmocka_unit_test(test_failed_free),
		cmocka_unit_test(test_exec_clears_books),
		cmocka_unit_test(test_exit),
		cmocka_unit_test(test_exit_keeps_comm_when_record_has_none),
		cmocka_unit_test(test_gone_waits_for_the_reader),
		cmocka_unit_test(test_pid_reuse),
		cmocka_unit_test(test_processes_separate),
		cmocka_unit_test(test_unheld_mapping_noted),
		cmocka_unit_test(test_malformed_counted),
		cmocka_unit_test(test_counters_and_clock),
		cmocka_unit_test(test_no_proc_files),
		cmocka_unit_test(test_ranks_read_at_the_mapping_outlive_the_process),
		cmocka_unit_test(test_ctx_index),
		cmocka_unit_test(test_block_device_learned),
		cmocka_unit_test(test_live_books_agree_within_calls_in_flight),
		cmocka_unit_test(test_a_held_process_is_judged_as_of_its_failure),
		cmocka_unit_test(test_address_reused_before_free_returns),
		cmocka_unit_test(test_ctx_teardown_with_calls_in_flight),
	};

	return cmocka_run_group_tests_name("books", tests, NULL, NULL);
}
