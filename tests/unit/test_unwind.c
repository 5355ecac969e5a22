// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_unwind.c - stacks/native/unwind.c and dwarf.c on this very process:
 * a chain of functions copies its own registers and stack the way the BPF
 * program does, and the copy is unwound through the process's address map.
 * Checks the frames by name, the cache (a repeated stack is a hit; a changed
 * return address is not; changed words the result does not depend on are),
 * copies cut at every length (always a prefix of the whole stack, never a
 * made-up frame), the frame-pointer walk for a leaf pc without CFI, and FP
 * records passed through.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "stacks/modules.h"
#include "stacks/native/symbolize.h"
#include "stacks/native/unwind.h"

#ifdef __clang__
#define FRAME __attribute__((noinline, used))
#else
#define FRAME __attribute__((noipa, used))
#endif

#define MAGIC 0x6d61676963000000ULL /* values kept in callee-saved registers */

struct capture {
	struct gl_stack rec;
	uint8_t stack[GL_MAX_STACK_COPY];
	uint32_t sink; /* keeps the chain's register values alive */
};

struct fixture {
	struct modules *mods;
	struct symbolizer *sym;
	struct stack_owner proc;
	struct capture cap;
	struct stack_view view;
	uint64_t full[UNWIND_MAX_FRAMES];
	int nr_full;
};

static struct fixture *fx;

/* The copy the BPF program makes at a probed function's entry: the stack above sp. */
__attribute__((used)) void capture_copy(struct capture *c, uint64_t sp, uint64_t bp, uint64_t ip)
{
	pthread_attr_t attr;
	struct iovec local, remote;
	uint64_t end;
	void *addr;
	size_t size;
	ssize_t n;

	assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
	assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	end = (uint64_t)addr + size;
	memset(&c->rec, 0, sizeof(c->rec));
	c->rec.hdr.type = GL_REC_STACK;
	c->rec.ip = ip;
	c->rec.sp = sp;
	c->rec.bp = bp;
	c->rec.stack_bytes = end - sp < sizeof(c->stack) ? end - sp : sizeof(c->stack);
	/* a system call, not memcpy: other frames' redzones are read too */
	local = (struct iovec){ c->stack, c->rec.stack_bytes };
	remote = (struct iovec){ (void *)sp, c->rec.stack_bytes };
	n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	assert_int_equal(n, c->rec.stack_bytes);
	memcpy(&c->rec.ret_addr, c->stack, sizeof(c->rec.ret_addr));
}

/*
 * capture_entry(c): the registers at its first instruction, as a uprobe sees
 * them, and the stack copied while they are still valid (the copy runs below
 * sp). Its CFI says where the return address is.
 */
void capture_entry(struct capture *c);
__asm__(".text\n"
	".type capture_entry, @function\n"
	"capture_entry:\n"
	".cfi_startproc\n"
	"mov %rsp, %rsi\n"
	"mov %rbp, %rdx\n"
	"lea capture_entry(%rip), %rcx\n"
	"sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call capture_copy\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size capture_entry, .-capture_entry\n");

/* Six values of its own live across the call: it saves every callee-saved register. */
FRAME static void chain_d(struct capture *c)
{
	uint64_t x = (uint64_t)c;
	uint64_t a = x * 3, b = x ^ 5, d = x + 7, e = x >> 1, f = x * 11, g = x | 13;

	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d), "+r"(e), "+r"(f), "+r"(g));
	capture_entry(c);
	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d), "+r"(e), "+r"(f), "+r"(g));
	c->sink = (uint32_t)(a ^ b ^ d ^ e ^ f ^ g);
}

/* Holds MAGIC values in callee-saved registers: chain_d's save slots hold them. */
FRAME static void chain_c(struct capture *c)
{
	uint64_t a = MAGIC | 1, b = MAGIC | 2, d = MAGIC | 3, e = MAGIC | 4, f = MAGIC | 5;
	uint64_t g = MAGIC | 6;

	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d), "+r"(e), "+r"(f), "+r"(g));
	chain_d(c);
	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d), "+r"(e), "+r"(f), "+r"(g));
	c->sink ^= (uint32_t)(a ^ b ^ d ^ e ^ f ^ g);
}

