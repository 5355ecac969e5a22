// SPDX-License-Identifier: BSD-2-Clause
/*
 * targets_attach.c - attaching what one process maps: its libcuda (said once
 * attached, with the functions it lacks), PyTorch's allocator probes, its
 * Python; a named target's first look, the scan of a process whose libraries
 * changed, and -a's scan of every process and of the system's libcuda.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "loader.h"
#include "reasons.h"
#include "stacks/python/python.h"
#include "targets_int.h"
#include "util/log.h"
#include "util/procfs.h"

static void report_attached(struct targets *s, const struct cuda_lib *lib, int n, int pid)
{
	char missing[2048];
	char comm[32] = "";

	if (pid > 0 && procfs__comm(pid, comm, sizeof(comm)))
		comm[0] = '\0';
	libcuda__missing(lib, true, missing, sizeof(missing));
	if (missing[0])
		log_warn(
			"%s lacks %s: those calls are not traced (a driver older than gpuleak expects: "
			"memory they allocate shows up in NVML's figure only)",
			lib->display, missing);
	libcuda__missing(lib, false, missing, sizeof(missing));
	if (missing[0])
		log_debug("%s does not export: %s", lib->display, missing);
	if (pid > 0)
		log_info("attached to PID %d (%s): %d functions in %s (%d probes)", pid, comm, n,
			 lib->display, tracer__nr_probes(s->tracer));
	else
		log_info("attached: %d functions in %s (%d probes)", n, lib->display,
			 tracer__nr_probes(s->tracer));
}

/* pid maps a libcuda file past the cap of files attached at once: counted once per
 * process and file, the file named once. */
static void lib_cap_reached(struct targets *s, const struct cuda_lib *lib, int pid)
{
	struct full_lib *f = NULL;

	for (int i = 0; i < s->nr_full_libs && !f; i++)
		if (s->full_libs[i].dev == lib->dev && s->full_libs[i].ino == lib->ino)
			f = &s->full_libs[i];
	if (f) {
		s->libs_refused += f->last_pid != pid;
		f->last_pid = pid;
		return;
	}
	s->libs_refused++;
	if (s->nr_full_libs < (int)(sizeof(s->full_libs) / sizeof(s->full_libs[0])))
		s->full_libs[s->nr_full_libs++] =
			(struct full_lib){ .dev = lib->dev, .ino = lib->ino, .last_pid = pid };
	log_warn("%s (PID %d) is not traced: %d libcuda files are attached already, the most "
		 "one gpuleak attaches (files are kept until it exits); counted in "
		 "gpuleak_cap_hits_total{cap=\"libraries\"}",
		 lib->display, pid, GL_MAX_LIBS);
}

int targets__attach_lib(struct targets *s, const struct cuda_lib *lib, int pid)
{
	int n;

	if (tracer__has_lib(s->tracer, lib->dev, lib->ino)) {
		if (pid > 0)
			log_info("attached to PID %d through %s", pid, lib->display);
		return 0;
	}
	n = tracer__attach_lib(s->tracer, lib);
	if (n == -ENOSPC) {
		lib_cap_reached(s, lib, pid > 0 ? pid : s->scanning);
		return 0;
	}
	if (n < 0)
		return n; /* explained by the tracer */
	report_attached(s, lib, n, pid);
	return 0;
}

int targets__attach_torch(struct targets *s, int pid)
{
	char path[PATH_MAX], display[PATH_MAX];
	dev_t dev;
	ino_t ino;
	int err;

	if (s->o.no_torch)
		return 1;
	if (libcuda__find_torch(pid, path, sizeof(path), display, sizeof(display), &dev, &ino))
		return 0;
	if (tracer__has_torch(s->tracer, dev, ino)) {
		tracer__torch_found(s->tracer, pid, dev, ino);
		return 1;
	}
	for (int i = 0; i < s->nr_torch_denied; i++)
		if (s->torch_denied[i].dev == dev && s->torch_denied[i].ino == ino)
			return 1;
	err = tracer__attach_torch(s->tracer, path, dev, ino);
	if (err == -EPERM && s->o.keep_going) {
		/* the agent goes on: tensor blocks are then not traced in this library */
		log_warn("no permission to attach PyTorch's allocator probes in %s: driver-level "
			 "accounting only",
			 display);
		if (s->nr_torch_denied <
		    (int)(sizeof(s->torch_denied) / sizeof(s->torch_denied[0])))
			s->torch_denied[s->nr_torch_denied++] = (struct lib_id){ dev, ino };
		return 1;
	}
	if (err == -EPERM) {
		tracer__explain_eperm("failed to attach PyTorch's allocator probes");
		return -EPERM;
	}
	if (err == -ENOENT || err == -ESRCH)
		log_msg(s->o.torch ? LOG_WARN : LOG_INFO,
			"%s has no pytorch:malloc/free probes: tensor blocks are not traced, "
			"driver-level accounting only",
			display);
	else if (err)
		log_warn(
			"failed to attach PyTorch's allocator probes in %s: %s (tensor blocks are not "
			"traced; rerun with -v for the loader's reason, or pass --no-torch)",
			display, strerror(-err));
	else
		log_info("attached PyTorch's allocator probes in %s (tensor blocks: torch_block)",
			 display);
	if (!err)
		tracer__torch_found(s->tracer, pid, dev, ino);
	return 1;
}

