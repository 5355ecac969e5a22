/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join.h - a census joined with gpuleak's books: for each tensor, the block
 * (PyTorch's allocator) or driver allocation its storage's data lies in, and
 * the line that allocated it, beside the holders the census named; tensors
 * whose memory is in no allocation seen since attach are said to predate it,
 * and where the join cannot be made (no books, CPU memory, a tensor level in
 * windows) it says why. Pure: the books come in as plain arrays.
 */
#ifndef GL_CENSUS_JOIN_H
#define GL_CENSUS_JOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "census.h"

/* One outstanding allocation of the books. */
struct census_book {
	uint64_t addr, size;
	bool block;	  /* a PyTorch block (tensor probes); else a driver allocation */
	bool leak;	  /* its stack is judged to leak */
	const char *site; /* the line that allocated it, "function (file:line)"; borrowed */
};

/* The books of one process, as the join reads them. */
struct census_books {
	bool traced;	       /* gpuleak traced the process: the arrays are its books */
	bool blocks_windowed;  /* the tensor level is traced in windows: blocks may be missing */
	bool window_open;      /* then: a window is open now */
	struct census_book *v; /* sorted by census__join_prepare(): blocks, then the rest */
	size_t n, nblocks;
	char *sites; /* where the sites' strings live, owned by whoever built the books */
};

enum census_join_kind {
	CENSUS_JOIN_BLOCK,	/* in a PyTorch block gpuleak saw allocated */
	CENSUS_JOIN_SEGMENT,	/* in a driver allocation (a segment), no block known */
	CENSUS_JOIN_PRE_ATTACH, /* device memory in no allocation seen: before attach */
	CENSUS_JOIN_CPU,	/* host memory, which gpuleak's books do not hold */
	CENSUS_JOIN_NO_BOOKS,	/* gpuleak did not trace the process */
	CENSUS_JOIN_EMPTY,	/* a storage of no bytes */
	CENSUS_JOIN_UNVERIFIED, /* the tensor's figures were not read (layout not verified) */
};

struct census_join {
	enum census_join_kind kind;
	const struct census_book *book; /* BLOCK and SEGMENT: the allocation; else NULL */
	bool block_unknown;		/* SEGMENT: the tensor level was in windows */
};

/* A leaking allocation site and the holders of the tensors in its memory. */
struct census_leak {
	const char *site;
	int tensors, storages;
	uint64_t bytes; /* of the distinct storages */
	int nr_holders;
	const char *holders[CENSUS_MAX_HOLDERS]; /* groups' paths (or tensors' holders) */
	int no_holder;				 /* of its tensors: held by no Python path */
};

struct census_joined {
	struct census_join *tensors; /* one per census tensor, in its order */
	struct census_leak *leaks;   /* by bytes, largest first */
	size_t nr_leaks;
	int pre_attach_tensors; /* device memory from before attach */
	uint64_t pre_attach_bytes;
	int joined_tensors; /* in a block or segment */
};

/* Sorts the books for the join (by address). Never fails. */
void census__join_prepare(struct census_books *b);

/*
 * Joins census c with books b (prepared). Returns 0 and fills *out
 * (census__joined_free() frees it), or -ENOMEM.
 */
int census__join(const struct census *c, const struct census_books *b, struct census_joined *out);
void census__joined_free(struct census_joined *j);

/*
 * One sentence on a leaking line l of census c: what holds its tensors as the census saw
 * it, the pattern that usually is, and what usually fixes it; a holder the census did not
 * prove is worded as a possibility. Into buf (cut to len).
 */
void census__leak_reading(const struct census *c, const struct census_leak *l, char *buf,
			  size_t len);

/* "block", "segment", "pre_attach", "cpu", "no_books", "empty", "unverified". */
const char *census__join_name(enum census_join_kind k);
/* Why there is no allocation line for a kind, one phrase; NULL for BLOCK. */
const char *census__join_why(const struct census_books *b, const struct census_join *j);

#endif /* GL_CENSUS_JOIN_H */