FRAME static void chain_b(struct capture *c)
{
	volatile char scratch[100];

	scratch[0] = 1;
	chain_c(c);
	scratch[1] = scratch[0];
}

FRAME static void chain_a(struct capture *c)
{
	chain_b(c);
	__asm__ volatile("" ::: "memory");
}

#define SITES 5

/* The chain from five call sites: five stacks that differ in one return address. */
FRAME static void five_sites(struct capture *c)
{
	chain_a(&c[0]);
	chain_a(&c[1]);
	chain_a(&c[2]);
	chain_a(&c[3]);
	chain_a(&c[4]);
	__asm__ volatile("" ::: "memory");
}

static const char *function_at(uint64_t addr)
{
	struct sym_result r;
	uint64_t off;
	uint32_t mod = addr_map__resolve(fx->proc.am, addr, &off);

	if (!mod || symbolizer__lookup(fx->sym, mod, off, &r) || !r.function)
		return "?";
	return r.function;
}

static int unwind(struct unwinder *u, uint64_t *ips)
{
	return unwind__stack(u, &fx->proc, &fx->view, ips, UNWIND_MAX_FRAMES);
}

static struct unwinder *dwarf_unwinder(void)
{
	struct unwinder *u = unwinder__new(fx->mods, GL_STACK_DWARF);

	assert_non_null(u);
	return u;
}

static int setup(void **state)
{
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	fx->mods = modules__new();
	assert_non_null(fx->mods);
	fx->sym = symbolizer__new(fx->mods);
	assert_non_null(fx->sym);
	fx->proc.pid = getpid();
	fx->proc.start_time = 1;
	fx->proc.am = addr_map__new(fx->mods, getpid());
	assert_non_null(fx->proc.am);
	chain_a(&fx->cap);
	fx->view = (struct stack_view){ .rec = &fx->cap.rec, .stack = fx->cap.stack };
	return 0;
}

static int teardown(void **state)
{
	addr_map__free(fx->proc.am);
	symbolizer__free(fx->sym);
	modules__free(fx->mods);
	free(fx);
	return 0;
}

static void test_own_stack_by_name(void **state)
{
	static const char *const want[] = { "capture_entry", "chain_d", "chain_c",
					    "chain_b",	     "chain_a", "setup" };
	struct unwinder *u = dwarf_unwinder();
	int n = unwind(u, fx->full);

	fx->nr_full = n;
	assert_true(n > (int)(sizeof(want) / sizeof(want[0])));
	assert_int_equal(fx->full[0], fx->cap.rec.ip);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(function_at(i ? fx->full[i] - 1 : fx->full[i]), want[i]);
	unwinder__free(u);
}

static void test_repeat_is_a_hit(void **state)
{
	struct unwinder *u = dwarf_unwinder();
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;

	assert_int_equal(unwind(u, ips), fx->nr_full);
	assert_int_equal(unwind(u, ips), fx->nr_full);
	assert_memory_equal(ips, fx->full, fx->nr_full * sizeof(ips[0]));
	unwinder__stats(u, &st);
	assert_int_equal(st.stacks, 2);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.uncached, 0);
	unwinder__free(u);
}

/*
 * What the unwinder published to BPF's stack cache: the two maps, kept as BPF
 * has them, and the last shape and stack written.
 */
#define MODEL_SHAPES 8
#define MODEL_STACKS 16

