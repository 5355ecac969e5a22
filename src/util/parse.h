/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * parse.h - the one place numbers from the command line and from files are parsed.
 *
 * Each function returns 0 and stores the value, or -EINVAL (not a number, trailing
 * characters, empty) or -ERANGE (outside [min, max]) and leaves *out unchanged.
 */
#ifndef GL_PARSE_H
#define GL_PARSE_H

#include <stdint.h>

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/* Sizes: 4096, 64k, 16M, 1.5G (powers of 1024; a whole number of bytes). */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/*
 * Durations in milliseconds: 10 (seconds), 10s, 1.5s, 250ms, 2m, 1m30s, 2h, 1h30m
 * (a whole number of milliseconds).
 */
int parse_duration_ms(const char *s, uint64_t min_ms, uint64_t max_ms, uint64_t *out);
/* Accepted forms, for error messages. */
#define PARSE_DURATION_FORMS "500ms, 1.5s, 90s, 1m30s or 2h"
#define PARSE_SIZE_FORMS "4096, 16k, 64M or 1.5G"

/* A process id: 1 .. 2^22 - 1. */
int parse_pid(const char *s, int *out);

#endif /* GL_PARSE_H */
