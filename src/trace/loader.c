// SPDX-License-Identifier: BSD-2-Clause
/*
 * loader.c - owns the BPF skeleton, the probe links and the ring buffer.
 *
 * Lifecycle: open the skeleton, configure (rodata settings, map sizes), load
 * (the kernel verifies the programs), attach (scheduler tracepoints now;
 * uprobes per libcuda as libraries are found). Links close with the tracer's
 * file descriptors, so a crashed tracer leaves no probes behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpuleak.skel.h"
#include "loader.h"
#include "probes.h"
#include "util/log.h"

#define MAX_LIBS 64
/* In a stream of records, BPF wakes the consumer once a millisecond or once 1/8 of the
 * ring, at most this much, is waiting (maps.bpf.h, rb_flags()). */
#define WAKEUP_BYTES (256 << 10)

/* UAPI values of kernel 6.6+, absent from older headers. */
#define GL_BPF_TRACE_UPROBE_MULTI 48
#define GL_BPF_F_UPROBE_MULTI_RETURN 1

struct attached_lib {
	dev_t dev;
	ino_t ino;
	int nr_links;
	struct bpf_link **links; /* perf-event uprobes, one per probe */
	int multi_fds[2];	 /* uprobe_multi links: entries, returns (-1 if none) */
};

struct torch_lib {
	dev_t dev;
	ino_t ino;
	struct bpf_link *links[2]; /* pytorch:malloc, pytorch:free; NULL while disarmed */
	char path[PATH_MAX];
};

