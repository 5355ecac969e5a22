// SPDX-License-Identifier: BSD-2-Clause
/*
 * serve.c - the host-wide agent: one tracing session over every process
 * that uses CUDA (-a), an HTTP server for /metrics (Prometheus, gzip on
 * request), /debug/pprof/gpu_heap and its index, /census (the tensors of a
 * traced process and what holds them, joined with the books), heap profiles
 * on disk with rotation.
 *
 * One thread, one poll() over the ring buffer's epoll descriptor, the
 * listening socket and the clients. Processes that exit are dropped from
 * the books at the next housekeeping (every second, and before each
 * scrape); the tables are capped (--max-procs, --max-stacks, --max-allocs)
 * and the caps' hits are counted. After attaching, capabilities later
 * attaches do not need are given up. It writes only under --state-dir.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "caps.h"
#include "cgroup.h"
#include "books/books.h"
#include "census/census.h"
#include "census/join.h"
#include "session/session.h"
#include "model/snapshot.h"
#include "report/metrics.h"
#include "report/report.h"
#include "serve.h"
#include "incidents.h"
#include "serve_int.h"
#include "util/jsonw.h"
#include "stacks/python/python.h"
#include "stacks/stacks.h"
#include "trace/loader.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/procfs.h"

#ifndef GPULEAK_VERSION
#define GPULEAK_VERSION "0.1.0"
#endif

#define HOUSEKEEPING_NS 1000000000ULL
#define LIVENESS_NS 2000000000ULL
#define MAX_POLL_MS 200
#define COMPACT_NS 10000000000ULL
#define CENSUS_MAX_MS 10000 /* as gpuleak census's; the agent's loop waits while it reads */

struct ident_key {
	uint64_t start_time;
	int32_t pid;
	int32_t pad;
};

static void on_forget(void *ctx, struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	struct agent *a = ctx;
	struct ident_key k = { .start_time = t->start_time, .pid = t->pid };

	a->h.procs_forgotten++;
	a->h.forgotten_unmatched_frees += t->unmatched_frees;
	htab__delete(a->idents, &k);
	/* the kernel keeps an exited process's books until told (lost exit records) */
	tracer__forget_proc(session__tracer(a->s), t->pid, t->start_time);
	if (!a->o->no_python)
		python__detach(session__python(a->s), t->pid);
	log_debug("PID %d (%s) exited: dropped from the books", t->pid, t->comm);
}

/*
 * Processes whose exit record was lost (ring buffer full): the kernel's books
 * say when they exited (taken once the reader is past that time: BPF books an
 * exit before its calls' records are read), else /proc says they are gone
 * (taken once the reader is past the pass that first saw it: a later pass).
 * Then every exited process is dropped.
 */
void agent__housekeeping(struct agent *a, uint64_t now)
{
	struct books *b = session__books(a->s);
	struct procs *p = books__procs(b);
	uint64_t read_ns = tracer__read_ns(session__tracer(a->s));
	struct gl_proc_stats st;
	struct proc *proc;

	if (now >= a->next_liveness_ns) {
		a->next_liveness_ns = now + LIVENESS_NS;
		for (uint32_t i = 0; (proc = procs__at(p, i)); i++) {
			const struct proc_totals *t = proc__totals(proc);

			if (t->exited)
				continue;
			if (tracer__proc_stats(session__tracer(a->s), t->pid, &st) == 0 &&
			    st.start_time == t->start_time && st.exit_time) {
				if (st.exit_time < read_ns)
					books__exited(b, proc, &st, st.exit_time);
			} else if (!procfs__same_process(t->pid, t->start_time)) {
				books__gone(b, proc, now, read_ns);
			}
		}
	}
	procs__forget_exited(p, UINT64_MAX, on_forget, a);
	a->next_housekeeping_ns = now + HOUSEKEEPING_NS;
	/* stacks of forgotten processes (ASLR'd unknown frames make many unique) */
	if (now >= a->next_compact_ns && a->h.procs_forgotten != a->compacted_at_forgotten &&
	    stacks__count(books__stacks(b)) >= a->o->max_stacks / 2) {
		int n = books__compact_stacks(b);

		a->next_compact_ns = now + COMPACT_NS;
		a->compacted_at_forgotten = a->h.procs_forgotten;
		if (n > 0)
			a->h.stacks_dropped += n;
		log_debug("stack table compacted: %d dropped, %u kept", n,
			  stacks__count(books__stacks(b)));
	}
}

