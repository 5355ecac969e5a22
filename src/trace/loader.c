// SPDX-License-Identifier: BSD-2-Clause
/*
 * loader.c - owns the BPF skeleton, the probe links and the ring buffer.
 *
 * Lifecycle: open the skeleton, configure (rodata settings, map sizes), load
 * (the kernel verifies the programs), attach (scheduler tracepoints now;
 * uprobes per libcuda as libraries are found). Links close with the tracer's
 * file descriptors, so a crashed tracer leaves no probes behind. Attaching
 * uprobes is in loader_attach.c, the maps user space reads and writes in
 * loader_maps.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <linux/capability.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gpuleak.skel.h"
#include "holdbook.h"
#include "loader_int.h"
#include "event.h"
#include "mouth.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procfs.h"

/* In a stream of records, BPF wakes the consumer once a millisecond or once 1/8 of the
 * ring, at most this much, is waiting (maps.bpf.h, rb_flags()). */
#define WAKEUP_BYTES (256 << 10)

/*
 * Records waiting to be read beyond the kernel's ring wait in the mouth's backlog
 * (mouth.h), up to BACKLOG_BYTES or this many rings' worth, whichever is more.
 */
#define BACKLOG_RINGS 4
#define BACKLOG_BYTES (64ULL << 20)

/* The guard looks at the holds this often (ms). */
#define GUARD_TICK_MS 50

/*
 * libbpf reads a ring for as long as records keep coming: a consumer slower than the
 * programs that write (many threads allocating without a pause, a slow build) would read
 * until they stop, and signals, summaries and HTTP requests would wait as long. A poll
 * reads for this long at most, looking at the clock every BUDGET_CHECK records.
 */
#define POLL_BUDGET_NS (50 * 1000000ULL)
#define BUDGET_CHECK 256
/*
 * A drain reads to where the programs had written when it began. While tracing, for
 * this long at most: a load that writes faster than gpuleak reads can leave a ring's
 * worth waiting, seconds of reading; the snapshot built after it says how much it left
 * unread. A record still being written (between its reservation and its commit: the
 * program that writes it was preempted) stops libbpf's read: the drain waits for it as
 * long at most. Once tracing stopped, it reads until the ring is empty, at most this many
 * rounds: the calls in flight still write, exits and execs too.
 */
#define DRAIN_BUDGET_NS (1000 * 1000000ULL)
#define STOPPED_ROUNDS 64
/* tracer__stop's wait for the programs running at the stop, where the kernel cannot wait */
#define STOP_SETTLE_US 20000

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

/* The ring's end: where the programs have written to. */
static unsigned long ring_end(const struct tracer *t)
{
	return __atomic_load_n(t->ring_prod, __ATOMIC_ACQUIRE);
}

static unsigned long ring_read(const struct tracer *t);

/* Whether every record below pos has been read. */
static bool read_past(const struct tracer *t, unsigned long pos)
{
	return ring_read(t) >= pos;
}

/*
 * The records committed before now lie below the ring's end as read after it: *at_ns
 * is taken first.
 */
static unsigned long ring_end_at(const struct tracer *t, uint64_t *at_ns)
{
	*at_ns = now_ns();
	return ring_end(t);
}

static void read_until(struct tracer *t, uint64_t at_ns)
{
	if (at_ns > t->read_ns)
		t->read_ns = at_ns;
}

/* A stack record read straight into its reservation: the rest is slack, not copied. */
static uint32_t record_bytes(const void *data, uint32_t size)
{
	const struct gl_hdr *h = data;

	if (size >= sizeof(*h) && h->type == GL_REC_STACK && h->size >= sizeof(*h) &&
	    h->size < size)
		return h->size;
	return size;
}

/* The position below which every record has been read (handed to t->fn). */
static unsigned long ring_read(const struct tracer *t)
{
	return mouth__taken(t->mouth);
}

/* Whether the budget of this read is spent (looked at every BUDGET_CHECK records). */
static bool budget_spent(struct tracer *t)
{
	if (!t->budget_ns || ++t->since_clock < BUDGET_CHECK)
		return false;
	t->since_clock = 0;
	if (!t->budget_end_ns) {
		t->budget_end_ns = now_ns() + t->budget_ns;
		return false;
	}
	if (now_ns() < t->budget_end_ns)
		return false;
	t->yielded = true;
	return true;
}

