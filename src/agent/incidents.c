// SPDX-License-Identifier: BSD-2-Clause
/*
 * incidents.c - the flight recorder's bundles: when a traced process runs out
 * of device memory (for PyTorch, once its retry after freeing the cache has
 * failed too), is killed by a signal, or exits holding memory at stacks judged
 * to leak, gpuleak writes what it knows of that process at once, from its own
 * books: nothing the process does afterwards (exit, SIGKILL) can take it away.
 *
 * One directory per incident, under the directory given: written as
 * .tmp-NAME, renamed to NAME when whole, so a reader never sees half of one.
 * Directories 0700, files 0600, created with O_EXCL|O_NOFOLLOW relative to the
 * directory's descriptor: no link is followed, nothing existing is written
 * over. The oldest bundles go past --incident-max bundles or
 * --incident-max-bytes. A write that fails (a full disk) removes the partial
 * bundle, is said once per cause of failure, and counted; nothing else stops.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "incidents.h"
#include "report/report.h"
#include "util/jsonw.h"
#include "util/log.h"

#define NAME_MAX_LEN 96

struct incidents {
	int dir_fd;
	char *dir;
	uint32_t max_count;
	uint64_t max_bytes;
	uint64_t written[INCIDENT_NR_CAUSES];
	uint64_t failed;
	int last_errno; /* of the last failure said */
};

static const char *const cause_names[INCIDENT_NR_CAUSES] = {
	[INCIDENT_OOM] = "oom",
	[INCIDENT_KILLED] = "killed",
	[INCIDENT_LEAK_AT_EXIT] = "leak_at_exit",
};

const char *incidents__cause_name(enum incident_cause c)
{
	return c < INCIDENT_NR_CAUSES ? cause_names[c] : "unknown";
}

struct incidents *incidents__open(const struct incidents_opts *o)
{
	struct incidents *in = calloc(1, sizeof(*in));
	struct stat st;

	if (!in)
		return NULL;
	in->max_count = o->max_count ? o->max_count : INCIDENTS_DEFAULT_MAX;
	in->max_bytes = o->max_bytes ? o->max_bytes : INCIDENTS_DEFAULT_MAX_BYTES;
	in->dir = strdup(o->dir);
	if (mkdir(o->dir, 0700) && errno != EEXIST)
		goto fail;
	in->dir_fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!in->dir || in->dir_fd < 0)
		goto fail;
	if (fstat(in->dir_fd, &st) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    (st.st_mode & 0022)) {
		errno = EPERM; /* another user's, or one others may write into */
		goto fail;
	}
	return in;
fail:
	if (in->dir_fd > 0)
		close(in->dir_fd);
	free(in->dir);
	free(in);
	return NULL;
}

void incidents__free(struct incidents *in)
{
	if (!in)
		return;
	close(in->dir_fd);
	free(in->dir);
	free(in);
}

uint64_t incidents__written(const struct incidents *in, enum incident_cause c)
{
	return in && c < INCIDENT_NR_CAUSES ? in->written[c] : 0;
}

uint64_t incidents__failed(const struct incidents *in)
{
	return in ? in->failed : 0;
}

const char *incidents__dir(const struct incidents *in)
{
	return in ? in->dir : NULL;
}

/* A new file in the bundle, 0600, never an existing one nor through a link. */
static FILE *create_in(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f)
		close(fd);
	return f;
}

/* Removes a bundle directory (its files, then itself); nothing below it is a directory. */
static void remove_bundle(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(fd, e->d_name, 0);
	closedir(d);
	unlinkat(dir_fd, name, AT_REMOVEDIR);
}