struct published {
	int puts, shape_puts, dels, drops;
	int refuse; /* a stack's put fails with this (negative errno), as a full map does */
	int room;   /* stacks the map takes (0: MODEL_STACKS); a new one past them: -E2BIG */
	struct gl_scache_key k;
	struct gl_scache_shape s;
	struct gl_scache_vkey vk;
	struct gl_scache_val v;
	int nr_shapes, nr_stacks;
	struct gl_scache_key keys[MODEL_SHAPES];
	struct gl_scache_shape shapes[MODEL_SHAPES];
	struct gl_scache_vkey vkeys[MODEL_STACKS];
	struct gl_scache_val vals[MODEL_STACKS];
};

static int pub_put_shape(void *ctx, const struct gl_scache_key *k, const struct gl_scache_shape *s)
{
	struct published *p = ctx;
	int i;

	p->shape_puts++;
	for (i = 0; i < p->nr_shapes && memcmp(&p->keys[i], k, sizeof(*k)); i++)
		;
	assert_true(i < MODEL_SHAPES);
	p->nr_shapes += i == p->nr_shapes;
	p->keys[i] = p->k = *k;
	p->shapes[i] = p->s = *s;
	return 0;
}

static int pub_put_stack(void *ctx, const struct gl_scache_vkey *k, const struct gl_scache_val *v)
{
	struct published *p = ctx;
	int i;

	p->puts++;
	if (p->refuse)
		return p->refuse;
	for (i = 0; i < p->nr_stacks && memcmp(&p->vkeys[i], k, sizeof(*k)); i++)
		;
	if (p->room && i == p->nr_stacks && i >= p->room)
		return -E2BIG;
	assert_true(i < MODEL_STACKS);
	p->nr_stacks += i == p->nr_stacks;
	p->vkeys[i] = p->vk = *k;
	p->vals[i] = p->v = *v;
	return 0;
}

static void pub_del_stack(void *ctx, const struct gl_scache_vkey *k)
{
	struct published *p = ctx;

	p->dels++;
	for (int i = 0; i < p->nr_stacks; i++) {
		if (memcmp(&p->vkeys[i], k, sizeof(*k)))
			continue;
		p->vkeys[i] = p->vkeys[--p->nr_stacks];
		p->vals[i] = p->vals[p->nr_stacks];
		return;
	}
}

static void pub_drop(void *ctx, int pid)
{
	struct published *p = ctx;

	assert_int_equal(pid, getpid());
	p->drops++;
	p->nr_shapes = p->nr_stacks = 0; /* every entry is this process's */
}

#define PUBLISHER(pub)                                                      \
	{                                                                   \
		.put_shape = pub_put_shape, .put_stack = pub_put_stack,     \
		.del_stack = pub_del_stack, .drop = pub_drop, .ctx = &(pub) \
	}

/*
 * What BPF's lookup (bpf/stack.bpf.h) answers for the copy c, from the maps as
 * p has them: the shapes under c's key in turn, the shape's first stack, else
 * the words at a shape's offsets hashed as gpuleak_abi.h says, the stack under
 * that hash, its words compared.
 */
static uint32_t model_lookup(const struct published *p, const struct capture *c)
{
	struct gl_scache_key k = { .tgid = (uint32_t)getpid(), .ip = c->rec.ip, .sp = c->rec.sp };

	memcpy(&k.word0, c->stack, sizeof(k.word0));
	for (k.way = 0; k.way < GL_SC_WAYS; k.way++) {
		const struct gl_scache_shape *s = NULL;
		struct gl_scache_vkey vk = { .tgid = k.tgid };
		uint64_t w[GL_SC_CHECKS], h = GL_SC_SEED;

		for (int i = 0; i < p->nr_shapes; i++)
			if (!memcmp(&p->keys[i], &k, sizeof(k)))
				s = &p->shapes[i];
		if (!s || s->start_time != c->rec.hdr.start_time || s->span > c->rec.stack_bytes)
			continue;
		if (s->need_bp)
			h = gl_scache_mix(h, c->rec.bp);
		for (int i = 0; i < s->nr_checks; i++) {
			memcpy(&w[i], c->stack + s->off[i], sizeof(w[i]));
			h = gl_scache_mix(h, w[i]);
		}
		if (s->first.id && (!s->need_bp || s->first.bp == c->rec.bp) &&
		    !memcmp(s->first.val, w, s->nr_checks * sizeof(w[0])))
			return s->first.id;
		vk.shape = s->shape;
		vk.hash = h;
		for (int i = 0; i < p->nr_stacks; i++) {
			const struct gl_scache_val *v = &p->vals[i];

			if (memcmp(&p->vkeys[i], &vk, sizeof(vk)) ||
			    (s->need_bp && v->bp != c->rec.bp) ||
			    memcmp(v->val, w, s->nr_checks * sizeof(w[0])))
				continue;
			return v->id;
		}
	}
	return 0;
}

