/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * site.h - which frame of a stack names it: the one rule behind every line that says where a
 * stack allocated (the reports' site, the census's allocation line, the failure warnings).
 */
#ifndef GL_SITE_H
#define GL_SITE_H

#include "snapshot.h"

/*
 * The frame that names st: its innermost Python frame in the program's own code (not in
 * installed packages, the standard library, frozen modules or code torch.compile generated),
 * so that a tensor made inside torch.nn is named at the user's line that called it; else its
 * innermost Python frame; else its innermost named native frame outside the CUDA stack's own
 * libraries (driver, runtime, PyTorch's allocator, cuBLAS, NCCL) and the CUDA runtime linked
 * into the program; else its innermost frame. Points into st->frames;
 * NULL if st has no frames.
 */
const struct snap_frame *site__pick(const struct snap_stack *st);

/*
 * Whether f is plumbing a reader of a stack passes over: a native frame of the CUDA stack's
 * own libraries (as above), of the Python interpreter (libpython, the python executable),
 * of ctypes and libffi, of the dynamic loader, or of process and thread start-up (libc's,
 * _start). Python frames and the program's own native frames are not.
 */
bool site__is_plumbing(const struct snap_frame *f);

#endif /* GL_SITE_H */
