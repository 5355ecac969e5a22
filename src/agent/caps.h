/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * caps.h - giving up Linux capabilities the agent no longer needs.
 */
#ifndef GL_CAPS_H
#define GL_CAPS_H

#include <stdint.h>

/* Bit mask of the process's effective capabilities (bit n = capability n). */
uint64_t caps__effective(void);

/*
 * Keeps only the capabilities in keep (bit mask) in the effective, permitted
 * and inheritable sets and the bounding set, clears the ambient set and sets
 * no_new_privs. Capabilities the process does not have are not gained.
 * Returns 0 or -errno.
 */
int caps__limit(uint64_t keep);

/* Writes the names of the capabilities in mask ("CAP_BPF,CAP_PERFMON") to buf. */
void caps__names(uint64_t mask, char *buf, size_t len);

#endif /* GL_CAPS_H */
