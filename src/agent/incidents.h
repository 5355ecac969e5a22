/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * incidents.h - the flight recorder: a bundle per out-of-memory failure that
 * reaches the program, per traced process killed by a signal, and per process
 * that exits holding memory at stacks judged to leak, written by gpuleak from
 * its books the moment it learns of it.
 */
#ifndef GL_INCIDENTS_H
#define GL_INCIDENTS_H

#include <stddef.h>
#include <stdint.h>
#include "session/session.h"
#include "model/snapshot.h"

#define INCIDENTS_DEFAULT_MAX 32
#define INCIDENTS_DEFAULT_MAX_BYTES (256ULL << 20)

struct incidents_opts {
	const char *dir;    /* made 0700 if missing */
	uint32_t max_count; /* bundles kept, oldest go first (0: INCIDENTS_DEFAULT_MAX) */
	uint64_t max_bytes; /* their bytes (0: INCIDENTS_DEFAULT_MAX_BYTES) */
};

struct incident {
	enum incident_cause cause;
	int pid;
	uint64_t wall_ns;		      /* CLOCK_REALTIME */
	char what[512];			      /* one line: what happened */
	const struct incident_census *census; /* what was read of its heap (NULL: nothing) */
	/* set by incidents__write: the whole snapshot and the process in it (its job) */
	const struct snapshot *whole;
	const struct snap_proc *whole_proc;
};

struct jsonw;
struct incidents;

/* NULL with errno: the directory cannot be made or opened, is a link, another user's,
 * or writable by others (EPERM). */
struct incidents *incidents__open(const struct incidents_opts *o);
void incidents__free(struct incidents *in);
const char *incidents__dir(const struct incidents *in);
const char *incidents__cause_name(enum incident_cause c);

/*
 * Writes the bundle of process inc->pid of snap (its name into name_out), then lets the
 * oldest go past the limits. Returns 0 or -errno (said once per error, counted): the
 * partial bundle is removed and nothing else stops.
 */
int incidents__write(struct incidents *in, const struct snapshot *snap, const struct incident *inc,
		     char *name_out, size_t name_len);
uint64_t incidents__written(const struct incidents *in, enum incident_cause c);
uint64_t incidents__failed(const struct incidents *in);
/* A session's incident hook (session__set_incident_hook): ctx is the incidents. */
void incidents__hook(void *ctx, enum incident_cause cause, int pid, const char *what,
		     const struct snapshot *snap, const struct incident_census *census);
/* The bundles, newest first, each with the links to its files (serve's /incidents). */
void incidents__list_json(struct incidents *in, struct jsonw *w);
/* A bundle's file, read-only (a bundle and file name it wrote; no path): fd or -errno. */
int incidents__open_file(struct incidents *in, const char *bundle, const char *file);

#endif /* GL_INCIDENTS_H */