/* The bytes of a bundle's files. */
static uint64_t bundle_bytes(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	struct stat st;
	uint64_t n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && !fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			n += st.st_size;
	closedir(d);
	return n;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The bundles (names sorted: oldest first, as their names start with the time), and
 * partial ones left by a gpuleak that died writing (.tmp-*), which go. */
static char **list_bundles(struct incidents *in, uint32_t *n)
{
	int fd = dup(in->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **names = NULL;
	uint32_t cap = 0;
	struct dirent *e;

	*n = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		if (!strncmp(e->d_name, ".tmp-", 5)) {
			remove_bundle(in->dir_fd, e->d_name);
			continue;
		}
		if (e->d_name[0] == '.' || e->d_type != DT_DIR)
			continue;
		if (*n == cap) {
			char **m = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*m));

			if (!m)
				break;
			names = m;
		}
		if (!(names[*n] = strdup(e->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(names, *n, sizeof(*names), cmp_name);
	return names;
}

/* The oldest bundles go until at most max_count are left and their bytes fit max_bytes. */
static void retain(struct incidents *in)
{
	uint32_t n, first = 0;
	char **names = list_bundles(in, &n);
	uint64_t *bytes = calloc(n ? n : 1, sizeof(*bytes)), total = 0;

	for (uint32_t i = 0; bytes && i < n; i++)
		total += bytes[i] = bundle_bytes(in->dir_fd, names[i]);
	while (bytes && first + 1 < n && (n - first > in->max_count || total > in->max_bytes)) {
		log_info("incident %s/%s goes: more than %u bundles or %llu bytes are kept",
			 in->dir, names[first], in->max_count, (unsigned long long)in->max_bytes);
		remove_bundle(in->dir_fd, names[first]);
		total -= bytes[first++];
	}
	for (uint32_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(bytes);
}

/* The one process of snap, as a snapshot of its own. */
static struct snapshot one_proc(const struct snapshot *snap, const struct snap_proc *p)
{
	struct snapshot s = *snap;

	s.procs = (struct snap_proc *)p;
	s.nprocs = 1;
	s.nprocs_idle = 0;
	s.njobs = 0;
	s.jobs = NULL;
	s.ncensus = 0;
	s.census = NULL;
	for (uint32_t i = 0; i < snap->ncensus && !s.ncensus; i++)
		if (snap->census[i].pid == p->pid) {
			s.census = &snap->census[i];
			s.ncensus = 1;
		}
	return s;
}

static void write_identity(struct jsonw *w, const struct snap_proc *p)
{
	char path[64], cg[512];
	FILE *f;

	jsonw__field_s64(w, "pid", p->pid);
	jsonw__field_s64(w, "ns_pid", p->ns_pid);
	jsonw__field_string(w, "comm", p->comm);
	jsonw__field_s64(w, "ppid", p->ppid);
	jsonw__field_s64(w, "rank", p->rank);
	jsonw__field_s64(w, "local_rank", p->local_rank);
	jsonw__field_s64(w, "world_size", p->world_size);
	/* the container, by the cgroup the process is in (while it lives) */
	snprintf(path, sizeof(path), "/proc/%d/cgroup", p->pid);
	jsonw__name(w, "cgroup");
	if ((f = fopen(path, "re")) && fgets(cg, sizeof(cg), f)) {
		cg[strcspn(cg, "\n")] = '\0';
		jsonw__string(w, strchr(cg, ':') ? strrchr(cg, ':') + 1 : cg);
	} else {
		jsonw__null(w);
	}
	if (f)
		fclose(f);
}

static const char *const files[] = { "incident.json", "report.txt",  "report.json",
				     "profile.pb.gz", "flame.svg",   "history.trace.json",
				     "report.html",   "census.json", "census.txt" };
#define NR_BASE_FILES 7 /* the census's two only when it was taken */

static size_t nr_files(const struct incident *inc)
{
	return inc->census && inc->census->taken ? sizeof(files) / sizeof(files[0]) : NR_BASE_FILES;
}

static void write_census(struct jsonw *w, const struct incident *inc)
{
	const struct incident_census *ic = inc->census;

	jsonw__name(w, "census");
	jsonw__start_object(w);
	jsonw__field_bool(w, "taken", ic && ic->taken);
	jsonw__field_bool(w, "held", ic && ic->held);
	jsonw__name(w, "held_ms"); /* null: held until the deadline, for a time not measured */
	if (ic && ic->held && ic->past_deadline)
		jsonw__null(w);
	else
		jsonw__double(w, ic && ic->held ? ic->held_ns / 1e6 : 0);
	jsonw__field_bool(w, "past_deadline", ic && ic->past_deadline);
	jsonw__field_string(w, "note", ic ? ic->note : "not taken");
	if (ic && ic->taken) {
		jsonw__field_string(w, "json", "census.json");
		jsonw__field_string(w, "text", "census.txt");
	}
	jsonw__end_object(w);
}

/* The job of the process (every rank's bundle names it), or null. */
static void write_job(struct jsonw *w, const struct snapshot *whole, const struct snap_proc *p)
{
	const struct snap_job *j = whole ? snap_job_of(whole, p) : NULL;

	jsonw__name(w, "job");
	if (!j) {
		jsonw__null(w);
		return;
	}
	jsonw__start_object(w);
	jsonw__field_s64(w, "launcher_pid", j->id);
	jsonw__field_string(w, "basis", j->basis);
	jsonw__field_s64(w, "world_size", j->world_size);
	jsonw__name(w, "member_pids");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < j->nmembers; i++)
		jsonw__s64(w, whole->procs[j->members[i]].pid);
	jsonw__end_array(w);
	jsonw__end_object(w);
}

static int write_file(int dfd, const char *name, const struct snapshot *s,
		      const struct incident *inc, const char *bundle)
{
	FILE *f = create_in(dfd, name);
	int err = 0;

	if (!f)
		return -errno;
	if (!strcmp(name, "incident.json")) {
		struct jsonw *w = jsonw__new(f, true);
		char when[32];
		time_t t = inc->wall_ns / 1000000000ULL;

		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		jsonw__start_object(w);
		jsonw__field_u64(w, "version", 1);
		jsonw__field_string(w, "bundle", bundle);
		jsonw__field_string(w, "cause", incidents__cause_name(inc->cause));
		jsonw__field_string(w, "what", inc->what);
		jsonw__field_string(w, "time", when);
		jsonw__field_u64(w, "monotonic_ns", s->now_ns);
		jsonw__field_bool(w, "complete", s->complete && s->procs[0].consistent);
		jsonw__name(w, "process");
		jsonw__start_object(w);
		write_identity(w, &s->procs[0]);
		jsonw__end_object(w);
		write_job(w, inc->whole, inc->whole_proc);
		write_census(w, inc);
		jsonw__name(w, "files");
		jsonw__start_array(w);
		for (size_t i = 0; i < nr_files(inc); i++)
			jsonw__string(w, files[i]);
		jsonw__end_array(w);
		jsonw__end_object(w);
		err = jsonw__free(w);
	} else if (!strcmp(name, "report.txt")) {
		err = report__text(f, s, &(struct text_opts){ .max_stacks = 10, .max_frames = 32 });
	} else if (!strcmp(name, "report.json")) {
		err = report__json(f, s);
	} else if (!strcmp(name, "profile.pb.gz")) {
		err = report__pprof(f, s,
				    &(struct pprof_opts){ .default_sample = PPROF_INUSE_SPACE,
							  .time_ns = inc->wall_ns });
	} else if (!strcmp(name, "flame.svg")) {
		err = report__svg(f, s, &(struct svg_opts){ 0 });
	} else if (!strcmp(name, "report.html")) {
		err = report__html(f, s, s->procs[0].pid);
	} else if (!strcmp(name, "census.json") || !strcmp(name, "census.txt")) {
		bool json = !strcmp(name, "census.json");
		size_t n = json ? inc->census->json_len : inc->census->text_len;

		err = fwrite(json ? inc->census->json : inc->census->text, 1, n, f) == n ? 0 : -EIO;
	} else {
		err = report__perfetto(f, s);
	}
	if (fflush(f) || ferror(f))
		err = err ?: -EIO;
	if (fsync(fileno(f)) && !err)
		err = -errno;
	if (fclose(f) && !err)
		err = -EIO;
	return err;
}

int incidents__write(struct incidents *in, const struct snapshot *snap, const struct incident *inc,
		     char *name_out, size_t name_len)
{
	const struct snap_proc *p = NULL;
	const struct snap_job *job;
	struct incident in_job;
	char name[NAME_MAX_LEN], tmp[NAME_MAX_LEN + 8], stamp[32], jobtag[48] = "";
	time_t t = inc->wall_ns / 1000000000ULL;
	struct snapshot s;
	int dfd, err = 0;

	for (uint32_t i = 0; i < snap->nprocs + snap->nprocs_idle; i++)
		if (snap->procs[i].pid == inc->pid)
			p = &snap->procs[i];
	if (!p)
		return -ESRCH;
	s = one_proc(snap, p);
	job = snap_job_of(snap, p);
	if (job && p->rank >= 0)
		snprintf(jobtag, sizeof(jobtag), "job%d-rank%d-", job->id, p->rank);
	else if (job)
		snprintf(jobtag, sizeof(jobtag), "job%d-", job->id);
	in_job = *inc;
	in_job.whole = snap;
	in_job.whole_proc = p;
	inc = &in_job;
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime(&t));
	for (int seq = 0;; seq++) {
		struct stat st;

		snprintf(name, sizeof(name), "%s-%09llu-%spid%d-%s%s%.0d", stamp,
			 (unsigned long long)(inc->wall_ns % 1000000000ULL), jobtag, inc->pid,
			 incidents__cause_name(inc->cause), seq ? "-" : "", seq);
		if (fstatat(in->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
			break;
		if (seq > 100)
			return -EEXIST;
	}
	snprintf(tmp, sizeof(tmp), ".tmp-%s", name);
	if (mkdirat(in->dir_fd, tmp, 0700))
		err = -errno;
	dfd = err ? -1 : openat(in->dir_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!err && dfd < 0)
		err = -errno;
	for (size_t i = 0; !err && i < nr_files(inc); i++)
		err = write_file(dfd, files[i], &s, inc, name);
	if (dfd >= 0) {
		if (!err && fsync(dfd))
			err = -errno;
		close(dfd);
	}
	if (!err && renameat(in->dir_fd, tmp, in->dir_fd, name))
		err = -errno;
	if (err) {
		remove_bundle(in->dir_fd, tmp);
		in->failed++;
		if (err != -in->last_errno)
			log_warn(
				"cannot write the incident of PID %d (%s) in %s: %s; it is lost, the "
				"tracing goes on (free space there)",
				inc->pid, inc->what, in->dir, strerror(-err));
		in->last_errno = -err;
		return err;
	}
	in->written[inc->cause]++;
	fsync(in->dir_fd);
	log_warn("PID %d (%s): %s: its incident is in %s/%s (gpuleak report %s/%s)", inc->pid,
		 p->comm, inc->what, in->dir, name, in->dir, name);
	if (name_out)
		snprintf(name_out, name_len, "%s", name);
	retain(in);
	return 0;
}

/* The job a bundle's name gives ("...-jobN-..."), or -1. */
static int job_of_name(const char *name)
{
	const char *j = strstr(name, "-job");

	return j ? atoi(j + 4) : -1;
}

struct job_ref {
	int job;
	uint32_t at; /* index in the names, oldest first */
};

static int job_ref_cmp(const void *a, const void *b)
{
	const struct job_ref *x = a, *y = b;

	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return x->at < y->at ? 1 : x->at > y->at ? -1 : 0; /* newest first */
}

/* Each job's bundles, by launcher PID; bundles of no job are not listed here. */
static void list_jobs(struct jsonw *w, char **names, uint32_t n)
{
	struct job_ref *r = calloc(n ? n : 1, sizeof(*r));
	uint32_t m = 0;

	if (!r)
		return;
	for (uint32_t i = 0; i < n; i++)
		if ((r[m].job = job_of_name(names[i])) >= 0)
			r[m++].at = i;
	qsort(r, m, sizeof(*r), job_ref_cmp);
	for (uint32_t i = 0; i < m;) {
		uint32_t k = i;

		jsonw__start_object(w);
		jsonw__field_s64(w, "job", r[i].job);
		jsonw__name(w, "incidents");
		jsonw__start_array(w);
		for (; k < m && r[k].job == r[i].job; k++)
			jsonw__string(w, names[r[k].at]);
		jsonw__end_array(w);
		jsonw__end_object(w);
		i = k;
	}
	free(r);
}

void incidents__list_json(struct incidents *in, struct jsonw *w)
{
	uint32_t n;
	char **names = list_bundles(in, &n);

	jsonw__start_object(w);
	jsonw__field_string(w, "dir", in->dir);
	jsonw__name(w, "written");
	jsonw__start_object(w);
	for (int c = 0; c < INCIDENT_NR_CAUSES; c++)
		jsonw__field_u64(w, cause_names[c], in->written[c]);
	jsonw__end_object(w);
	jsonw__field_u64(w, "failed_writes", in->failed);
	jsonw__name(w, "incidents");
	jsonw__start_array(w);
	for (uint32_t i = n; i-- > 0;) { /* newest first */
		int job = job_of_name(names[i]);

		jsonw__start_object(w);
		jsonw__field_string(w, "name", names[i]);
		jsonw__name(w, "job"); /* its launcher's PID */
		if (job >= 0)
			jsonw__s64(w, job);
		else
			jsonw__null(w);
		jsonw__name(w, "files");
		jsonw__start_array(w);
		for (size_t j = 0; j < sizeof(files) / sizeof(files[0]); j++) {
			char link[NAME_MAX_LEN + 48];

			snprintf(link, sizeof(link), "%s/%s", names[i], files[j]);
			if (j >= NR_BASE_FILES &&
			    fstatat(in->dir_fd, link, &(struct stat){ 0 }, AT_SYMLINK_NOFOLLOW))
				continue; /* a census not taken */

			snprintf(link, sizeof(link), "/incidents/%s/%s", names[i], files[j]);
			jsonw__string(w, link);
		}
		jsonw__end_array(w);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	/* the same bundles by job: every rank's of one job together, newest first */
	jsonw__name(w, "jobs");
	jsonw__start_array(w);
	list_jobs(w, names, n);
	jsonw__end_array(w);
	jsonw__end_object(w);
	for (uint32_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int incidents__open_file(struct incidents *in, const char *bundle, const char *file)
{
	int dfd, fd;
	bool known = false;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		known |= !strcmp(file, files[i]);
	if (!known || !bundle[0] || bundle[0] == '.' || strchr(bundle, '/'))
		return -ENOENT;
	dfd = openat(in->dir_fd, bundle, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(dfd);
	return fd;
}

void incidents__hook(void *ctx, enum incident_cause cause, int pid, const char *what,
		     const struct snapshot *snap, const struct incident_census *census)
{
	struct incident inc = { .cause = cause, .pid = pid, .census = census };
	struct timespec wall;

	clock_gettime(CLOCK_REALTIME, &wall);
	inc.wall_ns = wall.tv_sec * 1000000000ULL + wall.tv_nsec;
	snprintf(inc.what, sizeof(inc.what), "%s", what);
	incidents__write(ctx, snap, &inc, NULL, 0);
}