/*
 * An unwinding is published with the words it read, each as the copy has it;
 * a record naming the id gets the same pcs without a copy; an id of another
 * process, or one never given, gets no stack at all, never another's.
 */
static void test_published_entry_answers_its_id(void **state)
{
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { 0 };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES], w;
	struct gl_stack by_id = fx->cap.rec;
	struct stack_view v = { .rec = &by_id };
	struct stack_owner other = fx->proc;
	struct unwind_stats st;

	unwinder__set_publisher(u, &sp);
	assert_int_equal(unwind(u, ips), fx->nr_full);
	assert_int_equal(pub.puts, 1);
	assert_int_equal(pub.k.ip, fx->cap.rec.ip);
	assert_int_equal(pub.k.sp, fx->cap.rec.sp);
	memcpy(&w, fx->cap.stack, sizeof(w));
	assert_int_equal(pub.k.word0, w);
	assert_int_equal(pub.shape_puts, 1);
	assert_int_not_equal(pub.s.shape, 0);
	assert_int_equal(pub.vk.shape, pub.s.shape);
	assert_int_not_equal(pub.v.id, 0);
	assert_int_equal(pub.s.len, fx->cap.rec.stack_bytes);
	assert_int_equal(pub.s.start_time, fx->cap.rec.hdr.start_time);
	assert_true(pub.s.nr_checks > 0 && pub.s.nr_checks <= GL_SC_CHECKS);
	for (uint32_t i = 0; i < pub.s.nr_checks; i++) {
		assert_true(pub.s.off[i] + 8u <= pub.s.span);
		memcpy(&w, fx->cap.stack + pub.s.off[i], sizeof(w));
		assert_int_equal(w, pub.v.val[i]);
	}
	/* every return address the result holds is among the words checked */
	for (int i = 1; i < fx->nr_full; i++) {
		bool seen = false;

		for (uint32_t j = 0; j < pub.s.nr_checks; j++)
			seen |= pub.v.val[j] == fx->full[i];
		assert_true(seen);
	}
	/* the shape's first stack, in place, and the same under the hash of its words */
	assert_int_equal(pub.s.first.id, pub.v.id);
	assert_int_equal(pub.s.first.bp, pub.v.bp);
	assert_memory_equal(pub.s.first.val, pub.v.val, pub.s.nr_checks * sizeof(pub.v.val[0]));
	assert_int_equal(model_lookup(&pub, &fx->cap), pub.v.id);

	by_id.cache_id = pub.v.id;
	by_id.stack_bytes = 0;
	memset(ips, 0, sizeof(ips));
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, UNWIND_MAX_FRAMES), fx->nr_full);
	assert_memory_equal(ips, fx->full, fx->nr_full * sizeof(ips[0]));

	other.start_time = fx->proc.start_time + 1; /* the PID, reused */
	assert_int_equal(unwind__stack(u, &other, &v, ips, UNWIND_MAX_FRAMES), 0);
	by_id.cache_id = pub.v.id + 1;
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, UNWIND_MAX_FRAMES), 0);
	unwinder__stats(u, &st);
	assert_int_equal(st.kernel_hits, 1);
	assert_int_equal(st.kernel_bad, 2);
	unwinder__free(u);
	assert_int_equal(pub.drops, 0); /* at teardown the tracer goes first: nothing to drop */
}

