/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * htab.h - an open-addressing hash table with fixed-size keys and values
 * stored inline (no allocation per entry).
 *
 * Keys are compared with memcmp, so callers zero padding in key structs.
 * Value pointers stay valid until the next insert or delete.
 */
#ifndef GL_HTAB_H
#define GL_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct htab;

/* Returns NULL with errno set on failure. */
struct htab *htab__new(size_t key_size, size_t val_size);
void htab__free(struct htab *h);

/* The value stored under key, or NULL. */
void *htab__lookup(const struct htab *h, const void *key);
/*
 * The value under key, inserted zero-filled if absent (*created tells which).
 * NULL with errno = ENOMEM if the table could not grow.
 */
void *htab__upsert(struct htab *h, const void *key, bool *created);
/* Removes key; returns false if it was not there. */
bool htab__delete(struct htab *h, const void *key);
size_t htab__count(const struct htab *h);
/* Bytes the table holds in memory. */
size_t htab__mem(const struct htab *h);
/* Removes every entry, keeping the allocation. */
void htab__clear(struct htab *h);

/*
 * Iteration: size_t it = 0; while ((v = htab__next(h, &it, &key))) ...
 * Deleting during iteration is not allowed.
 */
void *htab__next(const struct htab *h, size_t *iter, const void **key);

/* A 64-bit hash of len bytes. */
uint64_t hash_bytes(const void *data, size_t len, uint64_t seed);

#endif /* GL_HTAB_H */