/* The identity of a process: read from /proc/PID/cgroup once, then cached. */
static void ident_of(struct agent *a, const struct snap_proc *sp, struct proc_ident *out)
{
	struct ident_key k = { .start_time = sp->start_time, .pid = sp->pid };
	struct proc_ident *id = htab__lookup(a->idents, &k);
	bool created;

	if (id) {
		*out = *id;
		return;
	}
	if (cgroup__read(sp->pid, out) == 0 && out->container_id[0])
		cgroup__oci_names("/", out);
	id = htab__upsert(a->idents, &k, &created);
	if (id)
		*id = *out;
}

static uint64_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	uint64_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n ? n - 1 : 0; /* the directory's own descriptor */
}

static void fill_health(struct agent *a)
{
	const struct books_counters *bc = books__counters(session__books(a->s));
	struct stacks *st = books__stacks(session__books(a->s));
	const struct http_stats *hs = http__stats(a->http);
	struct rusage ru;

	a->h.incidents_on = a->incidents != NULL;
	for (int c = 0; c < INCIDENT_NR_CAUSES && c < 3; c++)
		a->h.incidents[c] = incidents__written(a->incidents, c);
	a->h.incident_errors = incidents__failed(a->incidents);
	char buf[256];
	uint64_t pages, resident;

	memcpy(a->h.records, bc->records, sizeof(a->h.records));
	a->h.malformed = bc->malformed;
	a->h.stack_missing = bc->stack_missing;
	a->h.procs_refused = procs__refused(books__procs(session__books(a->s)));
	a->h.stacks = stacks__count(st);
	a->h.stacks_overflow = stacks__overflows(st);
	a->h.probes = tracer__nr_probes(session__tracer(a->s));
	a->h.libs = tracer__nr_libs(session__tracer(a->s));
	a->h.http_requests = hs->requests;
	a->h.http_bad_requests = hs->bad_requests;
	a->h.http_timeouts = hs->timeouts;
	a->h.http_refused = hs->refused;
	a->h.http_accept_paused = hs->accept_paused;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		a->h.cpu_seconds = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
				   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	if (read_small_file("/proc/self/statm", buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%llu %llu", (unsigned long long *)&pages,
		   (unsigned long long *)&resident) == 2)
		a->h.resident_bytes = resident * (uint64_t)sysconf(_SC_PAGESIZE);
	a->h.open_fds = count_fds();
}

/* /metrics: housekeeping first, so that an exited process is gone from this scrape. */
static int reply_metrics(struct agent *a, struct http_reply *rep)
{
	struct proc_ident *idents = NULL;
	struct metrics_opts mo = { .health = &a->h };
	struct snapshot *snap;
	FILE *f;

	agent__housekeeping(a, now_ns());
	snap = session__snapshot(a->s, 0, false);
	if (!snap)
		return 0;
	idents = calloc(snap->nprocs ? snap->nprocs : 1, sizeof(*idents));
	f = idents ? open_memstream(&rep->body, &rep->len) : NULL;
	if (f) {
		for (uint32_t i = 0; i < snap->nprocs; i++)
			if (!snap->procs[i].exited)
				ident_of(a, &snap->procs[i], &idents[i]);
		fill_health(a);
		mo.idents = idents;
		mo.gpus = agent__gpus(a, snap);
		if (report__metrics(f, snap, &mo) == 0) {
			rep->status = 200;
			rep->content_type = METRICS_CONTENT_TYPE;
			rep->compressible = true;
		}
		if (fclose(f))
			rep->status = 500;
	}
	free((void *)mo.gpus);
	free(idents);
	snapshot__free(snap);
	return 0;
}

static int reply_text(struct http_reply *rep, int status, const char *text)
{
	rep->status = status;
	rep->body = strdup(text);
	rep->len = rep->body ? strlen(text) : 0;
	rep->compressible = true;
	if (!rep->body)
		rep->status = 500;
	return 0;
}

