// SPDX-License-Identifier: BSD-2-Clause
/*
 * loader_attach.c - attaching the tracer's uprobes: every function of a
 * libcuda through two uprobe_multi links (one perf-event uprobe per function
 * and direction on kernels before 6.6), and PyTorch's allocator probes (USDT,
 * armed and disarmed as the tensor level asks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpuleak.skel.h"
#include "loader_int.h"
#include "probes.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procfs.h"

/* The slot of the library with this identity, or -1. */
static int lib_slot(const struct tracer *t, dev_t dev, ino_t ino)
{
	for (int i = 0; i < t->nr_libs; i++)
		if (t->libs[i].used && t->libs[i].dev == dev && t->libs[i].ino == ino)
			return i;
	return -1;
}

bool tracer__has_lib(const struct tracer *t, dev_t dev, ino_t ino)
{
	return lib_slot(t, dev, ino) >= 0;
}

/* The program attached to entries or returns: the floor's do-nothing ones when benchmarking. */
static struct bpf_program *call_prog(struct tracer *t, bool ret)
{
	if (t->bench_floor)
		return ret ? t->skel->progs.floor_exit : t->skel->progs.floor_enter;
	return ret ? t->skel->progs.call_exit : t->skel->progs.call_enter;
}

static struct bpf_link *attach_one(struct tracer *t, const struct cuda_lib *lib, int slot, int api,
				   bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = GL_COOKIE(api, slot), .retprobe = ret);
	struct bpf_program *prog = call_prog(t, ret);

	return bpf_program__attach_uprobe_opts(prog, -1, lib->path, lib->offsets[api], &opts);
}

/* BPF_LINK_CREATE of a uprobe_multi link: every offset in one call. Returns fd or -errno. */
static int link_uprobe_multi(int prog_fd, const char *path, const uint64_t *offsets,
			     const uint64_t *cookies, uint32_t cnt, bool ret)
{
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u64 path, offsets, ref_ctr_offsets, cookies;
		__u32 cnt, multi_flags, pid, pad;
	} attr = {
		.prog_fd = prog_fd,
		.attach_type = GL_BPF_TRACE_UPROBE_MULTI,
		.path = (uintptr_t)path,
		.offsets = (uintptr_t)offsets,
		.cookies = (uintptr_t)cookies,
		.cnt = cnt,
		.multi_flags = ret ? GL_BPF_F_UPROBE_MULTI_RETURN : 0,
	};
	long fd = syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));

	return fd < 0 ? -errno : (int)fd;
}

static void explain_attach_error(const struct cuda_lib *lib, const char *what, int err)
{
	char msg[PATH_MAX + 128];

	snprintf(msg, sizeof(msg), "failed to attach %s in %s", what, lib->display);
	if (err == -EPERM || err == -EACCES)
		tracer__explain_eperm(msg);
	else
		log_error("%s: %s (run with -vv for libbpf's messages)", msg, strerror(-err));
}

/*
 * All functions at once through two uprobe_multi links. Returns count, or -errno.
 * The return probes go in first (the kernel arms a call's return at its entry, for the
 * return probes there then), and nothing is booked before arm_lib().
 */
static int attach_multi(struct tracer *t, const struct cuda_lib *lib, struct attached_lib *al,
			int slot)
{
	uint64_t offsets[GL_NR_APIS], cookies[GL_NR_APIS];
	uint32_t n = 0;
	int fd;

	for (int api = 0; api < GL_NR_APIS; api++) {
		if (!lib->offsets[api])
			continue;
		offsets[n] = lib->offsets[api];
		cookies[n++] = GL_COOKIE(api, slot);
	}
	if (!n)
		return -ENOENT;
	for (int ret = 1; ret >= 0; ret--) {
		struct bpf_program *prog = call_prog(t, ret);

		fd = link_uprobe_multi(bpf_program__fd(prog), lib->path, offsets, cookies, n, ret);
		if (fd < 0) {
			if (al->multi_fds[1] >= 0)
				close(al->multi_fds[1]);
			al->multi_fds[1] = -1;
			return fd;
		}
		al->multi_fds[ret] = fd;
	}
	al->nr_links = 0;
	return n;
}