static int find_xla(const struct map_entry *e, void *ctx)
{
	const char **found = ctx;

	if (!e->path[0] || !libcuda__is_xla_path(e->path))
		return 0;
	*found = strdup(e->path);
	return 1;
}

/*
 * A target that ran CUDA before gpuleak attached and has XLA loaded: JAX's
 * default pool, preallocated at its start, was not seen. Said once, on stderr.
 */
static void warn_xla_before_attach(int pid)
{
	char *path = NULL;

	if (procfs__for_each_map(pid, find_xla, &path) != 1 || !path)
		goto cleanup;
	log_warn("PID %d has XLA loaded (%s) and used CUDA before gpuleak attached: a pool XLA "
		 "preallocated then (JAX's default: 75%% of each device in one block) is not "
		 "seen, and growth inside such a pool never is; to see each buffer at its Python "
		 "line, run the job with XLA_PYTHON_CLIENT_PREALLOCATE=false "
		 "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
		 pid, path);
cleanup:
	free(path);
}

/* A libcuda pid maps but gpuleak cannot read: said once per file. */
static void unreadable_lib(struct targets *s, int pid, const struct cuda_lib *lib)
{
	struct stat st;
	int n = (int)(sizeof(s->bad_libs) / sizeof(s->bad_libs[0]));

	if (stat(lib->path, &st))
		return;
	for (int i = 0; i < s->nr_bad_libs; i++)
		if (s->bad_libs[i].dev == st.st_dev && s->bad_libs[i].ino == st.st_ino)
			return;
	if (s->nr_bad_libs < n)
		s->bad_libs[s->nr_bad_libs++] = (struct lib_id){ st.st_dev, st.st_ino };
	log_error("PID %d maps %s, which gpuleak cannot read: %s; its calls are not traced (check "
		  "the file with `readelf -d`, and that gpuleak runs as root in the target's mount "
		  "namespace)",
		  pid, lib->display, lib->why ? lib->why : "unknown");
}

int targets__try_attach(struct targets *s, struct target *t)
{
	struct cuda_lib *lib = malloc(sizeof(*lib));
	bool first = !t->tried; /* found now: it used CUDA before gpuleak started */
	int err;

	if (!lib)
		return -ENOMEM;
	t->tried = true;
	err = libcuda__find_in_process(t->pid, lib);
	if (err == -ENOENT) {
		err = 1;
	} else if (err == 0) {
		/* its maps now: a process killed before its first record is read still
		 * has its frames named */
		if (s->seen)
			s->seen(s->seen_ctx, t->pid);
		/* Python frames and PyTorch's probes first: what is allocated once
		 * "attached to PID" is said must be seen with them */
		if (!s->o.no_python)
			python__attach(s->python, t->pid);
		if (!t->torch_done) {
			err = targets__attach_torch(s, t->pid);
			t->torch_done = err == 1;
		}
		if (err >= 0)
			err = targets__attach_lib(s, lib, t->pid);
		if (!err)
			t->state = T_ATTACHED;
		if (!err && first)
			warn_xla_before_attach(t->pid);
	} else if (err == -EACCES || err == -EPERM) {
		err = reasons__maps_refused(t->pid);
	} else if (err == -ENOEXEC) {
		unreadable_lib(s, t->pid, lib);
	} else if (err != -ESRCH) {
		log_error("cannot read the libraries of PID %d: %s", t->pid, strerror(-err));
	}
	free(lib);
	return err;
}

