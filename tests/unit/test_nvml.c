// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_nvml.c - the NVML module over fake NVML functions: every call checked,
 * the fallbacks to older process queries, the growing process buffer, what a
 * sample says about one process, and the isolated (child process) path.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "gpu/isolated.h"
#include "gpu/nvml.h"

#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

/* The fake driver: devices, their processes, and what to break. */
static struct {
	int init_rc, count_rc, memory_rc, uuid_rc, v3_rc, v2_rc;
	unsigned int ndevices;
	unsigned int nprocs[4];
	struct nvml_process_info procs[4][300];
	int v3_calls, v2_calls, v1_calls, shutdowns;
	unsigned int grow_between; /* processes that appear after each count */
} fake;

static const char *fake_error_string(int rc)
{
	return rc == 999 ? "Fake Error" : "Other";
}

static int fake_init(void)
{
	return fake.init_rc;
}

static int fake_shutdown(void)
{
	fake.shutdowns++;
	return 0;
}

static int fake_count(unsigned int *count)
{
	*count = fake.ndevices;
	return fake.count_rc;
}

static int fake_handle(unsigned int index, void **dev)
{
	if (index >= fake.ndevices)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*dev = &fake.nprocs[index];
	return 0;
}

static unsigned int index_of(void *dev)
{
	return (unsigned int *)dev - fake.nprocs;
}

static int fake_memory(void *dev, struct nvml_memory *mem)
{
	unsigned int i = index_of(dev);

	if (fake.memory_rc && i == 1)
		return fake.memory_rc;
	mem->total = 141 * GIB;
	mem->free = (100 - i) * GIB;
	mem->used = mem->total - mem->free;
	return 0;
}

static int fake_uuid(void *dev, char *uuid, unsigned int len)
{
	if (fake.uuid_rc)
		return fake.uuid_rc;
	snprintf(uuid, len, "GPU-0000000%u-aaaa-bbbb-cccc-dddddddddddd", index_of(dev));
	return 0;
}

static int list(void *dev, unsigned int *count, struct nvml_process_info *infos)
{
	unsigned int i = index_of(dev), n = fake.nprocs[i];

	if (*count < n) {
		*count = n;
		fake.nprocs[i] += fake.grow_between;
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	}
	memcpy(infos, fake.procs[i], n * sizeof(*infos));
	*count = n;
	return 0;
}

static int fake_v3(void *dev, unsigned int *count, struct nvml_process_info *infos)
{
	fake.v3_calls++;
	return fake.v3_rc ? fake.v3_rc : list(dev, count, infos);
}

static int fake_v2(void *dev, unsigned int *count, struct nvml_process_info *infos)
{
	fake.v2_calls++;
	return fake.v2_rc ? fake.v2_rc : list(dev, count, infos);
}

static int fake_v1(void *dev, unsigned int *count, struct nvml_process_info_v1 *infos)
{
	unsigned int i = index_of(dev), n = fake.nprocs[i];

	fake.v1_calls++;
	if (*count < n) {
		*count = n;
		return 7;
	}
	for (unsigned int j = 0; j < n; j++)
		infos[j] = (struct nvml_process_info_v1){ fake.procs[i][j].pid,
							  fake.procs[i][j].used_gpu_memory };
	*count = n;
	return 0;
}

static const struct nvml_api full_api = {
	.init = fake_init,
	.shutdown = fake_shutdown,
	.error_string = fake_error_string,
	.device_count = fake_count,
	.device_handle = fake_handle,
	.device_memory = fake_memory,
	.device_uuid = fake_uuid,
	.procs_v3 = fake_v3,
	.procs_v2 = fake_v2,
	.procs_v1 = fake_v1,
};

static int setup(void **state)
{
	(void)state;
	memset(&fake, 0, sizeof(fake));
	fake.ndevices = 2;
	fake.nprocs[0] = 2;
	fake.procs[0][0] = (struct nvml_process_info){ 4242, 3 * GIB, 0, 0 };
	fake.procs[0][1] = (struct nvml_process_info){ 77, 500 * MIB, 0, 0 };
	fake.nprocs[1] = 1;
	fake.procs[1][0] = (struct nvml_process_info){ 4242, 1 * GIB, 0, 0 };
	return 0;
}

static void test_open_checks_functions_and_init(void **state)
{
	struct nvml_api api = full_api;
	struct nvml *n;

	(void)state;
	api.device_uuid = NULL;
	errno = 0;
	assert_null(nvml__open_api(&api));
	assert_int_equal(errno, ENOSYS);
	fake.init_rc = 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
	assert_null(nvml__open_api(&full_api));
	assert_int_equal(errno, EIO);
	fake.init_rc = 0;
	n = nvml__open_api(&full_api);
	assert_non_null(n);
	assert_string_equal(nvml__error(n), "");
	nvml__close(n);
	assert_int_equal(fake.shutdowns, 1);
	nvml__close(NULL);
}

