// SPDX-License-Identifier: BSD-2-Clause
/*
 * pycode.c - code, str and bytes objects read from a target's memory. The
 * target may be racing or hostile: lengths are capped, types are checked
 * against the interpreter's type objects, and nothing read is trusted as a
 * size without a bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pycode.h"

#define STR_KIND(state) (((state) >> 2) & 7)
#define STR_COMPACT(state) (((state) >> 5) & 1)
#define STR_ASCII(state) (((state) >> 6) & 1)

static uint64_t get_u64(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Reads exactly len bytes or fails with -EFAULT. */
static int read_exact(int pid, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pyproc__read(pid, addr, buf, len);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EFAULT;
}

static size_t put_utf8(char *out, uint32_t c)
{
	if (c < 0x80) {
		out[0] = c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = 0xc0 | (c >> 6);
		out[1] = 0x80 | (c & 0x3f);
		return 2;
	}
	if (c < 0x10000) {
		out[0] = 0xe0 | (c >> 12);
		out[1] = 0x80 | ((c >> 6) & 0x3f);
		out[2] = 0x80 | (c & 0x3f);
		return 3;
	}
	if (c > 0x10ffff)
		c = 0xfffd;
	out[0] = 0xf0 | (c >> 18);
	out[1] = 0x80 | ((c >> 12) & 0x3f);
	out[2] = 0x80 | ((c >> 6) & 0x3f);
	out[3] = 0x80 | (c & 0x3f);
	return 4;
}

/* n characters of kind (1, 2 or 4 bytes each) as UTF-8; NUL-terminated, malloc'd. */
static char *to_utf8(const uint8_t *chars, size_t n, unsigned int kind)
{
	char *out = malloc(n * 4 + 1), *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint32_t c;

		if (kind == 1) {
			c = chars[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, chars + 2 * i, 2);
			c = u;
		} else {
			memcpy(&c, chars + 4 * i, 4);
		}
		p += put_utf8(p, c ? c : 0xfffd);
	}
	*p = '\0';
	return out;
}

char *pycode__read_str(int pid, const struct py_layout *l, const struct py_target *t, uint64_t addr)
{
	uint8_t hdr[128];
	uint8_t *chars = NULL;
	uint64_t len, data;
	uint32_t state;
	unsigned int kind;
	char *out = NULL;
	int err;

	/* every header field read must lie in the l->str_ascii_data bytes read */
	if (l->str_compact_data > sizeof(hdr) || l->str_ascii_data > l->str_compact_data ||
	    l->str_state + 4u > l->str_ascii_data || l->str_length + 8u > l->str_ascii_data ||
	    l->ob_type + 8u > l->str_ascii_data) {
		errno = EINVAL;
		return NULL;
	}
	err = read_exact(pid, addr, hdr, l->str_ascii_data);
	if (err)
		goto cleanup;
	err = -EINVAL;
	if (t->str_type && get_u64(hdr, l->ob_type) != t->str_type)
		goto cleanup;
	state = get_u32(hdr, l->str_state);
	len = get_u64(hdr, l->str_length);
	kind = STR_KIND(state);
	if (!STR_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) || len > (1ULL << 31))
		goto cleanup;
	if (STR_ASCII(state) && kind != 1)
		goto cleanup;
	if (len > PY_MAX_STR)
		len = PY_MAX_STR;
	data = addr + (STR_ASCII(state) ? l->str_ascii_data : l->str_compact_data);
	chars = malloc(len * kind + 1);
	err = -ENOMEM;
	if (!chars)
		goto cleanup;
	err = read_exact(pid, data, chars, len * kind);
	if (err)
		goto cleanup;
	out = to_utf8(chars, len, kind);
	err = out ? 0 : -ENOMEM;
cleanup:
	free(chars);
	if (err)
		errno = -err;
	return out;
}

/* A bytes object's contents (at most max bytes); malloc'd in *out. Returns 0 or -errno. */
static int read_bytes(int pid, const struct py_layout *l, const struct py_target *t, uint64_t addr,
		      size_t max, uint8_t **out, size_t *outlen)
{
	uint8_t hdr[64];
	uint64_t len;
	uint8_t *buf;
	int err;

	if (l->bytes_data > sizeof(hdr) || l->bytes_size + 8u > l->bytes_data ||
	    l->ob_type + 8u > l->bytes_data)
		return -EINVAL;
	err = read_exact(pid, addr, hdr, l->bytes_data);
	if (err)
		return err;
	if (t->bytes_type && get_u64(hdr, l->ob_type) != t->bytes_type)
		return -EINVAL;
	len = get_u64(hdr, l->bytes_size);
	if (len > (1ULL << 40))
		return -EINVAL;
	if (len > max)
		len = max;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	err = read_exact(pid, addr + l->bytes_data, buf, len);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

void pycode__clear(struct py_code *c)
{
	free(c->function);
	free(c->file);
	free(c->table);
	memset(c, 0, sizeof(*c));
}

int pycode__read(int pid, const struct py_layout *l, const struct py_target *t, uint64_t addr,
		 struct py_code *c)
{
	uint8_t obj[512];
	int err;

	memset(c, 0, sizeof(*c));
	if (l->co_size > sizeof(obj) || !addr || l->ob_type + 8u > l->co_size ||
	    l->co_firstlineno + 4u > l->co_size || l->co_qualname + 8u > l->co_size ||
	    l->co_filename + 8u > l->co_size || l->co_linetable + 8u > l->co_size)
		return -EINVAL;
	err = read_exact(pid, addr, obj, l->co_size);
	if (err)
		return err;
	if (t->code_type && get_u64(obj, l->ob_type) != t->code_type)
		return -EINVAL;
	c->firstlineno = (int32_t)get_u32(obj, l->co_firstlineno);
	c->function = pycode__read_str(pid, l, t, get_u64(obj, l->co_qualname));
	c->file = pycode__read_str(pid, l, t, get_u64(obj, l->co_filename));
	if (!c->function || !c->file) {
		pycode__clear(c);
		return -EINVAL;
	}
	if (read_bytes(pid, l, t, get_u64(obj, l->co_linetable), PY_MAX_LINETABLE, &c->table,
		       &c->len)) {
		c->table = NULL;
		c->len = 0;
	}
	return 0;
}
