// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_event.c - trace/event.c: event__validate accepts exactly the records
 * BPF writes and rejects every size or count that does not add up;
 * event__stack_view finds the variable parts where BPF put them.
 */
#include "unit.h"
#include "trace/event.h"

/* Big enough for the largest stack record, 8-aligned like ring-buffer samples. */
static uint64_t buf[(sizeof(struct gl_stack) + GL_MAX_PY_FRAMES * sizeof(struct gl_py_frame) +
		     GL_MAX_FP_FRAMES * 8 + GL_MAX_STACK_COPY) / 8 + 8];

static struct gl_call *make_call(void)
{
	struct gl_call *c = (struct gl_call *)buf;

	memset(buf, 0, sizeof(buf));
	c->hdr.type = GL_REC_CALL;
	c->hdr.size = sizeof(*c);
	c->hdr.pid = 10;
	c->api = GL_API_cuMemAlloc_v2;
	c->op = GL_OP_ALLOC;
	c->kind = GL_KIND_DPTR;
	return c;
}

static struct gl_stack *make_stack(uint16_t nr_py, uint16_t nr_ips, uint32_t stack_bytes)
{
	struct gl_stack *s = (struct gl_stack *)buf;

	memset(buf, 0, sizeof(buf));
	s->hdr.type = GL_REC_STACK;
	s->hdr.size = sizeof(*s) + nr_py * sizeof(struct gl_py_frame) + nr_ips * 8 + stack_bytes;
	s->nr_py = nr_py;
	s->nr_ips = nr_ips;
	s->stack_bytes = stack_bytes;
	s->api = GL_API_cuMemAlloc_v2;
	return s;
}

static struct gl_proc *make_proc(void)
{
	struct gl_proc *p = (struct gl_proc *)buf;

	memset(buf, 0, sizeof(buf));
	p->hdr.type = GL_REC_PROC;
	p->hdr.size = sizeof(*p);
	p->event = GL_PROC_EXIT;
	return p;
}

static void test_layout(void **state)
{
	/* ips follow the header and the Python frames: both keep them 8-aligned */
	assert_int_equal(sizeof(struct gl_hdr) % 8, 0);
	assert_int_equal(sizeof(struct gl_stack) % 8, 0);
	assert_int_equal(sizeof(struct gl_py_frame) % 8, 0);
	assert_int_equal(sizeof(struct gl_call) % 8, 0);
	assert_int_equal(sizeof(struct gl_proc) % 8, 0);
}

static void test_call(void **state)
{
	struct gl_call *c = make_call();

	assert_int_equal(event__validate(c, sizeof(*c)), GL_REC_CALL);
	c->api = GL_NR_APIS - 1;
	c->kind = GL_NR_KINDS - 1;
	assert_int_equal(event__validate(c, sizeof(*c)), GL_REC_CALL);

	c = make_call();
	c->api = GL_NR_APIS;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c->api = 0xffff;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c = make_call();
	c->kind = GL_NR_KINDS;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c->kind = 0xff;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);

	/* the header's size and the sample's size must both be the record's */
	c = make_call();
	c->hdr.size = sizeof(*c) - 1;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	assert_int_equal(event__validate(c, sizeof(*c) - 1), -EINVAL);
	c->hdr.size = sizeof(*c) + 8;
	assert_int_equal(event__validate(c, sizeof(*c) + 8), -EINVAL);
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c->hdr.size = sizeof(*c);
	assert_int_equal(event__validate(c, sizeof(*c) - 8), -EINVAL);
	assert_int_equal(event__validate(c, sizeof(*c) + 8), -EINVAL);
}

