/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mouth.h - the ring buffer's mouth: a thread that copies each record out of
 * the kernel's ring as soon as it is committed, into a backlog in gpuleak's
 * own memory, where the reader takes it in order.
 *
 * The kernel's ring then only has to hold what is written between two of the
 * thread's visits (a millisecond of records), not everything written while the
 * reader is busy (a burst of new stacks to unwind, a library's debug info being
 * read, a census): it can be small, and the backlog takes memory only while a
 * burst lasts. The backlog is bounded: at its limit the thread stops copying,
 * the ring fills, and the programs count what they drop, as they always have.
 */
#ifndef GL_MOUTH_H
#define GL_MOUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mouth;

/* One record as it lay in the ring: [start, end) are its ring positions. */
struct mouth_rec {
	unsigned long start, end;
	uint32_t size;	    /* bytes in data: the record, its unused reservation left out */
	uint32_t ring_size; /* bytes the record took in the ring */
	unsigned char data[];
};

struct mouth_stats {
	uint64_t peak_bytes; /* the backlog's largest size */
	uint64_t full;	     /* times the backlog reached its limit and the copying stopped */
	uint64_t limit;	     /* that limit */
	/* records taken from the ring that could not be copied (no memory), by type
	 * (enum gl_rec_type; 0: too short to have one): lost, and counted as such */
	uint64_t lost[4];
};

/*
 * A mouth on the ring buffer map ring_fd, whose consumer position is mapped at
 * cons; the backlog holds at most limit bytes. trim(size, data) gives the bytes
 * of a record worth copying. polls (may be NULL): the programs' flag, set while
 * the thread polls the ring itself (records are flowing), when they wake it for
 * the ring's fill alone. NULL and errno on failure.
 */
struct mouth *mouth__new(int ring_fd, const unsigned long *cons, size_t limit,
			 uint32_t (*trim)(const void *data, uint32_t size), uint32_t *polls);
/* Starts the thread (it keeps no capability and takes no signal); 0 or -errno. */
int mouth__start(struct mouth *m);
void mouth__free(struct mouth *m);

/*
 * Copies what the ring holds now: in the caller's thread before the thread runs
 * (records copied, or -errno); once it runs, asks it to (0: its copies come to
 * the backlog as they are made, and mouth__event_fd() says so).
 */
int mouth__fill(struct mouth *m);
/* The oldest record not yet taken, or NULL; valid until mouth__pop(). */
const struct mouth_rec *mouth__peek(struct mouth *m);
void mouth__pop(struct mouth *m);
/* Every record below this ring position has been taken (popped). */
unsigned long mouth__taken(struct mouth *m);
/* Readable once records were copied since it was last cleared (mouth__clear_event). */
int mouth__event_fd(const struct mouth *m);
/* Clears it; true where records were copied since the last clear. */
bool mouth__clear_event(struct mouth *m);
void mouth__stats(struct mouth *m, struct mouth_stats *out);

#endif /* GL_MOUTH_H */