/*
 * Hands the backlog's records to t->fn in order, until the one that ends at or past
 * until (0: all of them), or the budget is spent; the records read, or t->fn's error.
 */
static int read_backlog(struct tracer *t, unsigned long until)
{
	const struct mouth_rec *r;
	int n = 0;

	while ((r = mouth__peek(t->mouth))) {
		const struct gl_hdr *h = (const void *)r->data;
		struct event ev;
		bool last = until && r->end >= until;
		int err;

		if (r->size >= sizeof(*h) && h->type == GL_REC_STACK) {
			t->stack_recs++;
			t->stack_ring_bytes += r->ring_size;
		}
		ev.type = -EINVAL;
		ev.hdr = (const void *)r->data;
		event__decode(r->data, r->size, &ev);
		err = t->fn(t->fn_ctx, &ev);
		mouth__pop(t->mouth);
		if (err)
			return err;
		n++;
		if (last || budget_spent(t))
			break;
	}
	return n;
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
	s->rodata->targ_hold_timeout_ns = o->hold_timeout_ns ? o->hold_timeout_ns :
							       GL_HOLD_TIMEOUT_NS;
	procfs__start_ticks(getpid(), (uint64_t *)&s->rodata->targ_self_ticks);
	s->rodata->targ_stack_cache = o->stack_cache;
	s->rodata->targ_stop_on_oom = o->stop_on_oom;
	s->rodata->targ_rank_env = o->rank_env;
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
	err = err   ?:
		      bpf_map__set_max_entries(s->maps.py_procs,
					       o->max_py_procs ? o->max_py_procs : 4096);
	err = err   ?:
		      bpf_map__set_max_entries(s->maps.hold_expired,
					       o->max_held ? o->max_held : 4096);
	return err;
}

/* Opens the embedded object, configures it and loads it (the verifier checks every program). */
static int open_and_load(struct tracer *t, const struct tracer_opts *opts)
{
	int err, book;

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
	/* the book of holds another gpuleak pinned, or this one's, pinned for the next */
	book = opts->no_hold ? -1 : holdbook__open_shared();
	if (book >= 0) {
		err = bpf_map__reuse_fd(t->skel->maps.hold_book, book);
		close(book);
		if (err)
			log_warn("cannot share the book of holds at %s: %s", GL_HOLD_BOOK_PIN,
				 strerror(-err));
	}
	err = gpuleak__load(t->skel);
	if (!err && book == -ENOENT)
		holdbook__share(bpf_map__fd(t->skel->maps.hold_book));
	return err;
}

/* What the guard works with: its maps (held, hold_expired, hold_book) and the tracer's PID. */
struct guard_fds {
	int held, expired, book;
	__u32 self;
};

/*
 * Ends holding: key 0 in the held map tells BPF to hold no more processes
 * (its programs may run a little after the tracer is gone), then SIGCONT to
 * every process held, each once (its entry is taken first). A full map makes
 * room for key 0 by releasing one first.
 */
