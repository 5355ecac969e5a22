/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census_heap.h - one synthetic CPython 3.11 heap for the census: an
 * interpreter whose collector lists hold a module __main__, its dict, a list
 * h and two tensors that are views of one storage (64 bytes at BASE + DATA,
 * on the CPU), with TensorImpls and a StorageImpl laid out as PyTorch's. The
 * fuzzer patches it; the unit tests walk it as it is.
 */
#ifndef GL_TEST_CENSUS_HEAP_H
#define GL_TEST_CENSUS_HEAP_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include "census/census.h"

#define BASE 0x100000ULL
#define HEAP 0x8000

static uint8_t heap[HEAP];

/* Offsets in the heap */
enum {
	INTERP = 0, GC = 0x100, GEN0 = GC + 24, GEN0_PTR = GC + 96, PERM = GC + 104,
	T_MODULE = 0x1000, T_DICT = 0x1200, T_LIST = 0x1400, T_TENSOR = 0x1600, T_STR = 0x1800,
	NAMES = 0x1a00,
	N_MOD = 0x3000, N_DICT = 0x3100, KEYS = 0x3200, S_NAME = 0x3300, S_MAIN = 0x3380,
	S_H = 0x3400, N_LIST = 0x3480, ITEMS = 0x3500, N_T1 = 0x3600, N_T2 = 0x3680,
	IMPL1 = 0x4000, IMPL2 = 0x4400, STORAGE = 0x4800, DATA = 0x5000,
};

static void put64(size_t off, uint64_t v)
{
	memcpy(heap + off, &v, sizeof(v));
}

static void put_type(size_t off, size_t name_off, const char *name)
{
	memcpy(heap + NAMES + name_off, name, strlen(name) + 1);
	put64(off + 24, BASE + NAMES + name_off); /* tp_name; flags 0: a static type */
}

static void put_str(size_t off, const char *s)
{
	put64(off + 8, BASE + T_STR);
	put64(off + 16, strlen(s));
	put64(off + 32, (1u << 5) | (1u << 6)); /* compact, ascii */
	memcpy(heap + off + 48, s, strlen(s));
}

/* A GC-tracked object: its PyGC_Head at node, the object 16 bytes after. */
static void put_gc(size_t node, size_t next, size_t prev, size_t type)
{
	put64(node, BASE + next);
	put64(node + 8, BASE + prev);
	put64(node + 24, BASE + type);
}

static void put_impl(size_t impl, size_t obj, int ndim, const int64_t *sizes,
		     const int64_t *strides, int64_t offset, int64_t numel)
{
	put64(impl, BASE + 0x7000); /* a vtable */
	put64(impl + 8, 1);
	put64(impl + 24, BASE + STORAGE);
	put64(impl + 64, BASE + obj); /* pyobj_ */
	put64(impl + 72, ndim);
	for (int k = 0; k < ndim; k++) {
		put64(impl + 80 + 8 * k, sizes[k]);
		put64(impl + 120 + 8 * k, strides[k]);
	}
	put64(impl + 160, offset);
	put64(impl + 168, numel);
	put64(impl + 176, 6); /* float32 */
}

static void census_heap_build(void)
{
	const int64_t s1[] = { 16 }, st1[] = { 1 }, s2[] = { 2, 4 }, st2[] = { 4, 1 };

	memset(heap, 0, sizeof(heap));
	/* generation 0: module, dict, list, tensor, tensor; the others and permanent empty */
	put64(GEN0, BASE + N_MOD);
	put64(GEN0 + 8, BASE + N_T2);
	for (size_t g = GEN0 + 24; g <= GEN0 + 48; g += 24) {
		put64(g, BASE + g);
		put64(g + 8, BASE + g);
	}
	put64(GEN0_PTR, BASE + GEN0);
	put64(PERM, BASE + PERM);
	put64(PERM + 8, BASE + PERM);
	put_type(T_MODULE, 0, "module");
	put_type(T_DICT, 16, "dict");
	put_type(T_LIST, 32, "list");
	put_type(T_TENSOR, 48, "torch._C._TensorBase");
	put_type(T_STR, 80, "str");
	put_gc(N_MOD, N_DICT, GEN0, T_MODULE);
	put64(N_MOD + 32, BASE + N_DICT + 16); /* md_dict */
	put_gc(N_DICT, N_LIST, N_MOD, T_DICT);
	put64(N_DICT + 32, 2);			/* ma_used */
	put64(N_DICT + 48, BASE + KEYS);	/* ma_keys */
	heap[KEYS + 8] = 3;			/* log2 size */
	heap[KEYS + 9] = 3;			/* log2 index bytes */
	heap[KEYS + 10] = 1;			/* unicode keys */
	put64(KEYS + 24, 2);			/* nentries */
	put64(KEYS + 40, BASE + S_NAME);
	put64(KEYS + 48, BASE + S_MAIN);
	put64(KEYS + 56, BASE + S_H);
	put64(KEYS + 64, BASE + N_LIST + 16);
	put_str(S_NAME, "__name__");
	put_str(S_MAIN, "__main__");
	put_str(S_H, "h");
	put_gc(N_LIST, N_T1, N_DICT, T_LIST);
	put64(N_LIST + 32, 2);
	put64(N_LIST + 40, BASE + ITEMS);
	put64(ITEMS, BASE + N_T1 + 16);
	put64(ITEMS + 8, BASE + N_T2 + 16);
	put_gc(N_T1, N_T2, N_LIST, T_TENSOR);
	put64(N_T1 + 40, BASE + IMPL1);
	put_gc(N_T2, GEN0, N_T1, T_TENSOR);
	put64(N_T2 + 40, BASE + IMPL2);
	put_impl(IMPL1, N_T1 + 16, 1, s1, st1, 0, 16);
	put_impl(IMPL2, N_T2 + 16, 2, s2, st2, 4, 8);
	put64(STORAGE + 8, 1);
	put64(STORAGE + 24, BASE + DATA);
	heap[STORAGE + 49] = 0xff; /* CPU, index -1 */
	put64(STORAGE + 56, 64);
}

static ssize_t census_heap_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	uint64_t off = addr - BASE;

	if (addr < BASE || off >= HEAP)
		return -EFAULT;
	if (len > HEAP - off)
		len = HEAP - off;
	memcpy(buf, heap + off, len);
	return len;
}

/* What the walk is told of the heap's interpreter. */
static const struct census_py census_heap_py = {
	.minor = 11, .interp = BASE + INTERP, .is_threads_head = 16, .ts_next = 8,
	.ts_frame = 56, .ts_native_tid = 160, .cframe = true, .cf_frame = 8, .fr_previous = 48,
	.fr_code = 32, .co_name = 120, .str_ascii_data = 48,
};

#endif /* GL_TEST_CENSUS_HEAP_H */
