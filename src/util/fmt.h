/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fmt.h - numbers as people read them, and doubles back to counters.
 */
#ifndef GL_FMT_H
#define GL_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Human-readable byte count ("1.50 GiB") into buf (truncated to len); returns buf. */
const char *fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* A rate of bytes per second, signed ("+1.50 MiB/s", "-3 B/s", "0") into buf (truncated to len). */
void fmt_rate(double bytes_per_s, char *buf, size_t len);
/* v as an unsigned integer (rounded down): 0 if negative or NaN, UINT64_MAX if beyond. */
static inline uint64_t u64_of(double v)
{
	return v > 0 ? (v < 18446744073709551616.0 ? (uint64_t)v : UINT64_MAX) : 0;
}

#endif /* GL_FMT_H */
