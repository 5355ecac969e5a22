// SPDX-License-Identifier: BSD-2-Clause
/*
 * make_books_seeds.c - writes the books fuzz target's seed corpus
 * (fuzz_books.c) into a directory: ring-buffer records as BPF fills them
 * (stack records with frame-pointer ips, Python frames or a stack copy;
 * allocations, frees, failures, context teardown; fork, exec and exit),
 * each behind its 16-bit length, and broken variants. Run by
 * `make fuzz-corpus`; the output is kept in the repository.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "trace/probes.h"

#define PID 4242
#define START 777000000ULL

struct seed {
	uint8_t buf[65536];
	size_t len;
	uint64_t ts;
};

static void put(struct seed *s, const void *rec, size_t len, size_t said)
{
	s->buf[s->len] = said & 0xff;
	s->buf[s->len + 1] = said >> 8;
	memcpy(s->buf + s->len + 2, rec, len);
	s->len += 2 + len;
}

static void hdr(struct seed *s, struct gl_hdr *h, uint32_t type, uint32_t size, uint32_t pid)
{
	h->type = type;
	h->size = size;
	h->pid = h->tid = pid;
	h->start_time = START + pid;
	h->ts = s->ts += 1000000;
}

static void call(struct seed *s, uint16_t api, uint8_t op, uint64_t key, uint64_t bytes,
		 uint64_t seq)
{
	const struct gl_api_desc *d = probe__desc(api);
	struct gl_call c = { .api = api, .op = op, .kind = d->kind, .cls = d->cls, .key = key,
			     .bytes = bytes, .ctx = 0x5000, .dev = 0, .seq = seq };

	hdr(s, &c.hdr, GL_REC_CALL, sizeof(c), PID);
	put(s, &c, sizeof(c), sizeof(c));
}

/* A stack record with n ips, py Python frames and copy bytes of stack. */
static void stack(struct seed *s, uint64_t seq, int n, int py, uint32_t copy)
{
	size_t size = sizeof(struct gl_stack) + py * sizeof(struct gl_py_frame) + n * 8 + copy;
	uint8_t *rec = calloc(1, size);
	struct gl_stack *st = (struct gl_stack *)rec;
	struct gl_py_frame *pf = (struct gl_py_frame *)(st + 1);
	uint64_t *ips = (uint64_t *)(pf + py);

	hdr(s, &st->hdr, GL_REC_STACK, size, PID);
	st->seq = seq;
	st->api = GL_API_cuMemAlloc_v2;
	st->nr_ips = n;
	st->nr_py = py;
	st->stack_bytes = copy;
	st->ip = 0x401000;
	st->sp = 0x7ffc0000;
	st->bp = 0x7ffc0040;
	for (int i = 0; i < py; i++)
		pf[i] = (struct gl_py_frame){ .code = 0x7f0000100000ULL + i * 0x100, .lasti = i };
	for (int i = 0; i < n; i++)
		ips[i] = 0x401000 + 0x10 * i;
	put(s, rec, size, size);
	free(rec);
}

static void proc(struct seed *s, uint32_t event, uint32_t pid)
{
	struct gl_proc p = { .event = event, .ppid = PID, .comm = "train" };

	hdr(s, &p.hdr, GL_REC_PROC, sizeof(p), pid);
	p.stats.start_time = START + pid;
	put(s, &p, sizeof(p), sizeof(p));
}

static void save(const char *dir, const char *name, uint8_t mode, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(&mode, 1, 1, f) != 1 || fwrite(s->buf, 1, s->len, f) != s->len ||
	    fclose(f)) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	static struct seed s;
	struct gl_call c = { 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: make_books_seeds DIR\n");
		return 2;
	}
	/* a process allocating with stacks, freeing, failing, forking and exiting */
	stack(&s, 1, 4, 0, 0);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, 0x7000000, 1 << 20, 1);
	stack(&s, 2, 2, 0, 0);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, 0x7100000, 4096, 2);
	call(&s, GL_API_cuMemFree_v2, GL_OP_FREE, 0x7000000, 1 << 20, 3);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_FAIL, 0, 1ULL << 40, 4);
	call(&s, GL_API_cuMemHostAlloc, GL_OP_ALLOC, 0x9000000, 8192, 5);
	proc(&s, GL_PROC_FORK, PID + 1);
	proc(&s, GL_PROC_LIBLOAD, PID);
	call(&s, GL_API_cuCtxDestroy_v2, GL_OP_CTX_DROP, 0x5000, 0, 6);
	proc(&s, GL_PROC_EXEC, PID);
	proc(&s, GL_PROC_EXIT, PID);
	save(argv[1], "fp-process", 0, &s);
	save(argv[1], "fp-process-snapshot", 2, &s);
	/* DWARF stacks: a stack copy, with Python frames */
	memset(&s, 0, sizeof(s));
	stack(&s, 1, 0, 0, 256);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, 0x7000000, 1 << 20, 1);
	stack(&s, 2, 3, 2, 64);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, 0x7100000, 4096, 2);
	proc(&s, GL_PROC_EXIT, PID);
	save(argv[1], "dwarf-stack-copy", 3, &s);
	/* broken: a length that disagrees with the header, an unknown type and API */
	memset(&s, 0, sizeof(s));
	hdr(&s, &c.hdr, GL_REC_CALL, sizeof(c), PID);
	put(&s, &c, sizeof(c), sizeof(c) - 8);
	c.hdr.type = 9;
	put(&s, &c, sizeof(c), sizeof(c));
	c.hdr.type = GL_REC_CALL;
	c.api = GL_NR_APIS;
	put(&s, &c, sizeof(c), sizeof(c));
	save(argv[1], "malformed", 0, &s);
	memset(&s, 0, sizeof(s));
	stack(&s, 1, GL_MAX_FP_FRAMES, GL_MAX_PY_FRAMES, 0);
	call(&s, GL_API_cuMemAlloc_v2, GL_OP_ALLOC, 0x7000000, 1 << 20, 1);
	save(argv[1], "deepest-stack", 2, &s);
	return 0;
}
