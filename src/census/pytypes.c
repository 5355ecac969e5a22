// SPDX-License-Identifier: BSD-2-Clause
/*
 * pytypes.c - what the census reads of CPython's objects: a type (its name,
 * flags, the kind of container it is, whether its MRO holds PyTorch's tensor
 * base), read once and cached, and the strs and small ints that name keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "census_int.h"

#define MAX_MRO 64

/* A C string of the target, at most len - 1 characters, printable ASCII only. */
int census__read_cstr(struct census_walk *w, uint64_t addr, char *buf, size_t len)
{
	size_t i;

	memset(buf, 0, len);
	for (size_t off = 0; off < len - 1; off += 16) {
		size_t n = len - 1 - off < 16 ? len - 1 - off : 16;

		if (census__rd(w, addr + off, buf + off, n))
			return off ? 0 : -EFAULT;
		if (memchr(buf + off, 0, n))
			break;
	}
	for (i = 0; buf[i]; i++)
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			buf[i] = '?';
	return 0;
}

static bool is_tensor_base(const char *name)
{
	/* THPVariableType: torch._C._TensorBase (1.x), torch._C.TensorBase (2.x) */
	return !strcmp(name, "torch._C._TensorBase") || !strcmp(name, "torch._C.TensorBase");
}

static uint8_t builtin_kind(const char *name)
{
	static const struct {
		const char *name;
		uint8_t kind;
	} names[] = {
		{ "dict", K_DICT },	{ "list", K_LIST }, { "tuple", K_TUPLE },
		{ "module", K_MODULE }, { "cell", K_CELL }, { "function", K_FUNC },
		{ "type", K_TYPE },	{ "str", K_STR },   { "int", K_INT },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i].name))
			return names[i].kind;
	return K_OTHER;
}

/* The kind of a subclass of list, tuple, dict or type, by its type's flags; else K_OTHER. */
static uint8_t subclass_kind(uint64_t flags)
{
	if (flags & TPF_LIST_SUBCLASS)
		return K_LIST;
	if (flags & TPF_TUPLE_SUBCLASS)
		return K_TUPLE;
	if (flags & TPF_DICT_SUBCLASS)
		return K_DICT;
	return flags & TPF_TYPE_SUBCLASS ? K_TYPE : K_OTHER;
}

static bool mro_has_tensor(struct census_walk *w, uint64_t mro)
{
	uint8_t hdr[24];
	uint64_t n, item, name;
	char buf[48];

	if (!mro || census__rd(w, mro, hdr, sizeof(hdr)))
		return false;
	n = w64(hdr, 16);
	for (uint64_t i = 0; i < n && i < MAX_MRO; i++) {
		if (census__rd64(w, mro + 24 + 8 * i, &item) ||
		    census__rd64(w, item + TP_NAME, &name) ||
		    census__read_cstr(w, name, buf, sizeof(buf)))
			return false;
		if (is_tensor_base(buf))
			return true;
	}
	return false;
}

/* The type at addr, read once and cached; NULL if it cannot be read. */
const struct census_type *census__type_of(struct census_walk *w, uint64_t addr)
{
	struct census_type *t = htab__lookup(w->types, &addr), nt;
	uint8_t b[TP_READ];
	bool created;
	uint64_t ck_off = w->py->minor == 11 ? 872 : 880;

	if (t)
		return t;
	memset(&nt, 0, sizeof(nt));
	if (census__rd(w, addr, b, sizeof(b)) ||
	    census__read_cstr(w, w64(b, TP_NAME), nt.name, sizeof(nt.name)))
		return NULL;
	nt.flags = w64(b, TP_FLAGS);
	nt.basicsize = (int64_t)w64(b, TP_BASICSIZE);
	nt.dictoffset = (int64_t)w64(b, TP_DICTOFFSET);
	if (!(nt.flags & TPF_HEAPTYPE))
		nt.kind = builtin_kind(nt.name);
	/* subclasses, heap types or C ones (collections.OrderedDict, defaultdict), keep
	 * their base's layout first */
	if (nt.kind == K_OTHER)
		nt.kind = subclass_kind(nt.flags);
	if (is_tensor_base(nt.name) || mro_has_tensor(w, w64(b, TP_MRO)))
		nt.kind = K_TENSOR;
	if (nt.flags & TPF_HEAPTYPE) {
		nt.inst_dict = (nt.flags & TPF_MANAGED_DICT) || nt.dictoffset > 0;
		if (nt.flags & TPF_MANAGED_DICT)
			census__rd64(w, addr + ck_off, &nt.cached_keys);
	}
	t = htab__upsert(w->types, &addr, &created);
	if (!t)
		return NULL;
	*t = nt;
	return t;
}

const struct census_type *census__obj_type(struct census_walk *w, uint64_t obj)
{
	uint64_t type;

	if (!obj || (obj & 7) || census__rd64(w, obj + 8, &type) || !type || (type & 7))
		return NULL;
	return census__type_of(w, type);
}

/* A str as a label: compact ASCII only (what names and most keys are). */
int census__read_str(struct census_walk *w, uint64_t obj, char *buf, size_t len)
{
	uint8_t hdr[40];
	uint64_t n;
	uint32_t state;

	if (census__rd(w, obj, hdr, sizeof(hdr)))
		return -EFAULT;
	n = w64(hdr, 16);
	memcpy(&state, hdr + 32, sizeof(state));
	/* compact (bit 5) and ascii (bit 6) */
	if (!(state & (1u << 5)) || !(state & (1u << 6)) || n >= len)
		return -ENOTSUP;
	if (census__rd(w, obj + w->py->str_ascii_data, buf, n))
		return -EFAULT;
	buf[n] = '\0';
	for (uint64_t i = 0; i < n; i++)
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			return -ENOTSUP;
	return 0;
}

/* A small int (one 30-bit digit) as a label. */
int census__read_int(struct census_walk *w, uint64_t obj, long long *v)
{
	uint8_t b[28];
	int64_t size;
	uint32_t digit;

	if (census__rd(w, obj, b, sizeof(b)))
		return -EFAULT;
	size = (int64_t)w64(b, 16);
	memcpy(&digit, b + 24, sizeof(digit));
	if (w->py->minor >= 12) {
		/* lv_tag: digits << 3 | sign (0 positive, 1 zero, 2 negative) */
		uint64_t tag = (uint64_t)size;

		if ((tag & 3) == 1) {
			*v = 0;
			return 0;
		}
		if ((tag >> 3) != 1)
			return -ENOTSUP;
		*v = (tag & 3) == 2 ? -(long long)digit : digit;
		return 0;
	}
	if (size == 0) {
		*v = 0;
		return 0;
	}
	if (size != 1 && size != -1)
		return -ENOTSUP;
	*v = size < 0 ? -(long long)digit : digit;
	return 0;
}