static void release_all(const struct guard_fds *g, uint64_t expired_before)
{
	__u32 key = 0, next;
	__u64 zero = 0;
	bool first = true;

	while (bpf_map_update_elem(g->held, &key, &zero, BPF_ANY) &&
	       !bpf_map_get_next_key(g->held, NULL, &next))
		if (next && !bpf_map_delete_elem(g->held, &next))
			holdbook__let_go(g->book, next, g->self, expired_before, NULL);
	while (!bpf_map_get_next_key(g->held, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (key && !bpf_map_delete_elem(g->held, &key))
			holdbook__let_go(g->book, key, g->self, expired_before, NULL);
	}
}

/*
 * Releases every process held since before deadline ns (bpf_ktime_get_ns): each
 * entry is taken out of held first, so that a release by user space at the same
 * moment sends SIGCONT once, then put in hold_expired for user space to name.
 */
static void release_overdue(const struct guard_fds *g, uint64_t deadline)
{
	__u32 key = 0, next;
	__u64 since;
	bool first = true;

	while (!bpf_map_get_next_key(g->held, first ? NULL : &key, &next)) {
		struct gl_hold_key mine = { .tgid = next, .agent = g->self };

		first = false;
		key = next;
		if (!key || bpf_map_lookup_elem(g->held, &key, &since) || since > deadline)
			continue;
		if (bpf_map_delete_elem(g->held, &key))
			continue;
		bpf_map_update_elem(g->expired, &key, &since, BPF_ANY);
		bpf_map_delete_elem(g->book, &mine);
		kill(key, SIGCONT); /* past the deadline: whoever else holds it */
	}
	holdbook__sweep(g->book, g->self, deadline);
}

/*
 * The guard's loop: every GUARD_TICK_MS it releases the holds older than
 * timeout_ns, whatever the tracer is doing (stopped, starved, in a debugger);
 * when the tracer is gone (EOF on the pipe), it releases every hold and ends.
 */
static void guard_loop(int pipe_fd, const struct guard_fds *g, uint64_t timeout_ns)
{
	struct pollfd pfd = { .fd = pipe_fd, .events = POLLIN };
	char c;

	for (;;) {
		int n = poll(&pfd, 1, GUARD_TICK_MS);
		ssize_t r = n > 0 ? read(pipe_fd, &c, 1) : 1;

		if (r == 0 || (r < 0 && errno != EINTR) || (n < 0 && errno != EINTR))
			break; /* EOF: the tracer is gone */
		if (n == 0 && now_ns() > timeout_ns)
			release_overdue(g, now_ns() - timeout_ns);
	}
	release_all(g, now_ns() > timeout_ns ? now_ns() - timeout_ns : 0);
}

/*
 * A small child that outlives a tracer stopped, starved, killed with SIGKILL or
 * crashed: it ends every hold that outlasts timeout_ns, and when the pipe's last
 * writer (this process) is gone, it releases every process still held, so that
 * none stays stopped. Returns 0 or -errno.
 */
static int start_guard(struct tracer *t, uint64_t timeout_ns)
{
	int pfd[2], held_fd = bpf_map__fd(t->skel->maps.held);
	int expired_fd = bpf_map__fd(t->skel->maps.hold_expired);
	int book_fd = bpf_map__fd(t->skel->maps.hold_book);
	__u32 self = getpid();

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
		/* keep only the pipe and the three maps: the links must close with the tracer
		 * (all moved above 6 first, so that no dup2 closes another) */
		int rd = fcntl(pfd[0], F_DUPFD, 10), map = fcntl(held_fd, F_DUPFD, 10);
		int exp = fcntl(expired_fd, F_DUPFD, 10), book = fcntl(book_fd, F_DUPFD, 10);
		struct guard_fds g = { .held = 4, .expired = 5, .book = 6, .self = self };

		if (rd < 0 || map < 0 || exp < 0 || book < 0 || dup2(rd, 3) < 0 ||
		    dup2(map, 4) < 0 || dup2(exp, 5) < 0 || dup2(book, 6) < 0)
			_exit(1);
		syscall(SYS_close_range, 7, ~0U, 0);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		prctl(PR_SET_NAME, "gpuleak-guard");
		guard_loop(3, &g, timeout_ns);
		_exit(0);
	}
	close(pfd[0]);
	t->guard_fd = pfd[1];
	return 0;
}

/*
 * The ring's consumer and producer positions, read-only (the first two pages of the
 * ring buffer map; libbpf maps them too, the consumer page writable): where a drain
 * begins and ends.
 */
