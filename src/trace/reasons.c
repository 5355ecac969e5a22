// SPDX-License-Identifier: BSD-2-Clause
/*
 * reasons.c - why a process named on the command line cannot be traced, said
 * at once and with the real reason: gpuleak itself, a kernel thread, a zombie;
 * maps refused for want of a capability, or hidden by the machine although
 * gpuleak holds it.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "reasons.h"
#include "util/log.h"
#include "util/procfs.h"

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */

/* Whether gpuleak's effective capabilities hold CAP_SYS_PTRACE. */
static bool has_cap_sys_ptrace(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_SYS_PTRACE / 32].effective & (1U << (CAP_SYS_PTRACE % 32));
}

/* Entries of /proc/PID/task: the threads not yet reaped. */
static int nr_threads(int pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%d/task", procfs_root, pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * What cannot be traced whatever it loads: gpuleak itself, a kernel thread, a
 * zombie. Says why and returns false for those.
 */
bool reasons__traceable(int pid)
{
	uint64_t flags = 0;
	char state = '?';
	int ppid = 0;

	if (pid == getpid()) {
		log_error("PID %d is gpuleak itself: name the process that uses CUDA", pid);
		return false;
	}
	/* a leader that called pthread_exit() is a zombie too, while its threads run */
	if (procfs__stat(pid, &ppid, &state) == 0 && (state == 'Z' || state == 'X') &&
	    nr_threads(pid) <= 1) {
		log_error("PID %d has exited: a zombie waiting for its parent (PID %d) to reap it, "
			  "with nothing left to trace",
			  pid, ppid);
		return false;
	}
	if (procfs__flags(pid, &flags) == 0 && (flags & PF_KTHREAD)) {
		log_error("PID %d is a kernel thread: it has no user space, and never loads "
			  "libcuda",
			  pid);
		return false;
	}
	return true;
}

int reasons__maps_refused(int pid)
{
	if (has_cap_sys_ptrace()) {
		log_error("cannot read /proc/%d/maps: Permission denied although gpuleak holds "
			  "CAP_SYS_PTRACE: the machine hides this process (a security module such "
			  "as Yama's ptrace_scope 3, /proc mounted with hidepid=, or another user "
			  "namespace)",
			  pid);
		return -EACCES;
	}
	log_error("cannot read /proc/%d/maps: Permission denied (needs CAP_SYS_PTRACE, or "
		  "to run as the target's user)",
		  pid);
	return -EPERM;
}
