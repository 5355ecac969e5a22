// SPDX-License-Identifier: BSD-2-Clause
/*
 * books_bench.c - how many ring-buffer records per second user space decodes
 * and aggregates on one core: synthetic records fed to books__apply_bytes().
 *
 *   books_bench [--pairs N] [--stacks S] [--frames F] [--window W] [--no-stacks]
 *
 * The stream is what a tight allocation loop produces: per pair a stack
 * record (F frame-pointer frames, one of S distinct stacks), the allocation's
 * call record and, W pairs later, the free's call record. The frames are real
 * addresses in this program and in libc, and the records carry this process's
 * PID, so frames resolve through /proc/self/maps as a tracer's would. Records
 * are built in chunks outside the timed part, which is CPU time (time spent
 * waiting for a CPU on a busy machine does not count). Prints one line to stdout:
 *   records=N seconds=S records_per_s=R ns_per_record=X stacks=S outstanding=W
 * Exit status 1 when the books do not end as the stream says (W outstanding).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "books/books.h"
#include "books/procs.h"
#include "stacks/python/python.h"
#include "stacks/stacks.h"
#include "stacks/native/unwind.h"
#include "util/parse.h"

#define CHUNK_PAIRS 4096
#define SIZE (2ULL << 20)
#define BASE_ADDR 0x7e0000000000ULL

struct opts {
	uint64_t pairs;
	uint32_t stacks, frames, window;
	bool no_stacks;
};

struct stream {
	const struct opts *o;
	uint64_t start_time, ts, seq, next_pair;
	uint32_t pid, tid;
	uint64_t code[4]; /* addresses of code mapped from files: this program, libc */
	unsigned char *buf;
	size_t len, cap;
};

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *put(struct stream *st, size_t size)
{
	void *p = st->buf + st->len;

	st->len += size;
	memset(p, 0, size);
	return p;
}

static void fill_hdr(struct stream *st, struct gl_hdr *h, uint32_t type, uint32_t size)
{
	*h = (struct gl_hdr){ .type = type, .size = size, .pid = st->pid, .tid = st->tid,
			      .start_time = st->start_time, .ts = ++st->ts };
}

/* Frame j of stack s: distinct stacks differ in their outer frames. */
static uint64_t frame_ip(const struct stream *st, uint32_t s, uint32_t j)
{
	if (j == 0)
		return st->code[0];
	return st->code[j % 4] + 16 * ((s + j) % st->o->stacks) + j;
}

static void put_stack(struct stream *st, uint64_t pair)
{
	uint32_t nr = st->o->frames, s = pair % st->o->stacks;
	size_t size = sizeof(struct gl_stack) + nr * 8;
	struct gl_stack *r = put(st, size);
	uint64_t *ips = (uint64_t *)(r + 1);

	fill_hdr(st, &r->hdr, GL_REC_STACK, size);
	r->seq = st->seq;
	r->api = GL_API_cuMemAlloc_v2;
	r->nr_ips = nr;
	for (uint32_t j = 0; j < nr; j++)
		ips[j] = frame_ip(st, s, j);
	r->ip = ips[0];
	r->ret_addr = nr > 1 ? ips[1] : 0;
}

static void put_call(struct stream *st, uint16_t api, uint8_t op, uint64_t key)
{
	struct gl_call *c = put(st, sizeof(*c));

	fill_hdr(st, &c->hdr, GL_REC_CALL, sizeof(*c));
	c->seq = st->seq;
	c->key = key;
	c->bytes = SIZE;
	c->api = api;
	c->op = op;
	c->cls = GL_CLASS_DEVICE;
	c->kind = GL_KIND_DPTR;
	c->dev = 0;
}

/* The next chunk of the stream; returns the number of records in it. */
static uint64_t build_chunk(struct stream *st)
{
	uint64_t n = 0;

	st->len = 0;
	for (int i = 0; i < CHUNK_PAIRS && st->next_pair < st->o->pairs; i++, st->next_pair++) {
		uint64_t p = st->next_pair;

		st->seq++;
		if (!st->o->no_stacks) {
			put_stack(st, p);
			n++;
		}
		put_call(st, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, BASE_ADDR + p * SIZE);
		n++;
		if (p >= st->o->window) {
			st->seq++;
			put_call(st, GL_API_cuMemFree_v2, GL_OP_FREE,
				 BASE_ADDR + (p - st->o->window) * SIZE);
			n++;
		}
	}
	return n;
}