static void test_devices(void **state)
{
	struct nvml *n = nvml__open_api(&full_api);
	uint64_t total, free;
	uint32_t count;
	char uuid[96], small[8];

	(void)state;
	assert_non_null(n);
	assert_int_equal(nvml__device_count(n, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(nvml__device_memory(n, 1, &total, &free), 0);
	assert_int_equal(total, 141 * GIB);
	assert_int_equal(free, 99 * GIB);
	assert_int_equal(nvml__device_uuid(n, 1, uuid, sizeof(uuid)), 0);
	assert_string_equal(uuid, "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd");
	assert_int_equal(nvml__device_uuid(n, 0, small, sizeof(small)), -ENOSPC);
	assert_int_equal(nvml__device_memory(n, 2, &total, &free), -ENOENT);
	fake.memory_rc = 999;
	assert_int_equal(nvml__device_memory(n, 1, &total, &free), -EIO);
	assert_string_equal(nvml__error(n), "nvmlDeviceGetMemoryInfo: Fake Error (999)");
	fake.count_rc = 999;
	assert_int_equal(nvml__device_count(n, &count), -EIO);
	nvml__close(n);
}

static void test_procs_grow_the_buffer(void **state)
{
	struct nvml *n = nvml__open_api(&full_api);
	struct nvml_proc procs[NVML_MAX_PROCS];
	uint32_t count;
	bool truncated;

	(void)state;
	fake.nprocs[0] = 200; /* more than the first buffer (max = 4) */
	for (unsigned int i = 0; i < 200; i++)
		fake.procs[0][i] = (struct nvml_process_info){ 1000 + i, i * MIB, 0, 0 };
	fake.grow_between = 5; /* and more appear between count and list */
	assert_int_equal(nvml__device_procs(n, 0, procs, 4, &count, &truncated), 0);
	assert_int_equal(count, 4);
	assert_true(truncated);
	assert_int_equal(procs[3].pid, 1003);
	assert_int_equal(procs[3].used, 3 * MIB);
	fake.grow_between = 0;
	assert_int_equal(nvml__device_procs(n, 1, procs, NVML_MAX_PROCS, &count, &truncated), 0);
	assert_int_equal(count, 1);
	assert_false(truncated);
	assert_int_equal(procs[0].pid, 4242);
	assert_int_equal(fake.v2_calls + fake.v1_calls, 0);
	nvml__close(n);
}

static void test_procs_fall_back_to_older_queries(void **state)
{
	struct nvml *n = nvml__open_api(&full_api);
	struct nvml_proc procs[8];
	uint32_t count;

	(void)state;
	fake.v3_rc = 13; /* NVML_ERROR_FUNCTION_NOT_FOUND: an older driver */
	assert_int_equal(nvml__device_procs(n, 0, procs, 8, &count, NULL), 0);
	assert_int_equal(count, 2);
	assert_int_equal(fake.v3_calls, 1);
	assert_int_equal(fake.v2_calls, 1);
	fake.v2_rc = 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
	assert_int_equal(nvml__device_procs(n, 0, procs, 8, &count, NULL), 0);
	assert_int_equal(fake.v3_calls, 1); /* not tried again */
	assert_int_equal(fake.v1_calls, 1);
	assert_int_equal(count, 2);
	assert_int_equal(procs[1].pid, 77);
	assert_int_equal(procs[1].used, 500 * MIB);
	nvml__close(n);

	struct nvml_api api = full_api;

	api.procs_v3 = api.procs_v2 = NULL;
	api.procs_v1 = NULL;
	n = nvml__open_api(&api);
	assert_int_equal(nvml__device_procs(n, 0, procs, 8, &count, NULL), -ENOSYS);
	assert_int_equal(count, 0);
	nvml__close(n);

	fake.v3_rc = 999;
	n = nvml__open_api(&full_api);
	assert_int_equal(nvml__device_procs(n, 0, procs, 8, &count, NULL), -EIO);
	assert_non_null(strstr(nvml__error(n), "Fake Error"));
	nvml__close(n);
}

static void test_sample_and_one_process(void **state)
{
	static struct nvml_sample s;
	struct nvml *n = nvml__open_api(&full_api);
	uint64_t used, room;

	(void)state;
	fake.memory_rc = 999; /* device 1 cannot say */
	assert_int_equal(nvml__sample(n, &s), 0);
	assert_int_equal(s.ndevices, 2);
	assert_int_equal(s.devs[0].total, 141 * GIB);
	assert_int_equal(s.devs[1].free, NVML_UNKNOWN);
	assert_string_equal(s.devs[0].uuid, "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd");
	assert_int_equal(s.devs[0].nprocs, 2);
	nvml_sample__proc(&s, 4242, &used, &room);
	assert_int_equal(used, 4 * GIB); /* 3 GiB on one device, 1 on the other */
	assert_int_equal(room, NVML_UNKNOWN);
	nvml_sample__proc(&s, 77, &used, &room);
	assert_int_equal(used, 500 * MIB);
	assert_int_equal(room, 100 * GIB);
	nvml_sample__proc(&s, 5, &used, &room); /* not listed, two devices */
	assert_int_equal(used, NVML_UNKNOWN);
	assert_int_equal(room, NVML_UNKNOWN);
	s.ndevices = 1;
	nvml_sample__proc(&s, 5, &used, &room); /* not listed, the only device */
	assert_int_equal(room, 100 * GIB);
	s.devs[0].procs[1].used = NVML_UNKNOWN;
	nvml_sample__proc(&s, 77, &used, &room);
	assert_int_equal(used, NVML_UNKNOWN);
	nvml__close(n);
}

static void test_library_paths(void **state)
{
	static struct nvml_sample s;

	(void)state;
	errno = 0;
	assert_null(nvml__open("/nonexistent/libnvidia-ml.so.1"));
	assert_int_equal(errno, ENOENT);
	assert_null(nvml__open("libc.so.6")); /* a library, but not NVML */
	assert_int_equal(errno, ENOSYS);
	assert_int_equal(nvml__sample_isolated("/nonexistent/libnvidia-ml.so.1", 5000, &s),
			 -ENOENT);
	assert_int_equal(nvml__sample_isolated("libc.so.6", 5000, &s), -ENOSYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_open_checks_functions_and_init, setup),
		cmocka_unit_test_setup(test_devices, setup),
		cmocka_unit_test_setup(test_procs_grow_the_buffer, setup),
		cmocka_unit_test_setup(test_procs_fall_back_to_older_queries, setup),
		cmocka_unit_test_setup(test_sample_and_one_process, setup),
		cmocka_unit_test_setup(test_library_paths, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
