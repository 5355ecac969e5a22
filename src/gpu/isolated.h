/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * isolated.h - NVML sampled in a child process, so that neither a crash nor a
 * hang of the library (or a static binary's dlopen) can harm gpuleak; the
 * nvidia-smi command (nvsmi.h) answers when NVML cannot be loaded or crashed
 * once (a static build starts so).
 */
#ifndef GL_ISOLATED_H
#define GL_ISOLATED_H

#include "nvml.h"

/*
 * nvml__open(path), nvml__sample() and nvml__close() in a child process (path
 * NULL: the system's library), the nvidia-smi command where NVML is known to
 * crash. Waits at most timeout_ms. 0 or -errno as nvml.h says (-EIO also when
 * the child died).
 */
int nvml__sample_isolated(const char *path, int timeout_ms, struct nvml_sample *out);

#endif /* GL_ISOLATED_H */