/* Five stacks under one key of BPF's cache: one ip, sp and first word. */
static struct capture *five_captures(void)
{
	struct capture *c = calloc(SITES, sizeof(*c));
	uint64_t w0, w;

	assert_non_null(c);
	five_sites(c);
	memcpy(&w0, c[0].stack, sizeof(w0));
	for (int i = 1; i < SITES; i++) {
		c[i].rec.hdr.start_time = c[0].rec.hdr.start_time;
		assert_int_equal(c[i].rec.ip, c[0].rec.ip);
		assert_int_equal(c[i].rec.sp, c[0].rec.sp);
		memcpy(&w, c[i].stack, sizeof(w));
		assert_int_equal(w, w0);
	}
	return c;
}

static int unwind_capture(struct unwinder *u, struct capture *c, uint64_t *ips)
{
	struct stack_view v = { .rec = &c->rec, .stack = c->stack };

	return unwind__stack(u, &fx->proc, &v, ips, UNWIND_MAX_FRAMES);
}

/*
 * Call sites that reach one call at one depth (a function called from many
 * places) share BPF's key and the shape of their unwinding, and differ in
 * their words: one shape is written, and each stack under it, which BPF's
 * lookup finds by its own words and no other's.
 */
static void test_stacks_of_one_shape_share_it(void **state)
{
	struct capture *c = five_captures();
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { 0 };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES];
	uint32_t ids[SITES];
	struct unwind_stats st;

	unwinder__set_publisher(u, &sp);
	for (int i = 0; i < SITES; i++) {
		assert_true(unwind_capture(u, &c[i], ips) > 4);
		assert_string_equal(function_at(ips[4] - 1), "chain_a");
		assert_string_equal(function_at(ips[5] - 1), "five_sites");
	}
	assert_int_equal(pub.shape_puts, 1);
	assert_int_equal(pub.puts, SITES);
	assert_int_equal(pub.nr_stacks, SITES);
	for (int i = 0; i < SITES; i++) {
		ids[i] = model_lookup(&pub, &c[i]);
		assert_int_not_equal(ids[i], 0);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(ids[i], ids[j]);
	}
	unwinder__stats(u, &st);
	assert_int_equal(st.misses, SITES);
	assert_int_equal(st.published, SITES);
	assert_int_equal(st.shapes_evicted, 0);
	unwinder__free(u);
	free(c);
}

/*
 * A key holds GL_SC_WAYS shapes: a fifth (here, copies cut at another length)
 * takes the way of the one used longest ago, whose stacks are withdrawn; that
 * stack's next copy is published again.
 */
static void test_a_fifth_shape_replaces_the_oldest(void **state)
{
	struct capture *c = five_captures();
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { 0 };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;

	_Static_assert(SITES == GL_SC_WAYS + 1, "one shape more than a key holds");
	unwinder__set_publisher(u, &sp);
	for (int i = 0; i < SITES; i++) {
		c[i].rec.stack_bytes -= 8 * i;
		assert_true(unwind_capture(u, &c[i], ips) > 4);
		assert_true(pub.s.span < c[i].rec.stack_bytes);
		assert_int_equal(pub.s.len, c[i].rec.stack_bytes);
	}
	assert_int_equal(pub.shape_puts, SITES);
	assert_int_equal(pub.nr_shapes, GL_SC_WAYS);
	assert_int_equal(pub.dels, 1);
	assert_int_equal(model_lookup(&pub, &c[0]), 0);
	for (int i = 1; i < SITES; i++)
		assert_int_not_equal(model_lookup(&pub, &c[i]), 0);
	unwinder__stats(u, &st);
	assert_int_equal(st.shapes_evicted, 1);

	/* the first site's copy again: user space's entry, written again, in c[1]'s way */
	assert_true(unwind_capture(u, &c[0], ips) > 4);
	assert_int_not_equal(model_lookup(&pub, &c[0]), 0);
	assert_int_equal(model_lookup(&pub, &c[1]), 0);
	unwinder__stats(u, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.shapes_evicted, 2);
	unwinder__free(u);
	free(c);
}

