/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pyprocs.h - the py_procs map's one writer: how BPF is to walk the CPython
 * frames of each process, as the Python module (stacks/python) found them.
 */
#ifndef GL_PYPROCS_H
#define GL_PYPROCS_H

#include "stacks/python/python.h"

struct tracer;

/* A publisher that writes to t's py_procs map (t must outlive its use). */
struct py_publisher pyprocs__publisher(struct tracer *t);

#endif /* GL_PYPROCS_H */
