/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * clock.h - the one clock of user space: CLOCK_MONOTONIC, the clock of
 * bpf_ktime_get_ns(), so that record timestamps and user-space deadlines
 * compare directly.
 */
#ifndef GL_CLOCK_H
#define GL_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in ns. Cannot fail. */
uint64_t now_ns(void);

#endif /* GL_CLOCK_H */