static void test_proc(void **state)
{
	struct gl_proc *p = make_proc();

	assert_int_equal(event__validate(p, sizeof(*p)), GL_REC_PROC);
	p->hdr.size = sizeof(*p) - 8;
	assert_int_equal(event__validate(p, sizeof(*p)), -EINVAL);
	assert_int_equal(event__validate(p, sizeof(*p) - 8), -EINVAL);
	p->hdr.size = sizeof(*p) + 8;
	assert_int_equal(event__validate(p, sizeof(*p) + 8), -EINVAL);
	p->hdr.size = sizeof(*p);
	assert_int_equal(event__validate(p, sizeof(*p) + 8), -EINVAL);
	/* a call's size under the process type */
	p->hdr.size = sizeof(struct gl_call);
	assert_int_equal(event__validate(p, sizeof(struct gl_call)), -EINVAL);
}

static void test_header(void **state)
{
	struct gl_call *c = make_call();

	assert_int_equal(event__validate(NULL, sizeof(*c)), -EINVAL);
	assert_int_equal(event__validate(c, 0), -EINVAL);
	assert_int_equal(event__validate(c, sizeof(struct gl_hdr) - 1), -EINVAL);
	c->hdr.size = 0;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c->hdr.size = sizeof(struct gl_hdr) - 1;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
	c->hdr.size = UINT32_MAX;
	assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);

	/* unknown types, whatever the size */
	static const uint32_t types[] = { 0, GL_NR_REC_TYPES, 5, 0x80000001u, UINT32_MAX };

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		c = make_call();
		c->hdr.type = types[i];
		assert_int_equal(event__validate(c, sizeof(*c)), -EINVAL);
		c->hdr.size = sizeof(struct gl_hdr);
		assert_int_equal(event__validate(c, sizeof(struct gl_hdr)), -EINVAL);
	}
}

static void test_stack(void **state)
{
	struct gl_stack *s = make_stack(0, 0, 0);

	assert_int_equal(event__validate(s, sizeof(*s)), GL_REC_STACK);
	s = make_stack(3, 5, 64);
	assert_int_equal(event__validate(s, s->hdr.size), GL_REC_STACK);
	s = make_stack(GL_MAX_PY_FRAMES, GL_MAX_FP_FRAMES, GL_MAX_STACK_COPY);
	assert_int_equal(event__validate(s, s->hdr.size), GL_REC_STACK);
	assert_true(s->hdr.size <= sizeof(buf));
}

static void test_stack_rejects(void **state)
{
	struct gl_stack *s;
	uint32_t size;

	/* counts above the limits, with sizes that agree with them */
	s = make_stack(GL_MAX_PY_FRAMES + 1, 0, 0);
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);
	s = make_stack(0, GL_MAX_FP_FRAMES + 1, 0);
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);
	s = make_stack(0, 0, GL_MAX_STACK_COPY + 8);
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);

	/* counts that do not add up to the size, either way */
	s = make_stack(2, 4, 32);
	size = s->hdr.size;
	s->nr_py = 3;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->nr_py = 1;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->nr_py = 2;
	s->nr_ips = 5;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->nr_ips = 3;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->nr_ips = 4;
	s->stack_bytes = 40;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->stack_bytes = 24;
	assert_int_equal(event__validate(s, size), -EINVAL);
	s->stack_bytes = 32;
	assert_int_equal(event__validate(s, size), GL_REC_STACK);

	/* header size against the sample size */
	assert_int_equal(event__validate(s, size - 1), -EINVAL);
	assert_int_equal(event__validate(s, size + 8), -EINVAL);
	s->hdr.size = size + 8;
	assert_int_equal(event__validate(s, size + 8), -EINVAL);
	s->hdr.size = size;

	/* shorter than its fixed part */
	s = make_stack(0, 0, 0);
	s->hdr.size = sizeof(*s) - 8;
	assert_int_equal(event__validate(s, sizeof(*s) - 8), -EINVAL);
	s->hdr.size = sizeof(struct gl_hdr);
	assert_int_equal(event__validate(s, sizeof(struct gl_hdr)), -EINVAL);

	/* counts so large that 32-bit arithmetic would wrap */
	s = make_stack(0, 0, 0);
	s->nr_py = 0xffff;
	s->nr_ips = 0xffff;
	s->stack_bytes = UINT32_MAX;
	assert_int_equal(event__validate(s, sizeof(*s)), -EINVAL);

	s = make_stack(1, 1, 8);
	s->api = GL_NR_APIS;
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);

	/* a stack sent by cache id carries Python frames and nothing native */
	s = make_stack(3, 0, 0);
	s->cache_id = 7;
	assert_int_equal(event__validate(s, s->hdr.size), GL_REC_STACK);
	s = make_stack(3, 0, 64);
	s->cache_id = 7;
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);
	s = make_stack(3, 2, 0);
	s->cache_id = 7;
	assert_int_equal(event__validate(s, s->hdr.size), -EINVAL);
}

