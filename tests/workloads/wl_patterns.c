// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_patterns.c - how the memory held at one call site moves over time: the
 * cases gpuleak's leak verdicts must tell apart. --pattern NAME picks one:
 *
 *   staircase  pattern_keep_output keeps one more --size buffer every step (a leak)
 *   warmup     pattern_pool_grow: an allocator's pool grows by a --size segment a
 *              step for 10 steps, then serves every step from what it holds (steady);
 *              pattern_scratch takes and gives back a buffer every step
 *   release    pattern_cache_block: a cache grows by a --size block a step and is
 *              released every 10 steps, empty_cache()-style, then grows again (steady)
 *   once       pattern_load_weights: 64 x --size allocated once and held (steady);
 *              the steps make no driver call
 *   churnleak  pattern_churn: every step 8 buffers of 4 x --size taken and given back
 *              and one of --size / 16 kept, all at this one site (a slow leak under
 *              heavy churn)
 *   all        every pattern above, in turn, every step
 *
 * Steps are --interval-ms apart (default 20); after --iters steps (default 0:
 * until SIGINT or SIGTERM) the truth is written. Options: --pattern NAME
 * (required), --iters N, --interval-ms N, --size BYTES (default 1 MiB), -v.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

enum { S_KEEP, S_POOL, S_SCRATCH, S_CACHE, S_WEIGHTS, S_CHURN };

static struct wl_site sites[] = {
	[S_KEEP] = { "pattern_keep_output", FAKECUDA_DEVICE, 0, 0 },
	[S_POOL] = { "pattern_pool_grow", FAKECUDA_DEVICE, 0, 0 },
	[S_SCRATCH] = { "pattern_scratch", FAKECUDA_DEVICE, 0, 0 },
	[S_CACHE] = { "pattern_cache_block", FAKECUDA_DEVICE, 0, 0 },
	[S_WEIGHTS] = { "pattern_load_weights", FAKECUDA_DEVICE, 0, 0 },
	[S_CHURN] = { "pattern_churn", FAKECUDA_DEVICE, 0, 0 },
};

#define POOL_SEGMENTS 10
#define CACHE_PERIOD 10
#define CHURN_BUFFERS 8
#define WEIGHTS_SIZES 64

enum pattern { P_STAIRCASE = 1, P_WARMUP = 2, P_RELEASE = 4, P_ONCE = 8, P_CHURNLEAK = 16 };

static const struct {
	const char *name;
	unsigned int mask;
} patterns[] = {
	{ "staircase", P_STAIRCASE }, { "warmup", P_WARMUP }, { "release", P_RELEASE },
	{ "once", P_ONCE },	      { "churnleak", P_CHURNLEAK },
	{ "all", P_STAIRCASE | P_WARMUP | P_RELEASE | P_ONCE | P_CHURNLEAK },
};

static volatile int churn_buffers = CHURN_BUFFERS; /* not a constant: the loop stays a loop */
static CUdeviceptr cache[CACHE_PERIOD];
static unsigned int cached;

static CUdeviceptr alloc_at(int site, size_t size)
{
	CUdeviceptr p = 0;

	wl_check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[site], size);
	return p;
}

static void free_at(int site, CUdeviceptr p, size_t size)
{
	wl_check(cuMemFree_v2(p), "cuMemFree_v2");
	wl_site_free(&sites[site], size);
}

/* The leak: an output kept in a list that only grows. */
WL_SITE void pattern_keep_output(size_t size)
{
	alloc_at(S_KEEP, size);
}

/* An allocator taking one more segment from the driver while its pool warms up. */
WL_SITE void pattern_pool_grow(size_t size)
{
	alloc_at(S_POOL, size);
}

WL_SITE void pattern_scratch(size_t size)
{
	free_at(S_SCRATCH, alloc_at(S_SCRATCH, size), size);
}

WL_SITE void pattern_cache_block(size_t size)
{
	cache[cached++] = alloc_at(S_CACHE, size);
}

WL_SITE void pattern_load_weights(size_t size)
{
	alloc_at(S_WEIGHTS, size);
}

/* Temporary buffers and, now and then, one that is kept: the same call site. */
WL_SITE CUdeviceptr pattern_churn(size_t size)
{
	return alloc_at(S_CHURN, size);
}

/* The cache given back to the driver, then refilled by the next step's first block. */
static void empty_cache(size_t size)
{
	while (cached)
		free_at(S_CACHE, cache[--cached], size);
}

/* One call instruction for the kept buffer and the temporaries: one stack. */
static void churn_step(size_t size)
{
	size_t kept = size / 16 ? size / 16 : 1;
	CUdeviceptr tmp[CHURN_BUFFERS + 1];
	int n = churn_buffers;

	for (int i = 0; i <= n; i++)
		tmp[i] = pattern_churn(i < n ? 4 * size : kept);
	for (int i = 0; i < n; i++)
		free_at(S_CHURN, tmp[i], 4 * size);
}

WL_FRAME static void step(unsigned int mask, unsigned long long k, size_t size)
{
	if (mask & P_STAIRCASE)
		pattern_keep_output(size);
	if (mask & P_WARMUP) {
		if (k < POOL_SEGMENTS)
			pattern_pool_grow(size);
		pattern_scratch(size);
	}
	if (mask & P_RELEASE) {
		if (cached == CACHE_PERIOD)
			empty_cache(size);
		pattern_cache_block(size);
	}
	if ((mask & P_ONCE) && k == 0)
		pattern_load_weights(WEIGHTS_SIZES * size);
	if (mask & P_CHURNLEAK)
		churn_step(size);
}

/* Takes "--pattern NAME" out of argv (wl_parse knows the common options only). */
static unsigned int take_pattern(int *argc, char **argv)
{
	const char *name = wl_take_str(argc, argv, "--pattern");

	for (size_t i = 0; name && i < sizeof(patterns) / sizeof(patterns[0]); i++)
		if (!strcmp(name, patterns[i].name))
			return patterns[i].mask;
	fprintf(stderr, "wl_patterns: --pattern staircase|warmup|release|once|churnleak|all is "
			"required%s%s\n", name ? "; unknown: " : "", name ? name : "");
	exit(2);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .iters = 0, .interval_ms = 20, .size = WL_MIB };
	unsigned long long k;
	unsigned int mask;

	mask = take_pattern(&argc, argv);
	wl_parse(&o, argc, argv, WL_OPT_ITERS | WL_OPT_INTERVAL | WL_OPT_SIZE | WL_OPT_VERBOSE);
	if (!o.size)
		wl_die("--size must not be 0");
	wl_stop_on_signals();
	wl_cuda_start(0);
	wl_ready(&o);
	fakecuda_mark();
	for (k = 0; !wl_stop && (!o.iters || k < o.iters); k++) {
		step(mask, k, o.size);
		if (o.verbose)
			fprintf(stderr, "%s: step %llu\n", wl_prog, k);
		wl_sleep_ms(o.interval_ms);
	}
	wl_finish(&o, fakecuda_truth_json, sites, WL_NSITES(sites), NULL);
	return 0;
}
