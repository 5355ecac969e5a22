/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * event.h - size-checked decoding of ring-buffer (and recorded) records.
 */
#ifndef GL_EVENT_H
#define GL_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"
#include "stacks/stacks.h" /* struct stack_view */

/*
 * Checks that data[0..size) is one well-formed record: known type, sizes
 * consistent with the header and the counts. Returns the record type (enum
 * gl_rec_type) or -EINVAL.
 */
int event__validate(const void *data, size_t size);

/* Splits a validated GL_REC_STACK record into its parts. */
void event__stack_view(const void *data, struct stack_view *v);

#endif /* GL_EVENT_H */