/*
 * BPF's map full of this process's stacks: they are withdrawn, and the new one
 * written; one withdrawn is written again at its next copy.
 */
static void test_full_map_starts_over(void **state)
{
	struct capture *c = five_captures();
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { .room = 2 };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;

	unwinder__set_publisher(u, &sp);
	for (int i = 0; i < 3; i++)
		assert_true(unwind_capture(u, &c[i], ips) > 4);
	assert_int_equal(pub.drops, 1);
	assert_int_equal(pub.nr_stacks, 1);
	assert_int_equal(model_lookup(&pub, &c[0]), 0);
	assert_int_not_equal(model_lookup(&pub, &c[2]), 0);
	assert_true(unwind_capture(u, &c[0], ips) > 4); /* user space's hit, written again */
	assert_int_not_equal(model_lookup(&pub, &c[0]), 0);
	assert_int_not_equal(model_lookup(&pub, &c[2]), 0);
	unwinder__stats(u, &st);
	assert_int_equal(st.kernel_clears, 1);
	assert_int_equal(st.publish_failed, 0);
	assert_int_equal(st.published, 4);
	assert_int_equal(st.hits, 1);
	unwinder__free(u);
	free(c);
}

/*
 * A stack cache that takes no more entries (a map full of another tracer's, or
 * one that fails): the stack is still unwound whole from its copy, each copy
 * is tried twice (the second time once what BPF held of the process was
 * withdrawn to make room), and the refusals are counted.
 */
static void test_refused_entry_still_unwinds(void **state)
{
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { .refuse = -E2BIG };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;

	unwinder__set_publisher(u, &sp);
	for (int i = 0; i < 2; i++) {
		memset(ips, 0, sizeof(ips));
		assert_int_equal(unwind(u, ips), fx->nr_full);
		assert_memory_equal(ips, fx->full, fx->nr_full * sizeof(ips[0]));
	}
	unwinder__stats(u, &st);
	assert_int_equal(pub.puts, 4);
	assert_int_equal(pub.shape_puts,
			 3); /* the second copy finds its shape, then writes it again */
	assert_int_equal(pub.drops, 2);
	assert_int_equal(st.kernel_clears, 2);
	assert_int_equal(st.publish_failed, 2);
	assert_int_equal(st.published, 0);
	assert_int_equal(st.hits, 1); /* the second copy, from user space's cache */
	unwinder__free(u);
}

/*
 * A copy cut inside the frames the unwinding walks is published as cut there
 * (BPF must then see the same cut before it sends the id); one the unwinding
 * never read past is not, whatever lies beyond it, so BPF need not probe the
 * page after it.
 */
static void test_published_entry_says_whether_its_cut_matters(void **state)
{
	uint32_t len = fx->cap.rec.stack_bytes, ret_off = 0;
	struct unwinder *u = dwarf_unwinder();
	struct published pub = { 0 };
	struct scache_publisher sp = PUBLISHER(pub);
	uint64_t ips[UNWIND_MAX_FRAMES], w;
	int n;

	unwinder__set_publisher(u, &sp);
	assert_int_equal(unwind(u, ips), fx->nr_full);
	assert_int_equal(pub.puts, 1);
	/* the unwinding ended at the outermost frame, inside the copy */
	assert_true(pub.s.span < len);
	assert_int_equal(pub.s.need_cut, 0);

	/* cut just past the third frame's return address: the fourth is out of reach */
	for (uint32_t off = 8; off + 8 <= len && !ret_off; off += 8) {
		memcpy(&w, fx->cap.stack + off, sizeof(w));
		if (w == fx->full[3])
			ret_off = off;
	}
	assert_true(ret_off > 0);
	fx->cap.rec.stack_bytes = ret_off;
	n = unwind(u, ips);
	fx->cap.rec.stack_bytes = len;
	assert_true(n >= 1 && n < fx->nr_full);
	assert_int_equal(pub.puts, 2);
	assert_int_equal(pub.s.len, ret_off);
	assert_int_equal(pub.s.need_cut, 1);
	unwinder__free(u);
}

