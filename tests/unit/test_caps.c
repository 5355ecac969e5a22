// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_caps.c - capability sets named as capabilities(7) names them, every one
 * the kernel defines (a log that says "cap_5" says nothing to an operator).
 */
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "agent/caps.h"

static void test_every_capability_named(void **state)
{
	char buf[2048];

	for (int c = 0; c <= CAP_LAST_CAP; c++) {
		caps__names(1ULL << c, buf, sizeof(buf));
		assert_true(!strncmp(buf, "CAP_", 4));
	}
	caps__names(1ULL << CAP_KILL, buf, sizeof(buf));
	assert_string_equal(buf, "CAP_KILL");
	caps__names(1ULL << CAP_BPF | 1ULL << CAP_PERFMON | 1ULL << CAP_SYS_PTRACE, buf,
		    sizeof(buf));
	assert_string_equal(buf, "CAP_SYS_PTRACE,CAP_PERFMON,CAP_BPF");
	caps__names(1ULL << CAP_CHECKPOINT_RESTORE, buf, sizeof(buf));
	assert_string_equal(buf, "CAP_CHECKPOINT_RESTORE");
	/* one newer than the table: its number, not a wrong name */
	caps__names(1ULL << 45, buf, sizeof(buf));
	assert_string_equal(buf, "cap_45");
	/* a short buffer ends on a whole name */
	caps__names(1ULL << CAP_CHOWN | 1ULL << CAP_SYS_ADMIN, buf, 16);
	assert_string_equal(buf, "CAP_CHOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_capability_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
