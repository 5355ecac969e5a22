// SPDX-License-Identifier: BSD-2-Clause
/*
 * parse.c - strict number parsing: no sign, no trailing garbage, range-checked.
 * Sizes and durations take a decimal fraction ("1.5G", "0.5s") and durations
 * compound units ("1m30s"), as people write them; the result must be a whole
 * number of bytes or milliseconds.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "parse.h"

#define MAX_FRACTION_DIGITS 9

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

/* A decimal number: digits, optionally '.' and up to 9 digits of fraction. */
struct decimal {
	uint64_t whole;
	uint64_t num, den; /* fraction num / den, den a power of ten */
};

static int parse_decimal(const char *s, struct decimal *d, const char **suffix)
{
	const char *p;
	int err = parse_digits(s, &d->whole, &p);

	if (err)
		return err;
	d->num = 0;
	d->den = 1;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		for (int n = 0; isdigit((unsigned char)*p); p++, n++) {
			if (n == MAX_FRACTION_DIGITS)
				return -EINVAL;
			d->num = d->num * 10 + (uint64_t)(*p - '0');
			d->den *= 10;
		}
	}
	*suffix = p;
	return 0;
}

/* d times unit into *out: -ERANGE on overflow, -EINVAL if not a whole number. */
static int decimal_scale(const struct decimal *d, uint64_t unit, uint64_t *out)
{
	unsigned __int128 frac = (unsigned __int128)d->num * unit;
	unsigned __int128 v = (unsigned __int128)d->whole * unit;

	if (frac % d->den)
		return -EINVAL;
	v += frac / d->den;
	if (v > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)v;
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

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char units[] = "kmgt";
	const char *suffix, *u;
	struct decimal d;
	uint64_t v, unit = 1;
	int err = parse_decimal(s, &d, &suffix);

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
	err = decimal_scale(&d, unit, &v);
	if (err)
		return err;
	return check_range(v, min, max, out);
}

/* The unit at s (ms, s, m, h): its length and milliseconds, or 0. */
static size_t duration_unit(const char *s, uint64_t *ms)
{
	if (!strncmp(s, "ms", 2)) {
		*ms = 1;
		return 2;
	}
	switch (*s) {
	case 's': *ms = 1000; return 1;
	case 'm': *ms = 60 * 1000; return 1;
	case 'h': *ms = 3600 * 1000; return 1;
	default: return 0;
	}
}

/*
 * A bare number is seconds; otherwise one or more NUMBER UNIT parts, units
 * from the largest down, each once ("1h30m", "1m30s", "2s500ms"); only the
 * last part may have a fraction ("1.5s", "1m0.5s").
 */
int parse_duration_ms(const char *s, uint64_t min_ms, uint64_t max_ms, uint64_t *out)
{
	uint64_t total = 0, part, unit, last_unit = UINT64_MAX;
	const char *p = s;
	struct decimal d;
	size_t n;
	int err;

	err = parse_decimal(p, &d, &p);
	if (err)
		return err;
	if (!*p) {
		err = decimal_scale(&d, 1000, &total);
		return err ?: check_range(total, min_ms, max_ms, out);
	}
	for (;;) {
		n = duration_unit(p, &unit);
		if (!n || unit >= last_unit)
			return -EINVAL;
		p += n;
		if (d.num && *p)
			return -EINVAL; /* a fraction only in the last part */
		err = decimal_scale(&d, unit, &part);
		if (err)
			return err;
		if (part > UINT64_MAX - total)
			return -ERANGE;
		total += part;
		last_unit = unit;
		if (!*p)
			break;
		err = parse_decimal(p, &d, &p);
		if (err)
			return err;
	}
	return check_range(total, min_ms, max_ms, out);
}

int parse_pid(const char *s, int *out)
{
	uint64_t v;
	int err = parse_u64(s, 1, (1 << 22) - 1, &v); /* PID_MAX_LIMIT is 2^22 */

	if (!err)
		*out = (int)v;
	return err;
}