/*
 * One perf-event uprobe per function and direction (kernels before 6.6), each return
 * probe before its entry probe, as in attach_multi().
 */
static int attach_perf(struct tracer *t, const struct cuda_lib *lib, struct attached_lib *al,
		       int slot)
{
	int attached = 0, err = 0;

	al->links = calloc(2 * GL_NR_APIS, sizeof(*al->links));
	if (!al->links)
		return -ENOMEM;
	for (int api = 0; api < GL_NR_APIS; api++) {
		struct bpf_link *in, *out;

		if (!lib->offsets[api])
			continue;
		out = attach_one(t, lib, slot, api, true);
		in = out ? attach_one(t, lib, slot, api, false) : NULL;
		if (!in || !out) {
			err = -errno;
			bpf_link__destroy(out);
			explain_attach_error(lib, probe__name(api), err);
			if (err == -EPERM || err == -EACCES)
				return -EPERM;
			continue;
		}
		al->links[al->nr_links++] = in;
		al->links[al->nr_links++] = out;
		attached++;
	}
	return attached ? attached : (err ? err : -ENOENT);
}

/*
 * Every probe of library slot i is in: calls that enter from now on are booked, each
 * with its entry and its return (lib_armed in maps.bpf.h). Those that entered before
 * are from before the attach: their returns count as unpaired.
 */
static int arm_lib(struct tracer *t, __u32 i, __u32 on)
{
	if (bpf_map__update_elem(t->skel->maps.lib_armed, &i, sizeof(i), &on, sizeof(on), BPF_ANY))
		return -errno;
	return 0;
}

int tracer__attach_lib(struct tracer *t, const struct cuda_lib *lib)
{
	struct attached_lib *al;
	int n = -EINVAL, err, slot = 0;

	while (slot < t->nr_libs && t->libs[slot].used)
		slot++;
	if (slot >= MAX_LIBS)
		return -ENOSPC;
	al = &t->libs[slot];
	memset(al, 0, sizeof(*al));
	al->multi_fds[0] = al->multi_fds[1] = -1;
	al->dev = lib->dev;
	al->ino = lib->ino;
	if (!t->no_multi) {
		n = attach_multi(t, lib, al, slot);
		if (n == -EINVAL || n == -EOPNOTSUPP || n == -E2BIG || n == -ENOSYS) {
			log_debug("uprobe_multi links unavailable (%s): one perf event per probe",
				  strerror(-n));
			t->no_multi = true;
			for (int j = 0; j < 2; j++)
				if (al->multi_fds[j] >= 0)
					close(al->multi_fds[j]);
			al->multi_fds[0] = al->multi_fds[1] = -1;
		} else if (n < 0) {
			explain_attach_error(lib, "the uprobes", n);
			return n == -EACCES ? -EPERM : n;
		}
	}
	if (t->no_multi)
		n = attach_perf(t, lib, al, slot);
	err = n >= 0 ? arm_lib(t, slot, 1) : 0;
	if (err) {
		log_error("failed to arm the probes of %s: %s (free memory and run again)",
			  lib->display, strerror(-err));
		n = err;
		for (int j = 0; j < 2; j++)
			if (al->multi_fds[j] >= 0)
				close(al->multi_fds[j]);
	}
	if (n < 0) {
		for (int j = 0; j < al->nr_links; j++)
			bpf_link__destroy(al->links[j]);
		free(al->links);
		return n == -EACCES ? -EPERM : n;
	}
	al->used = true;
	al->nr_funcs = n;
	al->last_seen_ns = now_ns();
	if (slot == t->nr_libs)
		t->nr_libs++;
	t->nr_libs_in_use++;
	t->nr_probes += 2 * n;
	tracer__file_handled(t, lib->dev, lib->ino);
	return n;
}