static int reply_html(struct http_reply *rep, const char *html)
{
	reply_text(rep, 200, html);
	if (rep->status == 200)
		rep->content_type = "text/html; charset=utf-8";
	return 0;
}

/* clang-format off */
#define HTML_HEAD(title) \
	"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" title "</title></head>\n" \
	"<body>\n<h1>" title "</h1>\n"

/* The agent's front page: every endpoint, linked. */
static const char index_html[] =
	HTML_HEAD("gpuleak " GPULEAK_VERSION)
	"<ul>\n"
	"<li><a href=\"metrics\">/metrics</a>: Prometheus metrics (gzip on request)</li>\n"
	"<li><a href=\"debug/pprof/\">/debug/pprof/</a>: profiles</li>\n"
	"<li><a href=\"debug/pprof/gpu_heap\">/debug/pprof/gpu_heap</a>: outstanding GPU "
	"memory by call stack (pprof, gzipped)</li>\n"
	"<li><a href=\"healthz\">/healthz</a>: liveness</li>\n"
	"<li>GET /report?pid=N: one traced process's HTML report (memory over time by "
	"allocation site, a time range's flame graph, the leaks with hints)</li>\n"
	"<li><a href=\"incidents\">/incidents</a>: the incident bundles written under "
	"--state-dir (JSON), each file at /incidents/BUNDLE/FILE</li>\n"
	"<li>POST /tensors/arm: trace tensor blocks for a window now</li>\n"
	"<li>GET /census?pid=N: the tensors of traced process N and what holds them, "
	"read without pausing it (JSON); POST /census?pid=N&amp;pause=1 pauses it for a "
	"consistent read</li>\n"
	"</ul>\n</body></html>\n";

/* The profile index, as Go's net/http/pprof lays it out: one row per profile. */
static const char pprof_html[] =
	HTML_HEAD("/debug/pprof/")
	"<table>\n<thead><tr><th>Profile</th><th>Description</th></tr></thead>\n"
	"<tr><td><a href=\"gpu_heap\">gpu_heap</a></td><td>GPU memory outstanding now by call "
	"stack: inuse_space (first), inuse_objects, alloc_space, alloc_objects; a cumulative "
	"profile, not a delta: scrape it with delta off</td></tr>\n"
	"</table>\n</body></html>\n";
/* clang-format on */

/* The value of name in a query ("pid=12&pause=1"), copied into buf; false if absent. */
static bool query_value(const char *query, const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);

	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		const char *end = strchrnul(p, '&');

		if (!strncmp(p, name, n) && p[n] == '=' && (size_t)(end - p - n - 1) < len) {
			memcpy(buf, p + n + 1, end - p - n - 1);
			buf[end - p - n - 1] = '\0';
			return true;
		}
	}
	return false;
}

/*
 * /census?pid=N: the census of a process this agent traces, as JSON, joined with its
 * books. Read without pausing (its figures may be torn, and the JSON says so) unless
 * pause=1 is asked, which takes POST: a GET must not stop a process.
 */
static int reply_census(struct agent *a, const struct http_request *req, struct http_reply *rep)
{
	struct census_caps caps = { .max_objects = 4000000, .max_read_bytes = 1ULL << 30 };
	struct census_books books;
	char pid_s[16], pause_s[8], ms_s[16];
	uint64_t ms = CENSUS_MAX_MS;
	bool pause = false;
	FILE *f;
	int pid, status;

	if (!query_value(req->query, "pid", pid_s, sizeof(pid_s)) || parse_pid(pid_s, &pid))
		return reply_text(rep, 400, "/census needs ?pid=N, a process this agent traces\n");
	if (query_value(req->query, "max_ms", ms_s, sizeof(ms_s)) && parse_u64(ms_s, 1, 60000, &ms))
		return reply_text(rep, 400, "max_ms is the census's time cap: 1 to 60000\n");
	caps.max_ns = ms * 1000000ULL;
	if (query_value(req->query, "pause", pause_s, sizeof(pause_s)))
		pause = !strcmp(pause_s, "1");
	if (pause && !req->post)
		return reply_text(rep, 405, "pausing a process takes POST /census?pid=N&pause=1\n");
	agent__housekeeping(a, now_ns());
	tracer__drain(session__tracer(a->s));
	if (session__census_books(a->s, pid, &books))
		return reply_text(rep, 500, "out of memory reading the books\n");
	if (!books.traced) {
		session__census_books_free(&books);
		return reply_text(rep, 404, "that PID is not a process this agent traces\n");
	}
	log_info("/census: PID %d%s", pid, pause ? ", paused" : ", not paused");
	f = open_memstream(&rep->body, &rep->len);
	if (!f) {
		session__census_books_free(&books);
		return reply_text(rep, 500, "out of memory\n");
	}
	status = a->census(pid, NULL, f, pause, &caps, &books);
	session__census_books_free(&books);
	if (fclose(f) || !rep->len) {
		free(rep->body);
		rep->body = NULL;
		rep->len = 0;
		return reply_text(rep, status == EXIT_PRIV ? 403 : 500,
				  "the census failed: the agent's log says why\n");
	}
	/* a census whose PyTorch layout was not verified is still an answer: its JSON says */
	rep->status = 200;
	rep->content_type = "application/json";
	rep->compressible = true;
	return 0;
}