/* Applies every record of the chunk; returns the seconds it took. */
static double apply_chunk(struct books *b, const struct stream *st)
{
	const unsigned char *p = st->buf, *end = st->buf + st->len;
	double t0 = cpu_s();

	while (p < end) {
		const struct gl_hdr *h = (const struct gl_hdr *)p;

		books__apply_bytes(b, p, h->size);
		p += h->size;
	}
	return cpu_s() - t0;
}

static int parse(struct opts *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int err = 0;

		if (!strcmp(a, "--no-stacks")) {
			o->no_stacks = true;
			continue;
		}
		if (!v)
			return -EINVAL;
		i++;
		if (!strcmp(a, "--pairs"))
			err = parse_u64(v, 1, 1ULL << 32, &o->pairs);
		else if (!strcmp(a, "--stacks"))
			err = parse_u32(v, 1, 1 << 20, &o->stacks);
		else if (!strcmp(a, "--frames"))
			err = parse_u32(v, 2, GL_MAX_FP_FRAMES, &o->frames);
		else if (!strcmp(a, "--window"))
			err = parse_u32(v, 0, 1 << 24, &o->window);
		else
			err = -EINVAL;
		if (err)
			return err;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .pairs = 1000000, .stacks = 64, .frames = 24, .window = 1024 };
	struct stream st = { .o = &o, .start_time = 12345, .ts = 1 };
	struct books_opts bo = { .series_width_ns = 1000000000ULL };
	struct modules *mods = modules__new();
	struct stacks *stacks = stacks__new();
	struct unwinder *u = mods ? unwinder__new(mods, GL_STACK_FP) : NULL;
	struct python *py = mods ? python__new(mods) : NULL;
	struct books *b = NULL;
	uint64_t records = 0, n;
	double seconds = 0;
	struct proc *proc;
	int status = 1;

	if (parse(&o, argc, argv)) {
		fputs("usage: books_bench [--pairs N] [--stacks S] [--frames F] [--window W] "
		      "[--no-stacks]\n", stderr);
		return 2;
	}
	st.pid = st.tid = getpid();
	st.code[0] = (uint64_t)(uintptr_t)&main;
	st.code[1] = (uint64_t)(uintptr_t)&build_chunk;
	st.code[2] = (uint64_t)(uintptr_t)&memset;
	st.code[3] = (uint64_t)(uintptr_t)&clock_gettime;
	st.cap = CHUNK_PAIRS * (sizeof(struct gl_stack) + GL_MAX_FP_FRAMES * 8 +
				2 * sizeof(struct gl_call));
	st.buf = malloc(st.cap);
	b = u && stacks && py ? books__new(mods, stacks, u, py, &bo) : NULL;
	if (!st.buf || !b) {
		fprintf(stderr, "books_bench: out of memory\n");
		goto cleanup;
	}
	while ((n = build_chunk(&st))) {
		records += n;
		seconds += apply_chunk(b, &st);
	}
	proc = procs__at(books__procs(b), 0);
	printf("records=%llu seconds=%.6f records_per_s=%.0f ns_per_record=%.1f stacks=%u "
	       "outstanding=%llu\n", (unsigned long long)records, seconds, records / seconds,
	       seconds * 1e9 / records, stacks__count(stacks),
	       proc ? (unsigned long long)proc__totals(proc)->nallocs[GL_CLASS_DEVICE] : 0ULL);
	if (!proc || proc__totals(proc)->nallocs[GL_CLASS_DEVICE] != (o.pairs < o.window ? o.pairs : o.window))
		fprintf(stderr, "books_bench: the books do not hold the stream's %u allocations\n",
			o.window);
	else
		status = 0;
cleanup:
	books__free(b);
	python__free(py);
	unwinder__free(u);
	stacks__free(stacks);
	modules__free(mods);
	free(st.buf);
	return status;
}
