/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sampler.h - the devices as NVML (or nvidia-smi, when NVML crashes) sees
 * them, sampled in a child process and cached: the one place the rest of
 * gpuleak gets device figures from.
 *
 * A machine without NVML, or whose NVML fails, is asked once: every later
 * call answers NULL at no cost.
 */
#ifndef GL_GPU_SAMPLER_H
#define GL_GPU_SAMPLER_H

#include <stdint.h>
#include "nvml.h"

struct gpu_sampler;

/*
 * A sampler whose samples are kept max_age_ns (0: each call samples anew).
 * NULL with errno on failure.
 */
struct gpu_sampler *gpu_sampler__new(uint64_t max_age_ns);
/* NULL is a no-op. */
void gpu_sampler__free(struct gpu_sampler *g);
/*
 * The latest sample, taken now if the one kept is older than max_age_ns.
 * NULL when there is no NVML here or it failed (said once at debug level);
 * the sample is owned by the sampler and valid until the next call.
 */
const struct nvml_sample *gpu_sampler__get(struct gpu_sampler *g);

#endif /* GL_GPU_SAMPLER_H */
