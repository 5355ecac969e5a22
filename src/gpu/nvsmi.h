/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * nvsmi.h - the NVML sample (nvml.h) taken through the nvidia-smi command.
 */
#ifndef GL_NVSMI_H
#define GL_NVSMI_H

#include <stdio.h>
#include "nvml.h"

/* Fills s from nvidia-smi. Returns 0, -ENOENT (no nvidia-smi, no GPU) or -errno. */
int nvsmi__sample(struct nvml_sample *s);
/* The parsers, for tests: CSV of --query-gpu (index,uuid,total MiB,free MiB) and
 * --query-compute-apps (gpu_uuid,pid,used MiB). Return 0 or -ENOENT (no device). */
int nvsmi__parse_gpus(FILE *f, struct nvml_sample *s);
int nvsmi__parse_apps(FILE *f, struct nvml_sample *s);

#endif /* GL_NVSMI_H */
