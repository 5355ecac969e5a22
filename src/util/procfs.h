/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * procfs.h - what gpuleak reads from /proc about other processes.
 *
 * Functions returning int return 0 or -errno (-ENOENT: the process is gone).
 */
#ifndef GL_PROCFS_H
#define GL_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Root of procfs; tests may point it elsewhere. */
extern const char *procfs_root;

struct map_entry {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	char perms[5];
	bool deleted;	  /* the path ends in " (deleted)" (stripped from path) */
	const char *path; /* "" for anonymous mappings */
};

/* Parses one line of /proc/PID/maps (without the newline). Returns 0 or -EINVAL. */
int procfs__parse_map_line(char *line, struct map_entry *e);

/* Calls cb for each mapping of pid; stops early and returns cb's value if non-zero. */
int procfs__for_each_map(int pid, int (*cb)(const struct map_entry *e, void *ctx), void *ctx);

int procfs__comm(int pid, char *buf, size_t len);
/* Process start time in clock ticks since boot (/proc/PID/stat field 22). */
int procfs__start_ticks(int pid, uint64_t *ticks);
/* The task flags of pid (PF_*, field 9 of /proc/PID/stat). Returns 0 or -errno. */
int procfs__flags(int pid, uint64_t *flags);
/* Parent pid and state letter from /proc/PID/stat. */
int procfs__stat(int pid, int *ppid, char *state);
/*
 * The values of the variables names[0..n) in pid's initial environment
 * (/proc/PID/environ) as non-negative integers: vals[i] = -1 where a variable is
 * absent or not a number below 2^31. A name given twice has the value of its
 * first entry, as getenv() and Python's os.environ read it. No other variable is
 * kept or copied. n is at most 64. Returns 0 or -errno (-EACCES: another user's
 * process without CAP_SYS_PTRACE).
 */
int procfs__environ_ints(int pid, const char *const *names, int *vals, int n);
/* Whether pid is the process that started at start_ns (boot-time nanoseconds). */
bool procfs__same_process(int pid, uint64_t start_ns);
/* The PID of pid in its own (innermost) PID namespace, from NSpid; 0 if unknown. */
int procfs__ns_pid(int pid);
/*
 * Whether pid still has its address space (/proc/PID/statm counts pages): false
 * once it has exited, even before it is reaped, or if it cannot be read. A read of
 * its maps that ended while it had one was not cut short by its exit.
 */
bool procfs__has_memory(int pid);

/*
 * Calls cb for each numeric entry of /proc (every process).
 * Returns 0, or cb's non-zero value.
 */
int procfs__for_each_pid(int (*cb)(int pid, void *ctx), void *ctx);

/*
 * This process's cgroup v2 memory limit (memory.max) and use (memory.current), in bytes.
 * Returns 0, or -ENOENT when there is no limit (none set, cgroup v1, not mounted).
 */
int procfs__self_memory_limit(uint64_t *max, uint64_t *current);

/* Reads a whole small file into buf (NUL-terminated). Returns bytes read or -errno. */
ssize_t read_small_file(const char *path, char *buf, size_t len);

#endif /* GL_PROCFS_H */
