/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * livemem.h - a census_mem over a live process: process_vm_readv one page at
 * a time, each page kept once read. While the process is paused the pages do
 * not change, so the cache is exact and the walk costs one system call per
 * page rather than one per field.
 */
#ifndef GL_CENSUS_LIVEMEM_H
#define GL_CENSUS_LIVEMEM_H

#include <stdint.h>
#include "census.h"

struct census_live;

/* A reader of pid keeping at most max_bytes of pages. NULL with errno on failure. */
struct census_live *census_live__new(int pid, uint64_t max_bytes);
void census_live__free(struct census_live *l);
/* The reader itself (its ctx is l). */
struct census_mem census_live__mem(struct census_live *l);
/* System calls made. */
uint64_t census_live__calls(const struct census_live *l);

#endif /* GL_CENSUS_LIVEMEM_H */