static int map_ring_positions(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.events);
	long page = sysconf(_SC_PAGESIZE);
	void *cons = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	void *prod = cons == MAP_FAILED ? MAP_FAILED :
					  mmap(NULL, page, PROT_READ, MAP_SHARED, fd, page);

	if (prod == MAP_FAILED) {
		int err = -errno;

		if (cons != MAP_FAILED)
			munmap(cons, page);
		return err;
	}
	t->ring_cons = cons;
	t->ring_prod = prod;
	t->ring_page = page;
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
	t->torch_per_pid = opts->torch_per_pid;
	/* per process: no global links; each process's are made as it is found */
	t->torch_armed[0] = t->torch_armed[1] = !opts->torch_per_pid;
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
	t->hold_timeout_ns = opts->hold_timeout_ns ? opts->hold_timeout_ns : GL_HOLD_TIMEOUT_NS;
	if (!opts->no_hold && (err = start_guard(t, t->hold_timeout_ns))) {
		log_error("failed to start the process that releases held processes: %s",
			  strerror(-err));
		goto cleanup;
	}
	if ((err = map_ring_positions(t))) {
		log_error("failed to map the ring buffer's positions: %s", strerror(-err));
		goto cleanup;
	}
	t->mouth = mouth__new(bpf_map__fd(t->skel->maps.events), t->ring_cons,
			      opts->ringbuf_bytes * BACKLOG_RINGS > BACKLOG_BYTES ?
				      opts->ringbuf_bytes * BACKLOG_RINGS :
				      BACKLOG_BYTES,
			      record_bytes, &t->skel->bss->mouth_polls);
	if (!t->mouth) {
		err = -errno;
		log_error("failed to open the ring buffer: %s (lower --ringbuf-size)",
			  strerror(-err));
		goto cleanup;
	}
	if ((err = mouth__start(t->mouth))) {
		log_error("failed to start the thread that reads the ring buffer: %s",
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
	mouth__free(t->mouth);
	if (t->ring_cons) {
		munmap((void *)t->ring_cons, t->ring_page);
		munmap((void *)t->ring_prod, t->ring_page);
	}
	if (t->skel) {
		struct guard_fds g = { .held = bpf_map__fd(t->skel->maps.held),
				       .expired = bpf_map__fd(t->skel->maps.hold_expired),
				       .book = bpf_map__fd(t->skel->maps.hold_book),
				       .self = getpid() };
		uint64_t now = now_ns();

		release_all(&g, now > t->hold_timeout_ns ? now - t->hold_timeout_ns : 0);
	}
	if (t->guard_fd >= 0)
		close(t->guard_fd);
	if (t->guard > 0)
		waitpid(t->guard, NULL, 0);
	for (int i = 0; i < t->nr_libs; i++) {
		for (int j = 0; j < t->libs[i].nr_links; j++)
			bpf_link__destroy(t->libs[i].links[j]);
		free(t->libs[i].links);
		free(t->libs[i].users);
		for (int j = 0; j < 2; j++)
			if (t->libs[i].multi_fds[j] >= 0)
				close(t->libs[i].multi_fds[j]);
	}
	for (int i = 0; i < t->nr_torch; i++)
		for (int j = 0; j < 2; j++)
			bpf_link__destroy(t->torch[i].links[j]);
	for (int p = 0; p < t->nr_torch_pids; p++)
		for (int j = 0; j < 2; j++)
			bpf_link__destroy(t->torch_pids[p].links[j]);
	free(t->torch_pids);
	free(t->torch_found_ns);
	gpuleak__destroy(t->skel);
	free(t);
}

int tracer__forget_tensors(struct tracer *t, uint64_t *forgotten)
{
	return tracer__forget_tensors_pid(t, 0, forgotten);
}

int tracer__forget_tensors_pid(struct tracer *t, int pid, uint64_t *forgotten)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	int err;

	t->skel->bss->tiers_forget_tgid = pid > 0 ? (uint32_t)pid : 0;
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
	return t->nr_libs_in_use;
}