/* GET /incidents: the bundles (JSON); /incidents/BUNDLE/FILE: one of its files. */
static int reply_incidents(struct agent *a, const char *path, struct http_reply *rep)
{
	char bundle[128], file[64];
	const char *slash;
	struct jsonw *w;
	FILE *f;
	int fd;

	if (!a->incidents && !strcmp(path, "/incidents")) {
		reply_text(rep, 200,
			   "{\"dir\": null, \"incidents\": [], \"why\": \"serve keeps incidents "
			   "under --state-dir/incidents: none was given\"}\n");
		rep->content_type = "application/json";
		return 0;
	}
	if (!a->incidents)
		return reply_text(rep, 404, "404 Not Found\n");
	if (!strcmp(path, "/incidents")) {
		f = open_memstream(&rep->body, &rep->len);
		w = f ? jsonw__new(f, true) : NULL;
		if (!w) {
			if (f)
				fclose(f);
			rep->status = 500;
			return 0;
		}
		incidents__list_json(a->incidents, w);
		rep->status = jsonw__free(w) || fclose(f) ? 500 : 200;
		rep->content_type = "application/json";
		rep->compressible = true;
		return 0;
	}
	path += 11;
	slash = strchr(path, '/');
	if (!slash || (size_t)(slash - path) >= sizeof(bundle) || strlen(slash + 1) >= sizeof(file))
		return reply_text(rep, 404, "404 Not Found\n");
	snprintf(bundle, sizeof(bundle), "%.*s", (int)(slash - path), path);
	snprintf(file, sizeof(file), "%s", slash + 1);
	fd = incidents__open_file(a->incidents, bundle, file);
	if (fd < 0)
		return reply_text(rep, 404, "404 Not Found\n");
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		rep->status = 500;
		return 0;
	}
	rep->body = NULL;
	rep->len = 0;
	{
		char buf[65536];
		size_t n, cap = 0;

		while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
			char *nb = realloc(rep->body, cap + n);

			if (!nb)
				break;
			memcpy(nb + cap, buf, n);
			rep->body = nb;
			cap += n;
		}
		rep->len = cap;
	}
	fclose(f);
	rep->status = 200;
	rep->content_type = strstr(file, ".json") ? "application/json" :
			    strstr(file, ".svg")  ? "image/svg+xml" :
			    strstr(file, ".gz")	  ? "application/gzip" :
						    "text/plain; charset=utf-8";
	rep->compressible = !strstr(file, ".gz");
	return 0;
}

