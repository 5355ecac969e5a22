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

/* A record, validated and decoded: what the books apply. */
struct event {
	int type; /* enum gl_rec_type */
	const struct gl_hdr *hdr;
	union {
		const struct gl_call *call; /* GL_REC_CALL */
		const struct gl_proc *proc; /* GL_REC_PROC */
		struct stack_view stack;    /* GL_REC_STACK */
	};
};

/*
 * Validates data[0..size) (event__validate()) and decodes it into *ev, which
 * points into data. Returns the record type, or -EINVAL (*ev untouched).
 */
int event__decode(const void *data, size_t size, struct event *ev);

#endif /* GL_EVENT_H */