int targets__scan_pid(struct targets *s, int pid)
{
	struct cuda_lib *lib = malloc(sizeof(*lib));
	struct target *t = targets__find(s, pid);
	int ret = 0, err;

	if (!lib)
		return 0;
	s->scanning = pid;
	err = libcuda__find_in_process(pid, lib);
	/* Python frames only for a process that uses CUDA, before its probes are in: the
	 * table of Python processes is the kernel's, and holds nothing for the others */
	if (err == 0 && !s->o.no_python)
		python__attach(s->python, pid);
	if (err == -ENOEXEC) {
		unreadable_lib(s, pid, lib);
		free(lib);
		return -ENOEXEC;
	}
	if (err == 0) {
		ret = 1;
		if (s->seen)
			s->seen(s->seen_ctx, pid);
		if (!tracer__has_lib(s->tracer, lib->dev, lib->ino))
			err = targets__attach_lib(s, lib, t ? pid : -1);
		/* one of the file's users, now that it is attached */
		tracer__lib_seen(s->tracer, lib->dev, lib->ino, pid);
		if (!err && t && t->state == T_WAITING)
			t->state = T_ATTACHED;
	} else {
		err = 0; /* none mapped (yet), or the process is gone */
	}
	free(lib);
	if (!err && targets__attach_torch(s, pid) < 0)
		err = -EPERM;
	return err == -EPERM ? -EPERM : ret;
}

static int cmp_pid(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Adds pid to the listing being made. Returns 0 or -ENOMEM. */
static int list_pid(struct targets *s, int pid)
{
	if (s->nr_listing == s->cap_listing) {
		size_t cap = s->cap_listing ? 2 * s->cap_listing : 256;
		int *p = realloc(s->listing, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->listing = p;
		s->cap_listing = cap;
	}
	s->listing[s->nr_listing++] = pid;
	return 0;
}

struct scan_ctx {
	struct targets *s;
	bool full;
};

static int scan_one(int pid, void *data)
{
	struct scan_ctx *c = data;
	struct targets *s = c->s;
	bool listed = s->nr_listed && bsearch(&pid, s->listed, s->nr_listed, sizeof(pid), cmp_pid);

	/* a listing that could not grow only costs the next rescan more reads */
	list_pid(s, pid);
	if (pid == getpid() || (listed && !c->full))
		return 0;
	return targets__scan_pid(s, pid) == -EPERM ? -EPERM : 0;
}

int targets__scan_all(struct targets *s, bool full)
{
	struct scan_ctx c = { s, full || !s->nr_listed };
	int err, *tmp;
	size_t cap;

	s->nr_listing = 0;
	err = procfs__for_each_pid(scan_one, &c);
	if (err == -EPERM)
		return -EPERM;
	/* /proc could not be listed (out of descriptors): the last listing stands */
	if (err && !s->nr_listing)
		return 0;
	if (s->nr_listing)
		qsort(s->listing, s->nr_listing, sizeof(*s->listing), cmp_pid);
	/* the listing becomes the listed; the old list's buffer is the next listing's */
	tmp = s->listed;
	s->listed = s->listing;
	s->nr_listed = s->nr_listing;
	s->listing = tmp;
	cap = s->cap_listed;
	s->cap_listed = s->cap_listing;
	s->cap_listing = cap;
	return 0;
}

int targets__attach_system_lib(struct targets *s)
{
	struct cuda_lib *lib;
	char path[PATH_MAX];
	int err = 0;

	if (s->o.libcuda)
		snprintf(path, sizeof(path), "%s", s->o.libcuda);
	else if (libcuda__search(NULL, getenv("LD_LIBRARY_PATH"), path, sizeof(path)))
		return 0;
	lib = malloc(sizeof(*lib));
	if (!lib)
		return -EIO;
	err = libcuda__open(path, path, lib);
	if (err)
		log_msg(s->o.libcuda ? LOG_ERROR : LOG_DEBUG, "cannot read %s: %s", path,
			libcuda__strerror(lib, err));
	else
		err = targets__attach_lib(s, lib, -1);
	if (!err) /* what new processes load stays attached */
		tracer__pin_lib(s->tracer, lib->dev, lib->ino);
	free(lib);
	if (err == -EPERM)
		return -EPERM;
	return err && s->o.libcuda ? -EIO : 0;
}
