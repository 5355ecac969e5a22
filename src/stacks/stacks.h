/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stacks.h - interned call stacks. A stack is a sequence of frames, innermost
 * first; equal sequences get the same id, so aggregates are keyed by id and
 * each distinct stack is stored, unwound and symbolized once.
 */
#ifndef GL_STACKS_H
#define GL_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

enum frame_kind {
	FRAME_NATIVE = 0,   /* mod = module id, addr = file offset in the module */
	FRAME_UNKNOWN = 1,  /* addr = absolute address outside any file mapping */
	FRAME_PYTHON = 2,   /* mod = Python code id (python.h), addr = line number */
	FRAME_API = 3,	    /* the traced libcuda function itself: mod = API id */
	FRAME_OVERFLOW = 4, /* the stack table was full: stands for every stack past the cap */
	FRAME_NOTE = 5,	    /* what is known of the Python caller: mod = enum frame_note */
};

/* Notes in Python processes' stacks of threads that run no Python. */
enum frame_note {
	/* the Python frames after it are another thread's: the only one inside Python then */
	NOTE_PY_INFERRED = 1,
	/* no Python frames: this thread runs no Python and no other thread was inside Python */
	NOTE_PY_NONE = 2,
	/* no Python frames: this thread runs no Python and several others were inside Python */
	NOTE_PY_AMBIGUOUS = 3,
};

/* The note as a frame name ("[...]", static), or NULL for an unknown note. */
const char *frame_note__name(uint32_t note);

struct frame {
	uint64_t addr;
	uint32_t mod;
	uint32_t kind;
};

/* A validated stack record from BPF and its variable parts (trace/event.h decodes it). */
struct stack_view {
	const struct gl_stack *rec;
	const struct gl_py_frame *py; /* rec->nr_py entries */
	const uint64_t *ips;  /* rec->nr_ips entries (unaligned-safe copy not needed: 8-aligned) */
	const uint8_t *stack; /* rec->stack_bytes bytes, a copy of the user stack at rec->sp */
};

struct addr_map;

/*
 * Whose stack it is: the process (a PID and its start time, as a reused PID
 * is another process) and its address map (modules.h), which the native
 * unwinder may read again (may be NULL: no map).
 */
struct stack_owner {
	int pid;
	uint64_t start_time;
	struct addr_map *am;
};

#define STACK_NONE 0 /* id of "no stack was captured" */

struct stacks;

/* NULL with errno on failure. */
struct stacks *stacks__new(void);
void stacks__free(struct stacks *s);

/* Id (>= 1) of the stack made of frames[0..n), interned; 0 on allocation failure. */
uint32_t stacks__intern(struct stacks *s, const struct frame *frames, uint32_t n);
/* Frames of stack id, innermost first; NULL (and *n = 0) for STACK_NONE, a bad id or no frames. */
const struct frame *stacks__get(const struct stacks *s, uint32_t id, uint32_t *n);
uint32_t stacks__count(const struct stacks *s);
/*
 * Caps the table at max distinct stacks (0: no cap). Past the cap, a new stack
 * gets the id of one overflow stack (a single FRAME_OVERFLOW frame), counted.
 */
void stacks__set_max(struct stacks *s, uint32_t max);
/* Stacks that got the overflow id because the table was full. */
uint64_t stacks__overflows(const struct stacks *s);
/*
 * Keeps only the stacks marked in keep[id] (ids 1..count) and the overflow
 * stack, renumbered densely in their old order: remap[old id] = new id, 0 for
 * a stack dropped (remap[0] = 0). keep and remap have stacks__count() + 1
 * entries. Returns 0, or -ENOMEM with the table unchanged.
 */
int stacks__compact(struct stacks *s, const uint8_t *keep, uint32_t *remap);
/* Bytes held. */
size_t stacks__mem(const struct stacks *s);

#endif /* GL_STACKS_H */
