// SPDX-License-Identifier: BSD-2-Clause
/*
 * pause.c - stopping a process's threads with ptrace for a consistent read
 * of its memory, and letting them go.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include "pause.h"
#include "util/clock.h"
#include "util/parse.h"
#include "util/procfs.h"

#define MAX_ROUNDS 8 /* rounds of listing threads, for threads started meanwhile */
#define PAUSE_WAIT_NS (2000ULL * 1000000) /* to have every thread stopped */

static bool held(const struct census_pause *p, int tid)
{
	for (int i = 0; i < p->nr; i++)
		if (p->tids[i] == tid)
			return true;
	return false;
}

/* Seizes and interrupts tid, waits for it to stop. Returns 0, 1 if it is gone, or -errno. */
static int hold(struct census_pause *p, int tid)
{
	int status, sig = 0;

	if (p->nr == (int)(sizeof(p->tids) / sizeof(p->tids[0])))
		return -E2BIG;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL))
		return errno == ESRCH ? 1 : -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL)) {
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return errno == ESRCH ? 1 : -errno;
	}
	for (;;) {
		pid_t r = waitpid(tid, &status, __WALL | WNOHANG);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECHILD ? 1 : -errno;
		}
		if (r == 0) {
			/*
			 * Not stopped yet (in an uninterruptible sleep?): give up at the
			 * deadline; it cannot be detached before it stops, but it will be
			 * when gpuleak exits, and its pending interrupt goes with it.
			 */
			if (now_ns() > p->start_ns + PAUSE_WAIT_NS)
				return -ETIMEDOUT;
			nanosleep(&(struct timespec){ .tv_nsec = 200000 }, NULL);
			continue;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return 1;
		if (!WIFSTOPPED(status))
			continue;
		/* the interrupt's stop is PTRACE_EVENT_STOP; a signal may come first */
		if ((status >> 16) == PTRACE_EVENT_STOP)
			break;
		sig = WSTOPSIG(status);
		break;
	}
	p->tids[p->nr] = tid;
	p->sigs[p->nr++] = sig;
	return 0;
}

static int hold_all(struct census_pause *p, bool *added)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int err = 0;

	*added = false;
	if (snprintf(path, sizeof(path), "%s/%d/task", procfs_root, p->pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((e = readdir(d)) && !err) {
		int tid, r;

		if (e->d_name[0] == '.' || parse_pid(e->d_name, &tid) || held(p, tid))
			continue;
		r = hold(p, tid);
		if (r < 0)
			err = r;
		else if (r == 0)
			*added = true;
	}
	closedir(d);
	return err;
}

int census_pause__stop(int pid, struct census_pause *p)
{
	bool added = true;
	int err = 0;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->start_ns = now_ns();
	for (int round = 0; round < MAX_ROUNDS && added && !err; round++)
		err = hold_all(p, &added);
	if (!err && !p->nr)
		err = -ESRCH;
	if (err == -EPERM && p->nr == 0) {
		/* EPERM from a seize also means another tracer has it */
		char path[64];
		FILE *f;
		int tracer = 0;

		snprintf(path, sizeof(path), "%s/%d/status", procfs_root, pid);
		f = fopen(path, "re");
		if (f) {
			char line[128];

			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "TracerPid: %d", &tracer) == 1)
					break;
			fclose(f);
		}
		if (tracer)
			err = -EBUSY;
	}
	if (err)
		census_pause__resume(p);
	return err;
}

void census_pause__resume(struct census_pause *p)
{
	for (int i = 0; i < p->nr; i++)
		ptrace(PTRACE_DETACH, p->tids[i], NULL, (void *)(long)p->sigs[i]);
	p->ns = p->nr ? now_ns() - p->start_ns : 0;
	p->held = p->nr;
	p->nr = 0;
}
