/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pickle.h - a streaming writer of Python's pickle format (protocol 2): the
 * dicts, lists, strings, integers, floats, booleans and None that PyTorch's
 * memory snapshots are made of, for Python's pickle.load() to read.
 */
#ifndef GL_PICKLE_H
#define GL_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pickle {
	FILE *f;
	int depth; /* dicts and lists open */
	bool failed;
	uint32_t memo; /* objects kept for pickle__get: the next one's index */
};

/* Starts a pickle on f (not owned). */
void pickle__start(struct pickle *p, FILE *f);
/* Ends it; returns 0, or -EINVAL (a dict or list left open) or -EIO (a write failed). */
int pickle__finish(struct pickle *p);

/* A dict's items are a key then a value, as many as wanted; a list's, values. */
void pickle__dict(struct pickle *p);
void pickle__end_dict(struct pickle *p);
void pickle__list(struct pickle *p);
void pickle__end_list(struct pickle *p);

void pickle__str(struct pickle *p, const char *s); /* NULL: None */
void pickle__int(struct pickle *p, int64_t v);
void pickle__uint(struct pickle *p, uint64_t v);
void pickle__float(struct pickle *p, double v);
void pickle__bool(struct pickle *p, bool v);
void pickle__none(struct pickle *p);
/* A tuple of two integers. */
void pickle__pair(struct pickle *p, int64_t a, int64_t b);
/* Keeps the object just written (a value, or a dict or list just ended): its index. */
uint32_t pickle__keep(struct pickle *p);
/* The object kept under index, again (the same object, not a copy). */
void pickle__get(struct pickle *p, uint32_t index);

#endif /* GL_PICKLE_H */
