// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_nvsmi.c - libFuzzer target: the nvidia-smi CSV parsers on any output.
 * The input is split at the first NUL byte: before it the --query-gpu
 * output, after it the --query-compute-apps output (both read through
 * fmemopen, as from the command's pipe).
 */
#include "fuzz.h"
#include "gpu/nvsmi.h"

static struct nvml_sample sample;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	return 0;
}

static void parse(int (*fn)(FILE *, struct nvml_sample *), const uint8_t *data, size_t size)
{
	FILE *f;

	if (!size)
		return;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return;
	fn(f, &sample);
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t gpus = nul ? (size_t)(nul - data) : size;

	memset(&sample, 0, sizeof(sample));
	parse(nvsmi__parse_gpus, data, gpus);
	if (nul)
		parse(nvsmi__parse_apps, nul + 1, size - gpus - 1);
	return 0;
}