/* /report?pid=N: the HTML report of one traced process, drawn from the books now. */
static int reply_report(struct agent *a, const struct http_request *req, struct http_reply *rep)
{
	struct snapshot *snap;
	char pid_s[16];
	bool known = false;
	FILE *f;
	int pid, err;

	if (!query_value(req->query, "pid", pid_s, sizeof(pid_s)) || parse_pid(pid_s, &pid))
		return reply_text(rep, 400, "/report needs ?pid=N, a process this agent traces\n");
	agent__housekeeping(a, now_ns());
	tracer__drain(session__tracer(a->s));
	snap = session__snapshot_pid(a->s, pid); /* every stack, with its history */
	if (!snap)
		return reply_text(rep, 500, "out of memory\n");
	for (uint32_t i = 0; i < snap->nprocs; i++)
		known |= snap->procs[i].pid == pid;
	if (!known) {
		snapshot__free(snap);
		return reply_text(rep, 404, "that PID is not a process this agent traces\n");
	}
	f = open_memstream(&rep->body, &rep->len);
	err = f ? report__html(f, snap, pid) : -ENOMEM;
	if (f && fclose(f))
		err = err ?: -ENOMEM;
	snapshot__free(snap);
	if (err) {
		free(rep->body);
		rep->body = NULL;
		rep->len = 0;
		return reply_text(rep, 500, "the report could not be written\n");
	}
	rep->status = 200;
	rep->content_type = "text/html; charset=utf-8";
	rep->compressible = true;
	return 0;
}

static int on_http(void *ctx, const struct http_request *req, struct http_reply *rep)
{
	struct agent *a = ctx;

	if (!strcmp(req->path, "/census"))
		return reply_census(a, req, rep);

	if (!strcmp(req->path, "/tensors/arm")) {
		if (!req->post)
			return reply_text(rep, 405, "POST /tensors/arm opens a tensor window\n");
		session__request_tensors(a->s);
		log_info("POST /tensors/arm: a tensor window is asked for");
		return reply_text(rep, 202, "a tensor window opens\n");
	}
	if (req->post)
		return reply_text(rep, 405, "only /tensors/arm and /census take POST\n");
	if (!strcmp(req->path, "/metrics"))
		return reply_metrics(a, rep);
	if (!strcmp(req->path, "/debug/pprof/gpu_heap")) {
		agent__housekeeping(a, now_ns()); /* an exited process is gone from this profile */
		return agent__reply_profile(a, rep);
	}
	/* with its slash only: the index's links are relative, as Go's */
	if (!strcmp(req->path, "/debug/pprof/"))
		return reply_html(rep, pprof_html);
	if (!strcmp(req->path, "/healthz"))
		return reply_text(rep, 200, "ok\n");
	if (!strcmp(req->path, "/report"))
		return reply_report(a, req, rep);
	if (!strcmp(req->path, "/incidents") || !strncmp(req->path, "/incidents/", 11))
		return reply_incidents(a, req->path, rep);
	if (!strcmp(req->path, "/"))
		return reply_html(rep, index_html);
	return reply_text(rep, 404, "404 Not Found\n");
}

/* The agent needs the host's PID namespace: BPF reports host PIDs. */
static void check_pid_namespace(void)
{
	char buf[4096], *line, *end;
	int levels = 0;

	if (read_small_file("/proc/self/status", buf, sizeof(buf)) <= 0)
		return;
	line = strstr(buf, "\nNSpid:");
	if (!line)
		return;
	end = strchrnul(line + 1, '\n');
	for (char *p = line + 7; p < end; p++)
		levels += *p == '\t';
	if (levels > 1)
		log_warn("gpuleak serve runs in a child PID namespace: processes it traces are not "
			 "visible in its /proc and are dropped (run it with the host's PID "
			 "namespace: hostPID: true)");
}

/* Whether the kernel is at least major.minor. */
static bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

static void drop_capabilities(struct agent *a)
{
	/* CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, and CAP_KILL: the
	 * SIGCONT that releases a process of another user held at a library's mapping */
	uint64_t keep = 1ULL << 39 | 1ULL << 38 | 1ULL << 19 | 1ULL << 2 | 1ULL << 5;
	uint64_t before = caps__effective(), after;
	struct tracer *t = session__tracer(a->s);
	bool multi = tracer__nr_libs(t) ? tracer__uses_multi_links(t) : kernel_at_least(6, 6);
	char kept[256], dropped[512];
	int err;

	/* measured on 6.18: perf-event uprobes (PyTorch's USDT probes, libcuda on kernels
	 * without uprobe_multi) need CAP_SYS_ADMIN since the CVE-2025-38466 fix */
	if (!multi || !a->o->no_torch)
		keep |= 1ULL << 21;
	err = caps__limit(keep);
	after = caps__effective();
	caps__names(after, kept, sizeof(kept));
	caps__names(before & ~after, dropped, sizeof(dropped));
	if (err)
		log_warn("could not give up capabilities: %s (serve keeps running with all it "
			 "started with; run it with only CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and "
			 "CAP_SYS_RESOURCE to need no drop)",
			 strerror(-err));
	else
		log_info("capabilities kept: %s", kept[0] ? kept : "none");
	log_debug("capabilities given up: %s", dropped[0] ? dropped : "none");
}