/* The words at which the copy holds v, from byte offset from on. */
static int find_words(uint64_t v, size_t from, size_t *at, int max)
{
	int n = 0;

	for (size_t off = from; off + 8 <= fx->cap.rec.stack_bytes && n < max; off += 8) {
		uint64_t w;

		memcpy(&w, fx->cap.stack + off, sizeof(w));
		if (w == v)
			at[n++] = off;
	}
	return n;
}

static void test_saved_registers_do_not_count(void **state)
{
	struct capture saved = fx->cap;
	struct unwinder *u = dwarf_unwinder();
	uint64_t ips[UNWIND_MAX_FRAMES], other = MAGIC | 0x77;
	struct unwind_stats st;
	size_t at[8];
	int found = 0;

	assert_int_equal(unwind(u, ips), fx->nr_full);
	/* chain_c's values sit in save slots that libdwfl reads to restore registers */
	for (uint64_t v = MAGIC | 1; v <= (MAGIC | 6); v++) {
		int n = find_words(v, 0, at, 8);

		for (int i = 0; i < n; i++)
			memcpy(fx->cap.stack + at[i], &other, sizeof(other));
		found += n;
	}
	assert_true(found > 0);
	assert_int_equal(unwind(u, ips), fx->nr_full);
	assert_memory_equal(ips, fx->full, fx->nr_full * sizeof(ips[0]));
	unwinder__stats(u, &st);
	assert_int_equal(st.hits, 1);
	fx->cap = saved;
	unwinder__free(u);
}

static void test_changed_return_address_misses(void **state)
{
	struct capture saved = fx->cap;
	struct unwinder *u = dwarf_unwinder();
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;
	size_t at = 0;

	assert_int_equal(unwind(u, ips), fx->nr_full);
	/* chain_b's return address into chain_a becomes one into setup */
	assert_int_equal(find_words(fx->full[4], 0, &at, 1), 1);
	memcpy(fx->cap.stack + at, &fx->full[5], sizeof(fx->full[5]));
	unwind(u, ips);
	unwinder__stats(u, &st);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.misses, 2);
	assert_memory_equal(ips, fx->full, 4 * sizeof(ips[0]));
	assert_int_equal(ips[4], fx->full[5]);
	assert_string_equal(function_at(ips[4] - 1), "setup");
	fx->cap = saved;
	unwinder__free(u);
}

static void test_cut_copy_gives_prefix(void **state)
{
	uint32_t len = fx->cap.rec.stack_bytes;
	struct unwinder *u = dwarf_unwinder();
	uint64_t ips[UNWIND_MAX_FRAMES];
	int last = 0;

	for (uint32_t cut = 0; cut <= len; cut += 8) {
		int n;

		fx->cap.rec.stack_bytes = cut;
		n = unwind(u, ips);
		assert_true(n >= 1 && n <= fx->nr_full);
		assert_memory_equal(ips, fx->full, n * sizeof(ips[0]));
		assert_true(n >= last);
		last = n;
	}
	assert_int_equal(last, fx->nr_full);
	fx->cap.rec.stack_bytes = len;
	unwinder__free(u);
}

/* pcs outside every module: libdwfl follows rbp; so does the replay, and it caches. */
/*
 * A leaf pc in no module libdwfl knows (no CFI): the rbp chain, walked here, not by
 * libdwfl, whose fallback at a function's entry would skip the caller; with the
 * caller's return address at sp where the record was taken at an entry. Not cached.
 */