void tracer__pin_lib(struct tracer *t, dev_t dev, ino_t ino)
{
	int i = lib_slot(t, dev, ino);

	if (i >= 0)
		t->libs[i].pinned = true;
}

/* pid maps slot i's library now: seen, and one of its users. */
static void add_user(struct tracer *t, int i, int pid)
{
	struct attached_lib *al = &t->libs[i];
	uint64_t ticks = 0;

	al->last_seen_ns = now_ns();
	if (pid <= 0 || procfs__start_ticks(pid, &ticks))
		return;
	for (uint32_t u = 0; u < al->nr_users; u++) {
		if (al->users[u].pid == pid) {
			al->users[u].start_ticks = ticks;
			return;
		}
	}
	if (al->nr_users == al->cap_users) {
		uint32_t cap = al->cap_users ? 2 * al->cap_users : 8;
		struct lib_user *u = realloc(al->users, cap * sizeof(*u));

		if (!u) {
			al->pinned = true; /* its users cannot be kept: never let go */
			return;
		}
		al->users = u;
		al->cap_users = cap;
	}
	al->users[al->nr_users++] = (struct lib_user){ pid, ticks };
}

/* Drops slot i's users that are gone; returns how many live. */
static uint32_t live_users(struct tracer *t, int i)
{
	struct attached_lib *al = &t->libs[i];
	uint32_t kept = 0;

	for (uint32_t u = 0; u < al->nr_users; u++) {
		uint64_t ticks;

		if (procfs__start_ticks(al->users[u].pid, &ticks) ||
		    ticks != al->users[u].start_ticks)
			continue;
		al->users[kept++] = al->users[u];
	}
	al->nr_users = kept;
	return kept;
}

void tracer__lib_seen(struct tracer *t, dev_t dev, ino_t ino, int pid)
{
	int i = lib_slot(t, dev, ino);

	if (i >= 0)
		add_user(t, i, pid);
}

void tracer__lib_mapped(struct tracer *t, __u64 kdev, __u64 kino, int pid)
{
	for (int i = 0; i < t->nr_libs; i++)
		if (t->libs[i].used && tracer__kernel_dev(t->libs[i].dev) == kdev &&
		    t->libs[i].ino == kino)
			add_user(t, i, pid);
}

/* Takes slot i's probes out and frees the slot: no process maps its library. */
static void detach_slot(struct tracer *t, int i)
{
	struct attached_lib *al = &t->libs[i];

	arm_lib(t, i, 0); /* nothing is booked from the slot until it is reused */
	for (int j = 0; j < al->nr_links; j++)
		bpf_link__destroy(al->links[j]);
	free(al->links);
	for (int j = 0; j < 2; j++)
		if (al->multi_fds[j] >= 0)
			close(al->multi_fds[j]);
	t->nr_probes -= 2 * al->nr_funcs;
	free(al->users);
	memset(al, 0, sizeof(*al));
	al->multi_fds[0] = al->multi_fds[1] = -1;
	t->nr_libs_in_use--;
}

int tracer__detach_unused(struct tracer *t, uint64_t since_ns)
{
	bool stale[MAX_LIBS] = {};
	int n = 0;

	/* a mapping from now on is held (the file is not handled any more), and one made
	 * before is in the ring: read to where it stands, its record marks the file seen */
	for (int i = 0; i < t->nr_libs; i++) {
		struct attached_lib *al = &t->libs[i];

		stale[i] = al->used && !al->pinned && al->last_seen_ns < since_ns &&
			   !live_users(t, i);
		if (stale[i])
			tracer__file_unhandled(t, al->dev, al->ino);
	}
	tracer__drain(t);
	for (int i = 0; i < t->nr_libs; i++) {
		if (!stale[i])
			continue;
		if (t->libs[i].last_seen_ns >= since_ns || live_users(t, i)) {
			tracer__file_handled(t, t->libs[i].dev, t->libs[i].ino);
			continue;
		}
		detach_slot(t, i);
		n++;
	}
	return n;
}

