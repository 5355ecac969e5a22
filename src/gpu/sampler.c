// SPDX-License-Identifier: BSD-2-Clause
/*
 * sampler.c - a cached NVML sample (see sampler.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "isolated.h"
#include "sampler.h"
#include "util/clock.h"
#include "util/log.h"

#define NVML_TIMEOUT_MS 3000

struct gpu_sampler {
	uint64_t max_age_ns;
	uint64_t taken_ns;
	bool valid; /* sample holds a sample taken at taken_ns */
	bool off;   /* no NVML here, or it failed: not asked again */
	struct nvml_sample sample;
};

struct gpu_sampler *gpu_sampler__new(uint64_t max_age_ns)
{
	struct gpu_sampler *g = calloc(1, sizeof(*g));

	if (g)
		g->max_age_ns = max_age_ns;
	return g;
}

void gpu_sampler__free(struct gpu_sampler *g)
{
	free(g);
}

const struct nvml_sample *gpu_sampler__get(struct gpu_sampler *g)
{
	uint64_t now = now_ns();
	int err;

	if (!g || g->off)
		return NULL;
	if (g->valid && g->max_age_ns && now - g->taken_ns < g->max_age_ns)
		return &g->sample;
	err = nvml__sample_isolated(NULL, NVML_TIMEOUT_MS, &g->sample);
	if (err) {
		log_debug("no NVML figures (GPU capacity and UUIDs, memory held before attach): %s",
			  strerror(-err));
		g->off = true;
		g->valid = false;
		return NULL;
	}
	g->valid = true;
	g->taken_ns = now;
	return &g->sample;
}
