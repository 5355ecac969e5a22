/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * replay.h - the books rebuilt from a recording, with no access to the
 * recorded processes or their machine: calls replayed with their recorded
 * stacks, modules found by path or build-id for symbols, Python frames named
 * as recorded, BPF's counters as recorded at the end.
 */
#ifndef GL_REPLAY_H
#define GL_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include "model/snapshot.h"

struct replay;
struct rec_reader;

struct replay_opts {
	const char *const *dirs; /* build-id directories (modstore.h), searched in order */
	int ndirs;
	bool no_files;	    /* open no module file: frames stay module + offset */
	bool timeline;	    /* follow each process's bytes over time (report --perfetto) */
	bool histories;	    /* each stack's history and held memory by time (report --html) */
	bool memory_events; /* PyTorch's memory events (report --memory-viz's device_traces) */
};

/* NULL with errno on failure. o->dirs is borrowed and must outlive the replay. */
struct replay *replay__new(const struct replay_opts *o);
void replay__free(struct replay *rp);

/*
 * Reads every record of rr (named file in reports) into the books. Returns 0,
 * or -errno when reading failed part-way (what was read is in the books).
 */
int replay__read(struct replay *rp, struct rec_reader *rr, const char *file);

/*
 * The snapshot a live session would have taken at the recording's end
 * (max_stacks per process, 0: all). Borrows strings from rp, which must
 * outlive it. NULL on ENOMEM.
 */
struct snapshot *replay__snapshot(struct replay *rp, uint32_t max_stacks);
/* What the recording holds and lacks (after replay__read). */
const struct snap_recording *replay__info(const struct replay *rp);

#endif /* GL_REPLAY_H */