static void test_frame_pointer_fallback(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));
	struct stack_view v = { .rec = &c->rec, .stack = c->stack };
	struct unwinder *u = dwarf_unwinder();
	uint64_t ips[8], sp = 0x7ff000000000ULL, w[32] = { 0 };
	struct unwind_stats st;

	assert_non_null(c);
	c->rec.ip = 0x1000;
	c->rec.sp = sp;
	c->rec.bp = sp + 64;
	c->rec.stack_bytes = sizeof(w);
	w[0] = 0x1500;	 /* at sp: a return address at an entry, a local elsewhere */
	w[8] = sp + 128; /* at bp: the caller's rbp */
	w[9] = 0x2000;	 /* at bp + 8: the return address */
	w[16] = 0;	 /* the end of the chain */
	w[17] = 0x3000;
	memcpy(c->stack, w, sizeof(w));
	/* inside a function (a USDT probe): the chain alone */
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 8), 3);
	assert_int_equal(ips[0], 0x1000);
	assert_int_equal(ips[1], 0x2000);
	assert_int_equal(ips[2], 0x3000);
	/* at its entry: the caller, then the chain */
	c->rec.ret_addr = 0x1500;
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 8), 4);
	assert_int_equal(ips[0], 0x1000);
	assert_int_equal(ips[1], 0x1500);
	assert_int_equal(ips[2], 0x2000);
	assert_int_equal(ips[3], 0x3000);
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 2), 2);
	unwinder__stats(u, &st);
	assert_int_equal(st.fp_walks, 3);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.misses, 0);
	unwinder__free(u);
	free(c);
}

static void test_without_address_map(void **state)
{
	struct unwinder *u = dwarf_unwinder();
	struct stack_owner p = { .pid = getpid(), .start_time = 2 };
	uint64_t ips[UNWIND_MAX_FRAMES];
	struct unwind_stats st;
	int n = unwind__stack(u, &p, &fx->view, ips, UNWIND_MAX_FRAMES);

	assert_true(n >= 2);
	assert_int_equal(ips[0], fx->cap.rec.ip);
	assert_int_equal(ips[1], fx->full[1]);
	unwinder__stats(u, &st);
	assert_int_equal(st.fp_walks, 1);
	unwinder__free(u);
}

static void test_fp_records_pass_through(void **state)
{
	struct {
		struct gl_stack rec;
		uint64_t ips[3];
	} r = { .rec = { .nr_ips = 3, .ret_addr = 0x20, .ip = 0x10 }, .ips = { 0x10, 0x30, 0 } };
	struct stack_view v = { .rec = &r.rec, .ips = r.ips };
	struct unwinder *u = unwinder__new(fx->mods, GL_STACK_FP);
	uint64_t ips[8];

	assert_non_null(u);
	/* the caller's return address at sp is added after the entry; a 0 ends the walk */
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 8), 3);
	assert_int_equal(ips[0], 0x10);
	assert_int_equal(ips[1], 0x20);
	assert_int_equal(ips[2], 0x30);
	r.ips[1] = 0x20;
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 8), 2);
	assert_int_equal(unwind__stack(u, &fx->proc, &v, ips, 1), 1);
	unwinder__free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_stack_by_name),
		cmocka_unit_test(test_repeat_is_a_hit),
		cmocka_unit_test(test_published_entry_answers_its_id),
		cmocka_unit_test(test_refused_entry_still_unwinds),
		cmocka_unit_test(test_stacks_of_one_shape_share_it),
		cmocka_unit_test(test_a_fifth_shape_replaces_the_oldest),
		cmocka_unit_test(test_full_map_starts_over),
		cmocka_unit_test(test_saved_registers_do_not_count),
		cmocka_unit_test(test_changed_return_address_misses),
		cmocka_unit_test(test_cut_copy_gives_prefix),
		cmocka_unit_test(test_published_entry_says_whether_its_cut_matters),
		cmocka_unit_test(test_frame_pointer_fallback),
		cmocka_unit_test(test_without_address_map),
		cmocka_unit_test(test_fp_records_pass_through),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
