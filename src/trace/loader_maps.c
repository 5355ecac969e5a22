// SPDX-License-Identifier: BSD-2-Clause
/*
 * loader_maps.c - the BPF maps user space reads and writes: the targets, the
 * libraries already handled (known_libs), the processes held at a mapping,
 * and BPF's exact counters (stats, per-process books, API calls).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpuleak.skel.h"
#include "holdbook.h"
#include "loader_int.h"
#include "mouth.h"
#include "util/clock.h"
#include "util/log.h"

int tracer__add_target(struct tracer *t, int pid)
{
	__u32 key = pid;
	__u8 one = 1;

	if (bpf_map__update_elem(t->skel->maps.targets, &key, sizeof(key), &one, sizeof(one),
				 BPF_ANY))
		return -errno;
	return 0;
}

__u64 tracer__kernel_dev(dev_t dev)
{
	return ((__u64)major(dev) << 20) | minor(dev);
}

int tracer__lib_handled(struct tracer *t, __u64 kdev, __u64 kino)
{
	struct {
		__u64 dev, ino;
	} key = { kdev, kino };
	__u8 one = 1;

	if (bpf_map__update_elem(t->skel->maps.known_libs, &key, sizeof(key), &one, sizeof(one),
				 BPF_ANY))
		return -errno;
	return 0;
}

int tracer__file_handled(struct tracer *t, dev_t dev, ino_t ino)
{
	return tracer__lib_handled(t, tracer__kernel_dev(dev), ino);
}

void tracer__file_unhandled(struct tracer *t, dev_t dev, ino_t ino)
{
	struct {
		__u64 dev, ino;
	} key = { tracer__kernel_dev(dev), ino };

	bpf_map__delete_elem(t->skel->maps.known_libs, &key, sizeof(key), 0);
}

bool tracer__release(struct tracer *t, int pid)
{
	uint64_t now = now_ns();
	__u32 key = pid, other = 0;

	if (bpf_map__delete_elem(t->skel->maps.held, &key, sizeof(key), 0))
		return false;
	if (!holdbook__let_go(bpf_map__fd(t->skel->maps.hold_book), pid, getpid(),
			      now > t->hold_timeout_ns ? now - t->hold_timeout_ns : 0, &other))
		log_debug("PID %d stays stopped until gpuleak PID %u, which holds it too, has "
			  "attached (or the hold's deadline)",
			  pid, other);
	return true;
}

bool tracer__hold_expired(struct tracer *t, int pid, uint64_t *ns, bool *by_kernel)
{
	__u32 key = pid;
	__u64 v;

	if (bpf_map__lookup_and_delete_elem(t->skel->maps.hold_expired, &key, sizeof(key), &v,
					    sizeof(v), 0))
		return false;
	*ns = v & ~GL_HOLD_BY_KERNEL;
	*by_kernel = v & GL_HOLD_BY_KERNEL;
	return true;
}

int tracer__held_since(struct tracer *t, int pid, uint64_t *ns)
{
	__u32 key = pid;
	__u64 v;

	if (bpf_map__lookup_elem(t->skel->maps.held, &key, sizeof(key), &v, sizeof(v), 0))
		return -errno;
	*ns = v;
	return 0;
}

/* Sums n per-CPU counters of a per-CPU array map into out. */
static int sum_percpu(struct tracer *t, const struct bpf_map *map, uint64_t *out, __u32 n)
{
	uint64_t *vals = calloc(t->ncpus, sizeof(*vals));
	int err = 0;

	if (!vals)
		return -ENOMEM;
	for (__u32 i = 0; i < n; i++) {
		out[i] = 0;
		if (bpf_map__lookup_elem(map, &i, sizeof(i), vals, sizeof(*vals) * t->ncpus, 0)) {
			err = -errno;
			break;
		}
		for (int c = 0; c < t->ncpus; c++)
			out[i] += vals[c];
	}
	free(vals);
	return err;
}

int tracer__stats(struct tracer *t, uint64_t out[GL_NR_STATS])
{
	int err = sum_percpu(t, t->skel->maps.stats, out, GL_NR_STATS);
	struct mouth_stats ms;

	if (err)
		return err;
	/* records the mouth took from the ring and could not keep are lost as the ring's */
	mouth__stats(t->mouth, &ms);
	out[GL_STAT_LOST_STACK] += ms.lost[GL_REC_STACK] + ms.lost[0];
	out[GL_STAT_LOST_CALL] += ms.lost[GL_REC_CALL];
	out[GL_STAT_LOST_PROC] += ms.lost[GL_REC_PROC];
	return 0;
}

int tracer__proc_stats(struct tracer *t, int tgid, struct gl_proc_stats *out)
{
	__u32 key = tgid;

	if (bpf_map__lookup_elem(t->skel->maps.procs, &key, sizeof(key), out, sizeof(*out), 0))
		return -errno;
	return 0;
}

int tracer__map_fd(struct tracer *t, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(t->skel->obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
}

int tracer__forget_proc(struct tracer *t, int tgid, uint64_t start_time)
{
	struct gl_proc_stats st;
	__u32 key = tgid;

	/* a new process may have taken the PID since: leave its books alone */
	if (tracer__proc_stats(t, tgid, &st) || st.start_time != start_time)
		return 0;
	if (bpf_map__delete_elem(t->skel->maps.procs, &key, sizeof(key), 0) && errno != ENOENT)
		return -errno;
	return 0;
}

int tracer__api_calls(struct tracer *t, uint64_t out[GL_NR_APIS])
{
	return sum_percpu(t, t->skel->maps.api_calls, out, GL_NR_APIS);
}

int tracer__prog_times(struct tracer *t, struct tracer_prog_time *out, int max)
{
	struct bpf_program *prog;
	int n = 0;

	bpf_object__for_each_program(prog, t->skel->obj)
	{
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (n == max || fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) ||
		    !info.run_time_ns)
			continue;
		snprintf(out[n].name, sizeof(out[n].name), "%s", bpf_program__name(prog));
		out[n].runs = info.run_cnt;
		out[n].run_ns = info.run_time_ns;
		n++;
	}
	return n;
}

uint64_t tracer__note_py_refused(struct tracer *t)
{
	return ++t->py_refused;
}

uint64_t tracer__py_refused(const struct tracer *t)
{
	return t->py_refused;
}

uint32_t tracer__max_py_procs(const struct tracer *t)
{
	return bpf_map__max_entries(t->skel->maps.py_procs);
}

uint64_t tracer__hold_timeout(const struct tracer *t)
{
	return t->hold_timeout_ns;
}
