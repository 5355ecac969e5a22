/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pattern.h - the leak pattern a leaking stack's evidence points to, as a hint
 * with that evidence: outputs kept across steps, a graph kept alive across
 * steps, a module attribute growing, pinned buffers kept.
 */
#ifndef GL_PATTERN_H
#define GL_PATTERN_H

#include <stddef.h>
#include "snapshot.h"

/*
 * The pattern of a stack judged to leak, or NULL when its evidence names none
 * (or it is not judged to leak). Writes the evidence, one line, to evidence
 * (len bytes, cut with "..." if longer).
 */
const char *pattern__of(const struct snap_stack *st, char *evidence, size_t len);
/*
 * What usually fixes pattern (pattern__of's) at stack st, in the words of its language
 * (Python when it has Python frames, else the driver's API). Static; never NULL.
 */
const char *pattern__fix(const struct snap_stack *st, const char *pattern);

#endif /* GL_PATTERN_H */