static void test_stack_view(void **state)
{
	struct gl_stack *s = make_stack(2, 3, 16);
	const uint8_t *base = (const uint8_t *)buf;
	struct gl_py_frame *py = (struct gl_py_frame *)(base + sizeof(*s));
	uint64_t *ips = (uint64_t *)(base + sizeof(*s) + 2 * sizeof(*py));
	uint8_t *stack = (uint8_t *)(ips + 3);
	struct stack_view v;

	py[0].code = 0xc0de0;
	py[1].code = 0xc0de1;
	py[1].lasti = 17;
	ips[0] = 0x1000;
	ips[2] = 0x3000;
	memset(stack, 0xab, 16);
	assert_int_equal(event__validate(s, s->hdr.size), GL_REC_STACK);
	event__stack_view(buf, &v);
	assert_ptr_equal(v.rec, s);
	assert_ptr_equal(v.py, py);
	assert_ptr_equal(v.ips, ips);
	assert_ptr_equal(v.stack, stack);
	assert_int_equal(v.py[1].code, 0xc0de1);
	assert_int_equal(v.py[1].lasti, 17);
	assert_int_equal(v.ips[0], 0x1000);
	assert_int_equal(v.ips[2], 0x3000);
	assert_int_equal(v.stack[15], 0xab);
	/* the stack copy ends exactly at the record's end */
	assert_ptr_equal(v.stack + s->stack_bytes, base + s->hdr.size);
	assert_int_equal((uintptr_t)v.ips % 8, 0);

	/* no Python frames: ips right after the fixed part */
	s = make_stack(0, 1, 0);
	event__stack_view(buf, &v);
	assert_ptr_equal(v.ips, base + sizeof(*s));
	assert_ptr_equal(v.stack, base + sizeof(*s) + 8);
}

/* event__decode: one call validates and points at each kind's parts; a bad record is left alone */
static void test_decode(void **state)
{
	struct gl_stack *s = make_stack(1, 2, 8);
	struct event ev = { .type = -1 };
	struct gl_call *c;
	struct gl_proc *p;

	assert_int_equal(event__decode(s, s->hdr.size, &ev), GL_REC_STACK);
	assert_int_equal(ev.type, GL_REC_STACK);
	assert_ptr_equal(ev.hdr, &s->hdr);
	assert_ptr_equal(ev.stack.rec, s);
	assert_ptr_equal(ev.stack.ips, (const uint8_t *)buf + sizeof(*s) + sizeof(struct gl_py_frame));
	c = make_call();
	assert_int_equal(event__decode(c, sizeof(*c), &ev), GL_REC_CALL);
	assert_ptr_equal(ev.call, c);
	p = make_proc();
	assert_int_equal(event__decode(p, sizeof(*p), &ev), GL_REC_PROC);
	assert_ptr_equal(ev.proc, p);
	ev.type = -1;
	assert_int_equal(event__decode(p, sizeof(*p) - 8, &ev), -EINVAL);
	assert_int_equal(ev.type, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_call),
		cmocka_unit_test(test_proc),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_stack),
		cmocka_unit_test(test_stack_rejects),
		cmocka_unit_test(test_stack_view),
		cmocka_unit_test(test_decode),
	};

	return cmocka_run_group_tests_name("event", tests, NULL, NULL);
}
