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
	/* every capability of linux/capability.h, by number (0 to CAP_LAST_CAP) */
	static const char *const names[] = {
		"CAP_CHOWN",
		"CAP_DAC_OVERRIDE",
		"CAP_DAC_READ_SEARCH",
		"CAP_FOWNER",
		"CAP_FSETID",
		"CAP_KILL",
		"CAP_SETGID",
		"CAP_SETUID",
		"CAP_SETPCAP",
		"CAP_LINUX_IMMUTABLE",
		"CAP_NET_BIND_SERVICE",
		"CAP_NET_BROADCAST",
		"CAP_NET_ADMIN",
		"CAP_NET_RAW",
		"CAP_IPC_LOCK",
		"CAP_IPC_OWNER",
		"CAP_SYS_MODULE",
		"CAP_SYS_RAWIO",
		"CAP_SYS_CHROOT",
		"CAP_SYS_PTRACE",
		"CAP_SYS_PACCT",
		"CAP_SYS_ADMIN",
		"CAP_SYS_BOOT",
		"CAP_SYS_NICE",
		"CAP_SYS_RESOURCE",
		"CAP_SYS_TIME",
		"CAP_SYS_TTY_CONFIG",
		"CAP_MKNOD",
		"CAP_LEASE",
		"CAP_AUDIT_WRITE",
		"CAP_AUDIT_CONTROL",
		"CAP_SETFCAP",
		"CAP_MAC_OVERRIDE",
		"CAP_MAC_ADMIN",
		"CAP_SYSLOG",
		"CAP_WAKE_ALARM",
		"CAP_BLOCK_SUSPEND",
		"CAP_AUDIT_READ",
		"CAP_PERFMON",
		"CAP_BPF",
		"CAP_CHECKPOINT_RESTORE",
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
		if ((size_t)c < sizeof(names) / sizeof(names[0]))
			name = names[c];
		else {
			/* one newer than this build: its number */
			snprintf(other, sizeof(other), "cap_%d", c);
			name = other;
		}
		w = snprintf(buf + n, len - n, "%s%s", n ? "," : "", name);
		if (w < 0 || (size_t)w >= len - n) {
			buf[n] = '\0'; /* whole names only */
			return;
		}
		n += w;
	}
}
