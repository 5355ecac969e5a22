// SPDX-License-Identifier: BSD-2-Clause
/*
 * parse.c - strict number parsing: no sign, no trailing garbage, range-checked.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "parse.h"

/* Digits then an optional suffix; the suffix is returned through *suffix. */
static int parse_digits(const char *s, uint64_t *out, const char **suffix)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s)
		return -EINVAL;
	*out = v;
	*suffix = end;
	return 0;
}

static int check_range(uint64_t v, uint64_t min, uint64_t max, uint64_t *out)
{
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *suffix;
	uint64_t v;
	int err = parse_digits(s, &v, &suffix);

	if (err)
		return err;
	if (*suffix)
		return -EINVAL;
	return check_range(v, min, max, out);
}

int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int err = parse_u64(s, min, max, &v);

	if (!err)
		*out = (uint32_t)v;
	return err;
}

/* Multiply with overflow detection, then range-check. */
static int scaled(uint64_t v, uint64_t unit, uint64_t min, uint64_t max, uint64_t *out)
{
	if (unit && v > UINT64_MAX / unit)
		return -ERANGE;
	return check_range(v * unit, min, max, out);
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char units[] = "kmgt";
	const char *suffix, *u;
	uint64_t v, unit = 1;
	int err = parse_digits(s, &v, &suffix);

	if (err)
		return err;
	if (*suffix) {
		u = strchr(units, tolower((unsigned char)suffix[0]));
		if (!u || !*u)
			return -EINVAL;
		for (const char *p = units; p <= u; p++)
			unit *= 1024;
		suffix++;
		if (*suffix == 'i' || *suffix == 'I')
			suffix++;
		if (*suffix == 'b' || *suffix == 'B')
			suffix++;
		if (*suffix)
			return -EINVAL;
	}
	return scaled(v, unit, min, max, out);
}

int parse_duration_ms(const char *s, uint64_t min_ms, uint64_t max_ms, uint64_t *out)
{
	const char *suffix;
	uint64_t v, unit;
	int err = parse_digits(s, &v, &suffix);

	if (err)
		return err;
	if (!*suffix || !strcmp(suffix, "s"))
		unit = 1000;
	else if (!strcmp(suffix, "ms"))
		unit = 1;
	else if (!strcmp(suffix, "m"))
		unit = 60 * 1000;
	else if (!strcmp(suffix, "h"))
		unit = 3600 * 1000;
	else
		return -EINVAL;
	return scaled(v, unit, min_ms, max_ms, out);
}

int parse_pid(const char *s, int *out)
{
	uint64_t v;
	int err = parse_u64(s, 1, (1 << 22) - 1, &v); /* PID_MAX_LIMIT is 2^22 */

	if (!err)
		*out = (int)v;
	return err;
}