bool tracer__has_torch(const struct tracer *t, dev_t dev, ino_t ino)
{
	for (int i = 0; i < t->nr_torch; i++)
		if (t->torch[i].dev == dev && t->torch[i].ino == ino)
			return true;
	return false;
}

/*
 * Attaches (on) or detaches one allocator probe of tl into *link: in every
 * process (pid -1) or in pid alone. Returns 0 or -errno.
 */
static int torch_link(struct tracer *t, struct torch_lib *tl, struct bpf_link **link, int pid,
		      int which, bool on)
{
	static const char *const names[2] = { "malloc", "free" };
	struct bpf_program *prog;

	if (!on) {
		/* the link's last reference: the uprobe and its semaphore count go */
		bpf_link__destroy(*link);
		*link = NULL;
		return 0;
	}
	if (*link)
		return 0;
	if (t->bench_floor)
		prog = which ? t->skel->progs.floor_torch_free : t->skel->progs.floor_torch_malloc;
	else
		prog = which ? t->skel->progs.torch_free : t->skel->progs.torch_malloc;
	/*
	 * libbpf reads the .note.stapsdt notes and raises the semaphores. With a
	 * pid, the uprobes are that process's only: the kernel plants their
	 * breakpoints and counts their semaphores in its address space alone. The
	 * path needs no resolving in pid's maps (BPF cookies name the spec), so
	 * a library reached through another process's /proc entries serves.
	 */
	*link = bpf_program__attach_usdt(prog, pid, tl->path, "pytorch", names[which], NULL);
	if (!*link) {
		int err = -errno;

		return err == -EACCES ? -EPERM : err;
	}
	return 0;
}

/*
 * Both probes of tl (in pid, or in every process with -1) set as wanted. The
 * free probe goes on before the malloc probe and off after it: a block whose
 * malloc was seen always has its free seen too, where the other order would
 * book the blocks freed between the two attaches as outstanding. A free of a
 * block allocated before is only an unmatched free. Returns 0 or the first
 * -errno.
 */
static int torch_links(struct tracer *t, struct torch_lib *tl, struct bpf_link **links, int pid,
		       bool malloc_on, bool free_on)
{
	int first = malloc_on ? 1 : 0;
	int e0 = torch_link(t, tl, &links[first], pid, first, first ? free_on : malloc_on);
	int e1 = torch_link(t, tl, &links[!first], pid, !first, first ? malloc_on : free_on);

	return e0 ?: e1;
}

/* The links of a process's probes as it wants them. Returns 0 or the first -errno. */
static int torch_pid_link(struct tracer *t, struct torch_pid *tp)
{
	return torch_links(t, &t->torch[tp->lib], tp->links, tp->pid, tp->armed[0], tp->armed[1]);
}

int tracer__attach_torch(struct tracer *t, const char *path, dev_t dev, ino_t ino)
{
	bool probe_only = !t->torch_armed[0] && !t->torch_armed[1];
	struct torch_lib *tl;
	int err = 0, n;

	if (t->nr_torch >= MAX_LIBS)
		return -ENOSPC;
	tl = &t->torch[t->nr_torch];
	memset(tl, 0, sizeof(*tl));
	tl->dev = dev;
	tl->ino = ino;
	n = snprintf(tl->path, sizeof(tl->path), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(tl->path))
		return -ENAMETOOLONG;
	/* disarmed: attach once all the same, so that a library without the probes
	 * (or without the permission) is known now, then detach */
	err = torch_links(t, tl, tl->links, -1, probe_only || t->torch_armed[0],
			  probe_only || t->torch_armed[1]);
	if (err || probe_only)
		torch_links(t, tl, tl->links, -1, false, false);
	if (err)
		return err;
	t->nr_torch++;
	t->nr_probes += 2;
	tracer__file_handled(t, dev, ino);
	return 0;
}

