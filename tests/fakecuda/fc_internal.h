/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * fc_internal.h - state shared by the stand-in's source files (never exported).
 *
 * It owns the one lock, the allocation records (a hash table keyed by kind and
 * key, plus a list of address ranges for reservations and mappings), the
 * contexts and the books the ground truth is computed from. Everything here has
 * hidden visibility; only functions marked FC_EXPORT leave the library, and
 * those never call each other: each calls a static implementation in its file.
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "fakecuda.h"

#define FC_EXPORT __attribute__((visibility("default")))

#define FC_MAX_DEVICES 64
#define FC_MAX_STACK 32
#define FC_ALIGN 512ULL
#define FC_VA_ALIGN (2ULL << 20)
#define FC_BASE_DPTR 0x7e0000000000ULL
#define FC_BASE_DPTR_V1 0x10000000ULL
#define FC_LIMIT_DPTR_V1 0x100000000ULL
#define FC_BASE_VA 0x600000000000ULL
#define FC_BASE_OBJ 0x5a0000000000ULL
#define FC_BASE_HANDLE 0xc0de00000001ULL
#define FC_BASE_FD 1000

/* Record kinds: a key only names a record of its own kind. */
enum fc_kind {
	FC_K_DPTR,    /* cuMemAlloc*, pitch, managed, async */
	FC_K_HOST,    /* cuMemHostAlloc, cuMemAllocHost*: real memory in host */
	FC_K_HOSTREG, /* cuMemHostRegister* */
	FC_K_HANDLE,  /* VMM allocation handle, refs counted */
	FC_K_MAPPING, /* VMM mapping at va of handle */
	FC_K_VA,      /* address reservation */
	FC_K_ARRAY,
	FC_K_MIPMAP,
	FC_K_IPC,    /* an open IPC mapping */
	FC_K_EXPORT, /* a shareable handle (fake fd) of a VMM handle */
	FC_K_STREAM,
};

/* Record classes beyond the charged ones (enum fakecuda_class). */
enum {
	FC_CLS_IMPORTED = FAKECUDA_NR_CLASSES, /* counted in imported_bytes */
	FC_CLS_ADDRESS,				/* counted in reserved_bytes */
	FC_CLS_NONE,				/* not memory */
};

struct fc_ctx {
	struct fc_ctx *next; /* all contexts, primaries included */
	int dev;
	int primary;
	int refs;  /* primary: retain count */
	int alive; /* created and not destroyed; primary: retained */
};

struct fc_rec {
	struct fc_rec *next;  /* hash chain */
	struct fc_rec *rnext; /* fc.ranges: reservations and mappings */
	uint64_t key;
	uint64_t size;
	uint64_t epoch;	      /* fc.epoch when made */
	uint64_t link;	      /* EXPORT: the handle exported */
	struct fc_ctx *ctx;   /* owner of non-VMM records, NULL if none */
	struct fc_rec *handle; /* MAPPING: the handle mapped (holds one reference) */
	void *host;	      /* HOST: the memory handed out */
	int kind;
	int cls;
	int dev;  /* device memory: the device it is on, -1 if none */
	int refs; /* HANDLE */
};

/* Why a record goes away. */
enum fc_why {
	FC_FREED,   /* a call freed it */
	FC_DROPPED, /* context teardown */
	FC_QUIET,   /* no books: not memory, or the library is going away */
};

struct fc_state {
	int initialized;
	int trace;
	int reuse; /* FAKECUDA_REUSE: freed addresses are handed out again */
	uint64_t return_delay_us; /* FAKECUDA_RETURN_DELAY_US */
	int ndevices;
	uint64_t capacity;
	uint64_t next_dptr, next_dptr_v1, next_va, next_obj, next_handle;
	int next_fd;
	uint64_t epoch;
	struct fc_rec **buckets;
	struct fc_rec *ranges;
	struct fc_ctx *ctxs;
	struct fc_ctx primary[FC_MAX_DEVICES];
	struct fakecuda_truth t; /* kept up to date; pid filled on read */
};

extern pthread_mutex_t fc_lock;
extern struct fc_state fc;

/* Logs a call to stderr when FAKECUDA_TRACE=1. */
void fc_trace(const char *api, CUresult rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reads the environment and allocates the table (lock held). 0 or CUresult. */
CUresult fc_setup(void);

/* With the lock held: 3 before cuInit, else 0. */
CUresult fc_need_init(void);

/* With the lock held: the calling thread's current context if it is usable
 * (cuInit done, context alive); else NULL and *rc says why (3 or 201). */
struct fc_ctx *fc_need_ctx(CUresult *rc);

/* The calling thread's current context (top of its stack) or NULL. */
struct fc_ctx *fc_current(void);

/* The next address of a bump range, aligned; 0 when the range is exhausted. */
uint64_t fc_bump(uint64_t *next, uint64_t size, uint64_t align, uint64_t limit);

/* 2 when size more bytes of class cls would exceed the capacity, else 0. */
CUresult fc_over_capacity(int cls, uint64_t size);

/* Finds the record (kind, key), NULL if none. */
struct fc_rec *fc_find(int kind, uint64_t key);

/*
 * Adds a record and charges it to its class (an allocation call when cls is a
 * charged class). Returns the record, or NULL when out of host memory.
 */
struct fc_rec *fc_insert(int kind, uint64_t key, uint64_t size, int cls, struct fc_ctx *ctx);
/* A record made without a context (a VMM handle) is on device dev (lock held). */
void fc_set_dev(struct fc_rec *r, int dev);

/* Removes the record, updates the books for why, frees r and r->host (or keeps the
 * address for reuse, see fc_reuse()). */
void fc_remove(struct fc_rec *r, enum fc_why why);

/* fc_remove(, FC_FREED) of the record (kind, key): 1, or 0 when there is none. */
int fc_free_key(int kind, uint64_t key);

/* Address pools of FAKECUDA_REUSE. */
enum fc_pool { FC_POOL_DPTR, FC_POOL_DPTR_V1, FC_POOL_HOST, FC_POOL_HANDLE, FC_NR_POOLS };

/*
 * With FAKECUDA_REUSE=1: an address of pool freed earlier, on any thread, that
 * holds size bytes, the most recently freed first (as the real driver's
 * sub-allocator hands them out); its memory in *host for FC_POOL_HOST. 0 when
 * reuse is off or none fits (lock held).
 */
uint64_t fc_reuse(enum fc_pool pool, uint64_t size, void **host);

/* Sleeps FAKECUDA_RETURN_DELAY_US, lock not held: the driver's work after its books. */
void fc_return_delay(void);

/* Counts an allocation call's failure by its result (no-op when rc is 0). */
void fc_count_alloc_result(CUresult rc);

/* Counts a failed free call. */
void fc_count_free_failure(void);

/* Drops every record owned by ctx (FC_DROPPED). */
void fc_drop_ctx(struct fc_ctx *ctx);

/* Forgets every record, context and count, as at load; addresses keep growing (lock held). */
void fc_reset(void);

/* Links the primary contexts of fc.ndevices devices (lock held, from cuInit). */
void fc_ctx_setup(void);

/* Frees created contexts, deactivates primaries, empties this thread's stack (lock held). */
void fc_ctx_reset(void);

#endif /* FC_INTERNAL_H */
