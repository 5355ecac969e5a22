// SPDX-License-Identifier: BSD-2-Clause
/*
 * caps.c - capability sets through the raw capget/capset system calls (no
 * libcap), so that the static binary needs nothing more.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "caps.h"

#define CAP_LAST 63

static int get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

uint64_t caps__effective(void)
{
	struct __user_cap_data_struct d[2] = {};

	if (get(d))
		return 0;
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

int caps__limit(uint64_t keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {};
	int err = get(d);

	if (err)
		return err;
	/* the bounding set first: dropping from it needs CAP_SETPCAP, kept until the end */
	for (int c = 0; c <= CAP_LAST; c++) {
		if (keep & (1ULL << c))
			continue;
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) <= 0)
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) && errno != EINVAL && errno != EPERM)
			return -errno;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	d[0].effective &= (uint32_t)keep;
	d[0].permitted &= (uint32_t)keep;
	d[0].inheritable = 0;
	d[1].effective &= (uint32_t)(keep >> 32);
	d[1].permitted &= (uint32_t)(keep >> 32);
	d[1].inheritable = 0;
	if (syscall(SYS_capset, &h, d))
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return 0;
}

void caps__names(uint64_t mask, char *buf, size_t len)
{
	static const struct {
		int cap;
		const char *name;
	} names[] = {
		{ 0, "CAP_CHOWN" },	  { 1, "CAP_DAC_OVERRIDE" }, { 2, "CAP_DAC_READ_SEARCH" },
		{ 19, "CAP_SYS_PTRACE" }, { 21, "CAP_SYS_ADMIN" },   { 24, "CAP_SYS_RESOURCE" },
		{ 38, "CAP_PERFMON" },	  { 39, "CAP_BPF" },	     { 8, "CAP_SETPCAP" },
		{ 12, "CAP_NET_ADMIN" },  { 6, "CAP_SETGID" },	     { 7, "CAP_SETUID" },
	};
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	for (int c = 0; c <= CAP_LAST; c++) {
		char other[16];
		const char *name = NULL;
		int w;

		if (!(mask & (1ULL << c)))
			continue;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (names[i].cap == c)
				name = names[i].name;
		if (!name) {
			snprintf(other, sizeof(other), "cap_%d", c);
			name = other;
		}
		w = snprintf(buf + n, len - n, "%s%s", n ? "," : "", name);
		if (w < 0 || (size_t)w >= len - n)
			return;
		n += w;
	}
}