int tracer__arm_torch(struct tracer *t, bool malloc_on, bool free_on)
{
	int err = 0;

	t->torch_armed[0] = malloc_on;
	t->torch_armed[1] = free_on;
	for (int i = 0; i < t->nr_torch; i++) {
		int e = torch_links(t, &t->torch[i], t->torch[i].links, -1, malloc_on, free_on);

		err = err ?: e;
	}
	return err;
}

static struct torch_pid *find_pid(struct tracer *t, int pid)
{
	for (int p = 0; p < t->nr_torch_pids; p++)
		if (t->torch_pids[p].pid == pid)
			return &t->torch_pids[p];
	return NULL;
}

void tracer__torch_found(struct tracer *t, int pid, dev_t dev, ino_t ino)
{
	struct torch_pid *tp;
	int lib = -1, err;

	for (int i = 0; i < t->nr_torch; i++)
		if (t->torch[i].dev == dev && t->torch[i].ino == ino)
			lib = i;
	if (!t->torch_per_pid || pid <= 0 || lib < 0 || find_pid(t, pid))
		return;
	if (t->nr_torch_pids == t->cap_torch_pids) {
		int cap = t->cap_torch_pids ? 2 * t->cap_torch_pids : 16;
		struct torch_pid *np = realloc(t->torch_pids, cap * sizeof(*np));
		uint64_t *nf = np ? realloc(t->torch_found_ns, cap * sizeof(*nf)) : NULL;

		if (np)
			t->torch_pids = np;
		if (!np || !nf) {
			log_warn("out of memory: PID %d's tensor blocks are not traced", pid);
			return;
		}
		t->torch_found_ns = nf;
		t->cap_torch_pids = cap;
	}
	tp = &t->torch_pids[t->nr_torch_pids];
	memset(tp, 0, sizeof(*tp));
	tp->pid = pid;
	tp->lib = lib;
	tp->armed[0] = tp->armed[1] = true; /* its first window, from now */
	t->torch_found_ns[t->nr_torch_pids++] = now_ns();
	err = torch_pid_link(t, tp);
	if (err)
		log_warn("failed to attach PyTorch's allocator probes for PID %d: %s", pid,
			 strerror(-err));
}

bool tracer__torch_next_found(struct tracer *t, int *pid, uint64_t *found_ns)
{
	if (t->torch_found_next >= t->nr_torch_pids)
		return false;
	*pid = t->torch_pids[t->torch_found_next].pid;
	*found_ns = t->torch_found_ns[t->torch_found_next++];
	return true;
}

int tracer__arm_torch_pid(struct tracer *t, int pid, bool malloc_on, bool free_on)
{
	struct torch_pid *tp = find_pid(t, pid);

	if (!tp)
		return 0; /* no PyTorch library of its own known: nothing to attach */
	tp->armed[0] = malloc_on;
	tp->armed[1] = free_on;
	return torch_pid_link(t, tp);
}

void tracer__torch_forget_pid(struct tracer *t, int pid)
{
	struct torch_pid *tp = find_pid(t, pid);
	int p;

	if (!tp)
		return;
	tracer__arm_torch_pid(t, pid, false, false);
	p = (int)(tp - t->torch_pids);
	/* keep the entries not yet taken by next_found after those taken */
	if (p < t->torch_found_next)
		t->torch_found_next--;
	memmove(tp, tp + 1, (t->nr_torch_pids - p - 1) * sizeof(*tp));
	memmove(&t->torch_found_ns[p], &t->torch_found_ns[p + 1],
		(t->nr_torch_pids - p - 1) * sizeof(*t->torch_found_ns));
	t->nr_torch_pids--;
}