/* The reads from now on end once they have taken ns (0: no limit); t->yielded says so. */
static void start_budget(struct tracer *t, uint64_t ns)
{
	t->budget_ns = ns;
	t->yielded = false;
	t->since_clock = BUDGET_CHECK - 1; /* the budget starts at the first record */
	t->budget_end_ns = 0;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	uint64_t t0, t1;
	unsigned long end = ring_end_at(t, &t0), end1;
	int n;

	start_budget(t, POLL_BUDGET_NS);
	if (!mouth__peek(t->mouth) && timeout_ms) {
		struct pollfd pfd = { .fd = mouth__event_fd(t->mouth), .events = POLLIN };

		poll(&pfd, 1, timeout_ms);
	}
	/*
	 * Records below the wakeup threshold raise no event: where the thread copied
	 * nothing since the last poll, it is asked to look. Where it did, it is looking
	 * already (its wakeups, or its polls while records flow); asking it then, at each
	 * event, would set the two threads reading the ring in turn without a pause, the
	 * ring's positions and records moving between their CPUs and the traced threads'.
	 */
	n = mouth__clear_event(t->mouth) ? 0 : mouth__fill(t->mouth);
	if (n >= 0)
		n = read_backlog(t, 0);
	t->budget_ns = 0;
	end1 = ring_end_at(t, &t1);
	if (read_past(t, end1))
		read_until(t, t1);
	else if (read_past(t, end))
		read_until(t, t0);
	if (t->yielded)
		return 1;
	return n;
}

uint64_t tracer__read_ns(const struct tracer *t)
{
	return t->read_ns;
}

void tracer__stop(struct tracer *t)
{
	if (t->stopped)
		return;
	t->stopped = true;
	/* the global lives in a page mapped from the kernel: the programs read it there */
	__atomic_store_n(&t->skel->bss->tracing_stopped, 1, __ATOMIC_SEQ_CST);
	/*
	 * A program that read the flag before the store may still be booking: its
	 * counters can change after the ring was read to its end, its record come
	 * later (the report's kernel books then hold a call its user-space books do
	 * not). Every program runs inside an RCU read-side critical section (the
	 * non-sleepable uprobe, USDT and tracepoint programs all do), so one RCU grace
	 * period (MEMBARRIER_CMD_GLOBAL) waits for each one running now to end.
	 */
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) < 0) {
		log_debug("membarrier: %s; waiting %d ms for the programs running at the stop",
			  strerror(errno), STOP_SETTLE_US / 1000);
		usleep(STOP_SETTLE_US);
	}
}

/*
 * Reads up to end, until the budget ends the read, or until deadline while a record
 * being written holds it up; the records read, or -errno.
 */
static int drain_to(struct tracer *t, unsigned long end, uint64_t deadline)
{
	int n = 0;

	while (!read_past(t, end) && !t->yielded) {
		int got = mouth__fill(t->mouth);

		if (got >= 0)
			got = read_backlog(t, end);
		if (got < 0)
			return got;
		n += got;
		if (!got && !read_past(t, end)) {
			if (now_ns() >= deadline)
				break;
			usleep(20);
		}
	}
	return n;
}

int tracer__drain(struct tracer *t)
{
	int n = 0;

	t->unread = 0;
	/* once tracing stopped the ring ends: read to it, however long it takes */
	start_budget(t, t->stopped ? 0 : DRAIN_BUDGET_NS);
	for (int round = 0; round < (t->stopped ? STOPPED_ROUNDS : 1); round++) {
		uint64_t at;
		unsigned long end = ring_end_at(t, &at);
		int got;

		if (read_past(t, end)) {
			read_until(t, at);
			break;
		}
		got = drain_to(t, end, at + DRAIN_BUDGET_NS);
		if (got < 0) {
			n = got;
			break;
		}
		n += got;
		if (!read_past(t, end)) {
			/* out of time, or a record still being written */
			t->unread = end - ring_read(t);
			break;
		}
		read_until(t, at);
	}
	t->budget_ns = 0;
	return n;
}

uint64_t tracer__unread(const struct tracer *t)
{
	return t->unread;
}

int tracer__epoll_fd(struct tracer *t)
{
	return mouth__event_fd(t->mouth);
}

uint64_t tracer__ring_stacks(const struct tracer *t, uint64_t *bytes)
{
	*bytes = t->stack_ring_bytes;
	return t->stack_recs;
}

void tracer__ring(struct tracer *t, uint64_t *ring, uint64_t *peak, uint64_t *limit, uint64_t *full)
{
	struct mouth_stats st;

	mouth__stats(t->mouth, &st);
	*ring = bpf_map__max_entries(t->skel->maps.events);
	*peak = st.peak_bytes;
	*limit = st.limit;
	*full = st.full;
}
