// SPDX-License-Identifier: BSD-2-Clause
/*
 * pickle.c - pickle protocol 2, written as Python's pickle module documents
 * its opcodes (Lib/pickletools.py): no memo, a MARK before each dict's or
 * list's items and one SETITEMS or APPENDS after them.
 */
#include <errno.h>
#include <string.h>
#include "pickle.h"

enum {
	OP_PROTO = 0x80,
	OP_STOP = '.',
	OP_MARK = '(',
	OP_EMPTY_DICT = '}',
	OP_SETITEMS = 'u',
	OP_EMPTY_LIST = ']',
	OP_APPENDS = 'e',
	OP_BININT1 = 'K',
	OP_BININT2 = 'M',
	OP_BININT = 'J',
	OP_LONG1 = 0x8a,
	OP_BINUNICODE = 'X',
	OP_BINFLOAT = 'G',
	OP_NONE = 'N',
	OP_NEWTRUE = 0x88,
	OP_NEWFALSE = 0x89,
	OP_TUPLE2 = 0x86,
	OP_LONG_BINPUT = 'r',
	OP_LONG_BINGET = 'j',
};

static void put(struct pickle *p, const void *b, size_t n)
{
	if (n && fwrite(b, 1, n, p->f) != n)
		p->failed = true;
}

static void op(struct pickle *p, int code)
{
	unsigned char c = code;

	put(p, &c, 1);
}

/* n bytes of v, least significant first */
static void le(struct pickle *p, uint64_t v, int n)
{
	unsigned char b[8];

	for (int i = 0; i < n; i++)
		b[i] = v >> (8 * i);
	put(p, b, n);
}

void pickle__start(struct pickle *p, FILE *f)
{
	*p = (struct pickle){ .f = f };
	op(p, OP_PROTO);
	op(p, 2);
}

int pickle__finish(struct pickle *p)
{
	op(p, OP_STOP);
	if (fflush(p->f))
		p->failed = true;
	if (p->depth)
		return -EINVAL;
	return p->failed ? -EIO : 0;
}

void pickle__dict(struct pickle *p)
{
	op(p, OP_EMPTY_DICT);
	op(p, OP_MARK);
	p->depth++;
}

void pickle__end_dict(struct pickle *p)
{
	op(p, OP_SETITEMS);
	p->depth--;
}

void pickle__list(struct pickle *p)
{
	op(p, OP_EMPTY_LIST);
	op(p, OP_MARK);
	p->depth++;
}

void pickle__end_list(struct pickle *p)
{
	op(p, OP_APPENDS);
	p->depth--;
}

void pickle__str(struct pickle *p, const char *s)
{
	size_t n;

	if (!s) {
		pickle__none(p);
		return;
	}
	n = strlen(s);
	op(p, OP_BINUNICODE);
	le(p, n, 4);
	put(p, s, n);
}

/* LONG1: the fewest bytes of two's complement that keep the sign */
static void long1(struct pickle *p, int64_t v, bool is_unsigned)
{
	unsigned char b[9];
	uint64_t u = (uint64_t)v;
	int n = 0;

	for (int i = 0; i < 8; i++)
		b[i] = u >> (8 * i);
	b[8] = 0; /* an unsigned value with its top bit set needs a ninth, zero byte */
	n = is_unsigned && (u >> 63) ? 9 : 8;
	while (n > 1) {
		unsigned char top = b[n - 1], next = b[n - 2];

		if (!(top == 0x00 && !(next & 0x80)) && !(top == 0xff && (next & 0x80)))
			break;
		n--;
	}
	op(p, OP_LONG1);
	op(p, n);
	put(p, b, n);
}

void pickle__int(struct pickle *p, int64_t v)
{
	if (v >= 0 && v < 0x100) {
		op(p, OP_BININT1);
		le(p, v, 1);
	} else if (v >= 0 && v < 0x10000) {
		op(p, OP_BININT2);
		le(p, v, 2);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		op(p, OP_BININT);
		le(p, (uint32_t)v, 4);
	} else {
		long1(p, v, false);
	}
}

void pickle__uint(struct pickle *p, uint64_t v)
{
	if (v <= INT64_MAX)
		pickle__int(p, (int64_t)v);
	else
		long1(p, (int64_t)v, true);
}

void pickle__float(struct pickle *p, double v)
{
	unsigned char b[8];
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	for (int i = 0; i < 8; i++)
		b[i] = u >> (8 * (7 - i)); /* big-endian */
	op(p, OP_BINFLOAT);
	put(p, b, 8);
}

void pickle__bool(struct pickle *p, bool v)
{
	op(p, v ? OP_NEWTRUE : OP_NEWFALSE);
}

void pickle__none(struct pickle *p)
{
	op(p, OP_NONE);
}

void pickle__pair(struct pickle *p, int64_t a, int64_t b)
{
	pickle__int(p, a);
	pickle__int(p, b);
	op(p, OP_TUPLE2);
}

uint32_t pickle__keep(struct pickle *p)
{
	op(p, OP_LONG_BINPUT);
	le(p, p->memo, 4);
	return p->memo++;
}

void pickle__get(struct pickle *p, uint32_t index)
{
	op(p, OP_LONG_BINGET);
	le(p, index, 4);
}
