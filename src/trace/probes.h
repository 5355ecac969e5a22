/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * probes.h - the probe table (include/gpuleak_abi.h) as user space sees it.
 */
#ifndef GL_PROBES_H
#define GL_PROBES_H

#include <linux/types.h>
#include "gpuleak_abi.h"

/* Symbol name of an API id, or "?" */
const char *probe__name(unsigned int api);
/* Descriptor of an API id (role, class, kind, flags). */
const struct gl_api_desc *probe__desc(unsigned int api);
/* API id of a symbol name, or -1. */
int probe__lookup(const char *name);
/* Name of a memory class as the JSON contract spells it. */
const char *class__name(unsigned int cls);
/* "dwarf", "fp" or "none". */
const char *stack_mode__name(enum gl_stack_mode m);
/* CUresult name for the error codes gpuleak reports ("CUDA_ERROR_OUT_OF_MEMORY"). */
const char *cuda__error_name(int rc);

#endif /* GL_PROBES_H */
