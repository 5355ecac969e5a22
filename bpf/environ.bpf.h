/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * environ.bpf.h - a process's ranks (RANK, LOCAL_RANK, WORLD_SIZE) read from
 * its environment as it maps a library (--ranks-from-env). User space read
 * them from /proc/PID/environ when it came to the mapping's record: a rank
 * killed in between (a scheduler ending a job) had none left to read.
 *
 * The environment's strings are scanned a byte at a time (one bpf_loop
 * callback, verified once), a chunk read into per-CPU scratch as the scan
 * reaches it; the values are read as user space reads them and as the process
 * itself does (getenv(), Python's os.environ): the first string of a name
 * decides, an int of digits or nothing. An environment longer than
 * GL_ENV_SCAN_MAX, or one that cannot be read, is left to user space.
 */
#ifndef GPULEAK_ENVIRON_BPF_H
#define GPULEAK_ENVIRON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"

#define GL_ENV_SCAN_MAX (64 * 1024)
#define GL_ENV_CHUNK 256
#define GL_ENV_NONE 3 /* the string names none of the three */

struct env_scan {
	char buf[GL_ENV_CHUNK];
	__u64 at, end; /* the user address of the next chunk; the environment's end */
	__s64 num;     /* the value read so far; -1: not an int */
	__s32 val[3];
	__u32 name;   /* which of the three this string names so far (GL_ENV_NONE: none) */
	__u32 pos;    /* the characters of this string seen (at most 64 counted) */
	__u32 failed; /* a chunk could not be read */
	__u32 seen;   /* a bit per name: its first string is read */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct env_scan);
} env_scratch SEC(".maps");

/* "NAME=" of the three, and each one's length with its '=' */
static const char env_names[3][16] = { "RANK=", "LOCAL_RANK=", "WORLD_SIZE=" };
static const __u32 env_name_len[3] = { 5, 11, 11 };

struct env_walk {
	struct env_scan *s;
};

static long env_step(__u64 i, void *data)
{
	struct env_scan *s = ((struct env_walk *)data)->s;
	__u32 off = i & (GL_ENV_CHUNK - 1), name, len;
	char c;

	if (!off) {
		__u64 n = s->end - s->at;

		if (n > GL_ENV_CHUNK)
			n = GL_ENV_CHUNK;
		if (bpf_probe_read_user(s->buf, n, (void *)s->at)) {
			s->failed = 1;
			return 1;
		}
		s->at += n;
	}
	c = s->buf[off];
	if (s->pos == 0) {
		s->name = c == 'R' ? 0 : c == 'L' ? 1 : c == 'W' ? 2 : GL_ENV_NONE;
		s->num = 0;
	}
	name = s->name;
	if (name < GL_ENV_NONE) {
		len = env_name_len[name];
		if (s->pos < len) {
			if (c != env_names[name][s->pos & 15])
				s->name = GL_ENV_NONE;
		} else if (c == '\0') {
			/* the first string of the name: the digits of an int, at least one
			 * (parse_u32's rule), or no value */
			if (!(s->seen & (1u << name))) {
				s->seen |= 1u << name;
				s->val[name] = s->pos > len && s->num >= 0 ? (__s32)s->num : -1;
			}
		} else if (c >= '0' && c <= '9' && s->num >= 0) {
			s->num = s->num * 10 + (c - '0');
			if (s->num > 0x7fffffff)
				s->num = -1;
		} else {
			s->num = -1;
		}
	}
	if (c == '\0')
		s->pos = 0;
	else if (s->pos < 64)
		s->pos++;
	return 0;
}

/*
 * The ranks of the current process into lib (env_read set) where its whole
 * environment could be read; else env_read stays 0.
 */
static __always_inline void read_env_ranks(struct task_struct *task, struct gl_libmap *lib)
{
	struct env_walk w;
	__u32 zero = 0;
	__u64 start, end;

	if (!targ_rank_env)
		return;
	w.s = bpf_map_lookup_elem(&env_scratch, &zero);
	if (!w.s)
		return;
	start = BPF_CORE_READ(task, mm, env_start);
	end = BPF_CORE_READ(task, mm, env_end);
	if (!start || end <= start || end - start > GL_ENV_SCAN_MAX)
		return;
	w.s->at = start;
	w.s->end = end;
	w.s->name = GL_ENV_NONE;
	w.s->pos = 0;
	w.s->num = 0;
	w.s->failed = 0;
	w.s->seen = 0;
	w.s->val[0] = w.s->val[1] = w.s->val[2] = -1;
	bpf_loop(end - start, env_step, &w, 0);
	if (w.s->failed)
		return;
	lib->env[0] = w.s->val[0];
	lib->env[1] = w.s->val[1];
	lib->env[2] = w.s->val[2];
	lib->env_read = 1;
}

#endif /* GPULEAK_ENVIRON_BPF_H */