struct tracer {
	struct gpuleak *skel;
	pid_t guard;  /* releases held processes if the tracer dies; 0 if none */
	int guard_fd; /* the guard sees EOF on its end of this pipe when we are gone */
	struct torch_lib torch[MAX_LIBS];
	int nr_torch;
	struct ring_buffer *rb;
	tracer_record_fn fn;
	void *fn_ctx;
	struct attached_lib libs[MAX_LIBS];
	int nr_libs;
	int nr_probes;
	int ncpus;
	bool no_multi; /* the kernel has no uprobe_multi links: one perf event per probe */
	bool bench_floor;
	bool torch_armed[2];		       /* pytorch:malloc, pytorch:free wanted attached */
	uint64_t stack_recs, stack_ring_bytes; /* stack records read and the ring bytes they took */
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if ((level == LIBBPF_DEBUG && log_level < LOG_TRACE) ||
	    (level == LIBBPF_INFO && log_level < LOG_DEBUG) ||
	    (level == LIBBPF_WARN && log_level < LOG_DEBUG))
		return 0;
	fputs("gpuleak: libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

static bool has_cap(int cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}

void tracer__explain_eperm(const char *what)
{
	bool admin = has_cap(CAP_SYS_ADMIN), bpf = has_cap(39 /* CAP_BPF */),
	     perfmon = has_cap(38 /* CAP_PERFMON */);

	if (!admin && !(bpf && perfmon))
		log_error("%s: Operation not permitted (needs CAP_BPF and CAP_PERFMON, or "
			  "CAP_SYS_ADMIN; missing:%s%s%s)",
			  what, bpf ? "" : " CAP_BPF", perfmon ? "" : " CAP_PERFMON",
			  admin ? "" : " CAP_SYS_ADMIN");
	else if (!admin)
		log_error("%s: Operation not permitted (needs CAP_SYS_ADMIN: kernels with the "
			  "CVE-2025-38466 fix require it for uprobes)",
			  what);
	else
		log_error("%s: refused with the capabilities present: the kernel's verifier "
			  "rejected a program (-vv shows its log), or a security module or "
			  "kernel.perf_event_paranoid / unprivileged_bpf_disabled refuses it",
			  what);
}

static int on_record(void *ctx, void *data, size_t size)
{
	const struct gl_hdr *h = data;
	struct tracer *t = ctx;

	if (size >= sizeof(*h) && h->type == GL_REC_STACK) {
		t->stack_recs++;
		t->stack_ring_bytes += size;
	}
	/* a stack record read straight into its reservation: the rest is slack */
	if (size >= sizeof(*h) && h->type == GL_REC_STACK && h->size >= sizeof(*h) &&
	    h->size < size)
		size = h->size;
	return t->fn(t->fn_ctx, data, size);
}

static int configure(struct tracer *t, const struct tracer_opts *o)
{
	struct gpuleak *s = t->skel;
	int err;

	s->rodata->targ_all = o->all;
	s->rodata->targ_follow_forks = o->follow_forks;
	s->rodata->targ_stack_mode = o->stack_mode;
	s->rodata->targ_stack_bytes = o->stack_bytes;
	s->rodata->targ_python = o->python;
	s->rodata->targ_torch_python_only = o->torch_python_only;
	s->rodata->targ_hold = !o->no_hold;
	s->rodata->targ_self = getpid();
	s->rodata->targ_stack_cache = o->stack_cache;
	s->rodata->targ_sample_bytes = o->sample_bytes;
	for (int i = 0; o->sample_bytes && i < GL_SAMPLE_EXP_N; i++)
		s->rodata->targ_sample_exp[i] =
			(__u64)(o->sample_bytes * -log((i + 0.5) / GL_SAMPLE_EXP_N)) + 1;
	s->rodata->targ_wakeup_bytes = o->ringbuf_bytes / 8;
	if (s->rodata->targ_wakeup_bytes > WAKEUP_BYTES)
		s->rodata->targ_wakeup_bytes = WAKEUP_BYTES;
	/* uprobe_multi links attach and detach all functions at once (kernel 6.6+);
	 * older kernels ignore the type and take the per-probe perf events instead */
	bpf_program__set_expected_attach_type(s->progs.call_enter, GL_BPF_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(s->progs.call_exit, GL_BPF_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(s->progs.floor_enter, GL_BPF_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(s->progs.floor_exit, GL_BPF_TRACE_UPROBE_MULTI);
	t->ncpus = libbpf_num_possible_cpus();
	if (t->ncpus <= 0)
		return -EINVAL;
	err = bpf_map__set_max_entries(s->maps.scratch, t->ncpus);
	err = err ?: bpf_map__set_max_entries(s->maps.events, o->ringbuf_bytes);
	err = err ?: bpf_map__set_max_entries(s->maps.allocs, o->max_allocs);
	err = err ?: bpf_map__set_max_entries(s->maps.procs, o->max_procs);
	err = err ?: bpf_map__set_max_entries(s->maps.targets, o->max_procs);
	err = err ?: bpf_map__set_max_entries(s->maps.held, o->max_held ? o->max_held : 4096);
	return err;
}

/* Opens the embedded object, configures it and loads it (the verifier checks every program). */
static int open_and_load(struct tracer *t, const struct tracer_opts *opts)
{
	int err;

	t->skel = gpuleak__open();
	if (!t->skel) {
		err = -errno;
		log_error("failed to open the BPF object: %s (free memory and run again)",
			  strerror(-err));
		return err;
	}
	err = configure(t, opts);
	if (err) {
		log_error("failed to configure the BPF object: %s (lower --max-allocs, "
			  "--max-procs or --ringbuf-size)",
			  strerror(-err));
		return err;
	}
	return gpuleak__load(t->skel);
}

/*
 * Ends holding: key 0 in the held map tells BPF to hold no more processes
 * (its programs may run a little after the tracer is gone), then SIGCONT to
 * every process held, each once (its entry is taken first). A full map makes
 * room for key 0 by releasing one first.
 */
static void release_all(int held_fd)
{
	__u32 key = 0, next;
	__u64 zero = 0;
	bool first = true;

	while (bpf_map_update_elem(held_fd, &key, &zero, BPF_ANY) &&
	       !bpf_map_get_next_key(held_fd, NULL, &next))
		if (next && !bpf_map_delete_elem(held_fd, &next))
			kill(next, SIGCONT);
	while (!bpf_map_get_next_key(held_fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (key && !bpf_map_delete_elem(held_fd, &key))
			kill(key, SIGCONT);
	}
}

/*
 * A small child that outlives a tracer killed with SIGKILL or crashed: when
 * the pipe's last writer (this process) is gone, it releases every process
 * still held, so that none stays stopped. Returns 0 or -errno.
 */
static int start_guard(struct tracer *t)
{
	int pfd[2], held_fd = bpf_map__fd(t->skel->maps.held);
	char c;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	t->guard = fork();
	if (t->guard < 0) {
		t->guard = 0;
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (t->guard == 0) {
		/* keep only the pipe and the map: the links must close with the tracer
		 * (both moved above 4 first, so that neither dup2 closes the other) */
		int rd = fcntl(pfd[0], F_DUPFD, 10), map = fcntl(held_fd, F_DUPFD, 10);

		if (rd < 0 || map < 0 || dup2(rd, 3) < 0 || dup2(map, 4) < 0)
			_exit(1);
		syscall(SYS_close_range, 5, ~0U, 0);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		prctl(PR_SET_NAME, "gpuleak-guard");
		while (read(3, &c, 1) < 0 && errno == EINTR)
			;
		release_all(4);
		_exit(0);
	}
	close(pfd[0]);
	t->guard_fd = pfd[1];
	return 0;
}

struct tracer *tracer__new(const struct tracer_opts *opts, tracer_record_fn fn, void *ctx)
{
	struct tracer *t = calloc(1, sizeof(*t));
	int err = 0;

	if (!t)
		return NULL;
	t->fn = fn;
	t->fn_ctx = ctx;
	t->guard_fd = -1;
	t->bench_floor = opts->bench_floor;
	t->torch_armed[0] = t->torch_armed[1] = true;
	libbpf_set_print(libbpf_log);
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		log_error(
			"this kernel has no BTF (/sys/kernel/btf/vmlinux); gpuleak needs a kernel "
			"built with CONFIG_DEBUG_INFO_BTF=y");
		err = -ENOTSUP;
		goto cleanup;
	}

	err = open_and_load(t, opts);
	if (err) {
		if (err == -EPERM || err == -EACCES)
			tracer__explain_eperm("failed to load the BPF programs");
		else
			log_error("failed to load the BPF programs: %s (run with -vv for the "
				  "verifier's log)",
				  strerror(-err));
		goto cleanup;
	}
	/* attach: process lifecycle tracepoints; uprobes come per library */
	err = gpuleak__attach(t->skel);
	if (err) {
		if (err == -EPERM || err == -EACCES)
			tracer__explain_eperm("failed to attach the scheduler tracepoints");
		else
			log_error("failed to attach the scheduler tracepoints: %s (is tracefs "
				  "mounted? mount -t tracefs none /sys/kernel/tracing)",
				  strerror(-err));
		goto cleanup;
	}
	if (!opts->no_hold && (err = start_guard(t))) {
		log_error("failed to start the process that releases held processes: %s",
			  strerror(-err));
		goto cleanup;
	}
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_record, t, NULL);
	if (!t->rb) {
		err = -errno;
		log_error("failed to open the ring buffer: %s (lower --ringbuf-size)",
			  strerror(-err));
		goto cleanup;
	}
	return t;
cleanup:
	tracer__free(t);
	errno = err == -EACCES ? EPERM : -err;
	return NULL;
}

void tracer__free(struct tracer *t)
{
	if (!t)
		return;
	ring_buffer__free(t->rb);
	if (t->skel)
		release_all(bpf_map__fd(t->skel->maps.held));
	if (t->guard_fd >= 0)
		close(t->guard_fd);
	if (t->guard > 0)
		waitpid(t->guard, NULL, 0);
	for (int i = 0; i < t->nr_libs; i++) {
		for (int j = 0; j < t->libs[i].nr_links; j++)
			bpf_link__destroy(t->libs[i].links[j]);
		free(t->libs[i].links);
		for (int j = 0; j < 2; j++)
			if (t->libs[i].multi_fds[j] >= 0)
				close(t->libs[i].multi_fds[j]);
	}
	for (int i = 0; i < t->nr_torch; i++)
		for (int j = 0; j < 2; j++)
			bpf_link__destroy(t->torch[i].links[j]);
	gpuleak__destroy(t->skel);
	free(t);
}

int tracer__add_target(struct tracer *t, int pid)
{
	__u32 key = pid;
	__u8 one = 1;

	if (bpf_map__update_elem(t->skel->maps.targets, &key, sizeof(key), &one, sizeof(one),
				 BPF_ANY))
		return -errno;
	return 0;
}

int tracer__remove_target(struct tracer *t, int pid)
{
	__u32 key = pid;

	if (bpf_map__delete_elem(t->skel->maps.targets, &key, sizeof(key), 0) && errno != ENOENT)
		return -errno;
	return 0;
}

bool tracer__has_lib(const struct tracer *t, dev_t dev, ino_t ino)
{
	for (int i = 0; i < t->nr_libs; i++)
		if (t->libs[i].dev == dev && t->libs[i].ino == ino)
			return true;
	return false;
}

/* The program attached to entries or returns: the floor's do-nothing ones when benchmarking. */
static struct bpf_program *call_prog(struct tracer *t, bool ret)
{
	if (t->bench_floor)
		return ret ? t->skel->progs.floor_exit : t->skel->progs.floor_enter;
	return ret ? t->skel->progs.call_exit : t->skel->progs.call_enter;
}

static struct bpf_link *attach_one(struct tracer *t, const struct cuda_lib *lib, int api, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = api, .retprobe = ret);
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

/* All functions at once through two uprobe_multi links. Returns count, or -errno. */
static int attach_multi(struct tracer *t, const struct cuda_lib *lib, struct attached_lib *al)
{
	uint64_t offsets[GL_NR_APIS], cookies[GL_NR_APIS];
	uint32_t n = 0;
	int fd;

	for (int api = 0; api < GL_NR_APIS; api++) {
		if (!lib->offsets[api])
			continue;
		offsets[n] = lib->offsets[api];
		cookies[n++] = api;
	}
	if (!n)
		return -ENOENT;
	for (int ret = 0; ret < 2; ret++) {
		struct bpf_program *prog = call_prog(t, ret);

		fd = link_uprobe_multi(bpf_program__fd(prog), lib->path, offsets, cookies, n, ret);
		if (fd < 0)
			return fd;
		al->multi_fds[ret] = fd;
	}
	al->nr_links = 0;
	return n;
}

/* One perf-event uprobe per function and direction (kernels before 6.6). */
static int attach_perf(struct tracer *t, const struct cuda_lib *lib, struct attached_lib *al)
{
	int attached = 0, err = 0;

	al->links = calloc(2 * GL_NR_APIS, sizeof(*al->links));
	if (!al->links)
		return -ENOMEM;
	for (int api = 0; api < GL_NR_APIS; api++) {
		struct bpf_link *in, *out;

		if (!lib->offsets[api])
			continue;
		in = attach_one(t, lib, api, false);
		out = in ? attach_one(t, lib, api, true) : NULL;
		if (!in || !out) {
			err = -errno;
			bpf_link__destroy(in);
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

int tracer__attach_lib(struct tracer *t, const struct cuda_lib *lib)
{
	struct attached_lib *al;
	int n = -EINVAL;

	if (t->nr_libs >= MAX_LIBS)
		return -ENOSPC;
	al = &t->libs[t->nr_libs];
	memset(al, 0, sizeof(*al));
	al->multi_fds[0] = al->multi_fds[1] = -1;
	al->dev = lib->dev;
	al->ino = lib->ino;
	if (!t->no_multi) {
		n = attach_multi(t, lib, al);
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
		n = attach_perf(t, lib, al);
	if (n < 0) {
		for (int j = 0; j < al->nr_links; j++)
			bpf_link__destroy(al->links[j]);
		free(al->links);
		return n == -EACCES ? -EPERM : n;
	}
	t->nr_libs++;
	t->nr_probes += 2 * n;
	tracer__file_handled(t, lib->dev, lib->ino);
	return n;
}

/* The kernel's dev_t (s_dev) of a dev_t as stat() gives it. */
static __u64 kernel_dev(dev_t dev)
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
	return tracer__lib_handled(t, kernel_dev(dev), ino);
}

bool tracer__release(struct tracer *t, int pid)
{
	__u32 key = pid;

	if (bpf_map__delete_elem(t->skel->maps.held, &key, sizeof(key), 0))
		return false;
	kill(pid, SIGCONT);
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

bool tracer__has_torch(const struct tracer *t, dev_t dev, ino_t ino)
{
	for (int i = 0; i < t->nr_torch; i++)
		if (t->torch[i].dev == dev && t->torch[i].ino == ino)
			return true;
	return false;
}

/* Attaches (on) or detaches one allocator probe of tl. Returns 0 or -errno. */
static int torch_link(struct tracer *t, struct torch_lib *tl, int which, bool on)
{
	static const char *const names[2] = { "malloc", "free" };
	struct bpf_program *prog;

	if (!on) {
		/* the link's last reference: the uprobe and its semaphore count go */
		bpf_link__destroy(tl->links[which]);
		tl->links[which] = NULL;
		return 0;
	}
	if (tl->links[which])
		return 0;
	if (t->bench_floor)
		prog = which ? t->skel->progs.floor_torch_free : t->skel->progs.floor_torch_malloc;
	else
		prog = which ? t->skel->progs.torch_free : t->skel->progs.torch_malloc;
	/* libbpf reads the .note.stapsdt notes and raises the semaphores */
	tl->links[which] =
		bpf_program__attach_usdt(prog, -1, tl->path, "pytorch", names[which], NULL);
	if (!tl->links[which]) {
		int err = -errno;

		return err == -EACCES ? -EPERM : err;
	}
	return 0;
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
	for (int i = 0; i < 2 && !err; i++)
		err = torch_link(t, tl, i, probe_only || t->torch_armed[i]);
	if (err || probe_only) {
		torch_link(t, tl, 0, false);
		torch_link(t, tl, 1, false);
	}
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
		int e0 = torch_link(t, &t->torch[i], 0, malloc_on);
		int e1 = torch_link(t, &t->torch[i], 1, free_on);

		err = err ?: e0 ?: e1;
	}
	return err;
}

int tracer__forget_tensors(struct tracer *t, uint64_t *forgotten)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	int err;

	err = bpf_prog_test_run_opts(bpf_program__fd(t->skel->progs.forget_tensors), &opts);
	if (err)
		return -errno;
	if (forgotten)
		*forgotten = t->skel->bss->tiers_forgotten;
	return 0;
}

int tracer__nr_probes(const struct tracer *t)
{
	return t->nr_probes;
}

bool tracer__uses_multi_links(const struct tracer *t)
{
	return !t->no_multi;
}

int tracer__nr_libs(const struct tracer *t)
{
	return t->nr_libs;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n = ring_buffer__poll(t->rb, timeout_ms);

	/* records below the wakeup threshold raise no event: take them at each timeout */
	if (n == 0)
		n = ring_buffer__consume(t->rb);
	return n == -EINTR ? 0 : n;
}

int tracer__drain(struct tracer *t)
{
	int n = ring_buffer__consume(t->rb);

	return n == -EINTR ? 0 : n;
}

int tracer__epoll_fd(struct tracer *t)
{
	return ring_buffer__epoll_fd(t->rb);
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
	return sum_percpu(t, t->skel->maps.stats, out, GL_NR_STATS);
}

int tracer__proc_stats(struct tracer *t, int tgid, struct gl_proc_stats *out)
{
	__u32 key = tgid;

	if (bpf_map__lookup_elem(t->skel->maps.procs, &key, sizeof(key), out, sizeof(*out), 0))
		return -errno;
	return 0;
}

uint64_t tracer__ring_stacks(const struct tracer *t, uint64_t *bytes)
{
	*bytes = t->stack_ring_bytes;
	return t->stack_recs;
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