static int loop(struct agent *a)
{
	int max = 1 + http__max_pollfds(a->http), status = EXIT_OK;
	struct pollfd *fds = calloc(max, sizeof(*fds));
	bool done = false;

	if (!fds)
		return EXIT_RUNTIME;
	while (!done) {
		int n = 0, timeout = MAX_POLL_MS, ht = http__timeout_ms(a->http);
		uint64_t now;

		fds[n++] = (struct pollfd){ .fd = tracer__epoll_fd(session__tracer(a->s)),
					    .events = POLLIN };
		n += http__pollfds(a->http, fds + 1, max - 1);
		if (session__scanning(a->s))
			timeout = 5;
		if (ht >= 0 && ht < timeout)
			timeout = ht;
		if (poll(fds, n, timeout) < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			status = EXIT_RUNTIME;
			break;
		}
		status = session__step(a->s, 0, &done);
		if (done)
			break;
		http__process(a->http, fds + 1, n - 1);
		now = now_ns();
		if (now >= a->next_housekeeping_ns)
			agent__housekeeping(a, now);
		if (a->profile_fd >= 0 && now >= a->next_profile_ns) {
			agent__write_profile(a);
			a->next_profile_ns = now + a->o->profile_every_ms * 1000000ULL;
		}
	}
	free(fds);
	return status;
}

int serve__run(const struct gl_opts *o, serve_census_fn census, session_census_fn held)
{
	struct agent a = { .o = o, .state_fd = -1, .profile_fd = -1, .census = census };
	struct timespec rt;
	int status;

	umask(077);
	a.h.version = GPULEAK_VERSION;
	a.h.max_procs = o->max_procs;
	a.h.max_stacks = o->max_stacks;
	a.h.max_allocs = o->max_allocs;
	clock_gettime(CLOCK_REALTIME, &rt);
	a.h.start_time_seconds = rt.tv_sec + rt.tv_nsec / 1e9;
	check_pid_namespace();
	status = agent__open_state(&a);
	if (status)
		goto cleanup;
	a.idents = htab__new(sizeof(struct ident_key), sizeof(struct proc_ident));
	a.s = a.idents ? session__new(o, &status) : NULL;
	if (!a.s) {
		status = status ?: EXIT_RUNTIME;
		goto cleanup;
	}
	if (a.incidents)
		session__set_incident_hook(a.s, incidents__hook, a.incidents);
	if (a.incidents && o->census_on_oom)
		session__set_census_hook(a.s, held);
	stacks__set_max(books__stacks(session__books(a.s)), o->max_stacks);
	procs__set_max(books__procs(session__books(a.s)), o->max_procs);
	a.http = http__new(o->listen, NULL, on_http, &a);
	if (!a.http) {
		log_error("cannot listen on %s: %s (pick a free address with --listen ADDR:PORT; "
			  "`ss -ltnp` shows who holds a port)",
			  o->listen, strerror(errno));
		status = EXIT_RUNTIME;
		goto cleanup;
	}
	status = session__start(a.s);
	if (status)
		goto cleanup;
	drop_capabilities(&a);
	agent__gpus_init(&a);
	log_info("serving http://%s/metrics and /debug/pprof/gpu_heap", http__bound(a.http));
	a.next_profile_ns = now_ns() + o->profile_every_ms * 1000000ULL;
	status = loop(&a);
	if (a.profile_fd >= 0 && status == EXIT_OK)
		agent__write_profile(&a); /* the last look before going */
	log_info("stopped");
cleanup:
	http__free(a.http);
	session__free(a.s);
	htab__free(a.idents);
	agent__close_state(&a);
	return status;
}
