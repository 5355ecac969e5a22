// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_nvsmi.c - parsing nvidia-smi's CSV query output into an NVML sample.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "gpu/nvsmi.h"

static FILE *text(const char *s)
{
	return fmemopen((void *)s, strlen(s), "r");
}

static void test_gpus_and_apps(void **state)
{
	static struct nvml_sample s;
	FILE *f = text("0, GPU-aaaa-1111, 143771, 100000\n"
		       "1, GPU-bbbb-2222, 143771, 143000\n"
		       "garbage line\n"
		       "x, GPU-c, 1, 1\n");

	(void)state;
	assert_int_equal(nvsmi__parse_gpus(f, &s), 0);
	fclose(f);
	assert_int_equal(s.ndevices, 2);
	assert_string_equal(s.devs[1].uuid, "GPU-bbbb-2222");
	assert_true(s.devs[0].total == 143771ULL << 20);
	assert_true(s.devs[0].free == 100000ULL << 20);

	f = text("GPU-aaaa-1111, 4242, 2048\n"
		 "GPU-bbbb-2222, 4242, [N/A]\n"
		 "GPU-zzzz, 7, 1\n"
		 "GPU-aaaa-1111, notapid, 1\n");
	assert_int_equal(nvsmi__parse_apps(f, &s), 0);
	fclose(f);
	assert_int_equal(s.devs[0].nprocs, 1);
	assert_int_equal(s.devs[0].procs[0].pid, 4242);
	assert_true(s.devs[0].procs[0].used == 2048ULL << 20);
	assert_int_equal(s.devs[1].nprocs, 1);
	assert_true(s.devs[1].procs[0].used == NVML_UNKNOWN);
}

static void test_no_device(void **state)
{
	static struct nvml_sample s;
	FILE *f = text("No devices were found\n");

	(void)state;
	assert_int_equal(nvsmi__parse_gpus(f, &s), -ENOENT);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpus_and_apps),
		cmocka_unit_test(test_no_device),
	};

	return cmocka_run_group_tests_name("nvsmi", tests, NULL, NULL);
}
