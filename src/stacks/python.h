/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * python.h - CPython frames: finding the interpreter in a process, telling
 * BPF where its thread states live, and resolving (code object, instruction
 * offset) to function, file and line.
 */
#ifndef GL_PYTHON_H
#define GL_PYTHON_H

#include <stdint.h>

struct python;

/* NULL with errno on failure. */
struct python *python__new(void);
void python__free(struct python *py);

/* Function and file of a Python code id (from a FRAME_PYTHON frame). */
void python__code_info(struct python *py, uint32_t id, const char **function, const char **file);

#endif /* GL_PYTHON_H */
