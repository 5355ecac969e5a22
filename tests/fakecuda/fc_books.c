// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fc_books.c - the stand-in's state and ground truth.
 *
 * It owns the lock, the record table, the books (what is outstanding per class,
 * what was allocated, freed, dropped or refused since the mark), the fakecuda_*
 * truth API, and the library's life cycle: fork (the child starts empty) and
 * unload (everything is freed).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fc_internal.h"

#define FC_BUCKETS (1U << 16)
#define FC_DEFAULT_CAPACITY (64ULL << 30)
#define FC_DEFAULT_DEVICES 2

pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
struct fc_state fc;

void fc_trace(const char *api, CUresult rc, const char *fmt, ...)
{
	char args[256];
	va_list ap;

	if (!fc.trace)
		return;
	va_start(ap, fmt);
	/* a truncated argument list is still worth printing */
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fakecuda[%d]: %s(%s) = %d\n", (int)getpid(), api, args, (int)rc);
}

static int env_u64(const char *name, uint64_t *out)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s || *s == '-') {
		fprintf(stderr, "fakecuda: ignoring %s=%s: not a number\n", name, s);
		return 0;
	}
	*out = v;
	return 1;
}

CUresult fc_setup(void)
{
	uint64_t v;

	if (fc.initialized)
		return CUDA_SUCCESS;
	fc.buckets = calloc(FC_BUCKETS, sizeof(*fc.buckets));
	if (!fc.buckets)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fc.trace = env_u64("FAKECUDA_TRACE", &v) && v;
	fc.reuse = env_u64("FAKECUDA_REUSE", &v) && v;
	if (env_u64("FAKECUDA_RETURN_DELAY_US", &v))
		fc.return_delay_us = v > 1000000 ? 1000000 : v;
	fc.capacity = FC_DEFAULT_CAPACITY;
	if (env_u64("FAKECUDA_CAPACITY", &v))
		fc.capacity = v;
	fc.ndevices = FC_DEFAULT_DEVICES;
	if (env_u64("FAKECUDA_DEVICES", &v))
		fc.ndevices = v > FC_MAX_DEVICES ? FC_MAX_DEVICES : (int)v;
	if (!fc.next_dptr) {
		/* a library loaded again (dlclose, dlopen) hands out other addresses, as a
		 * real driver's new mappings would: the first load's base moves by a
		 * clock-chosen step, each later load of the process by one more (counted
		 * in the environment, which outlives the library; a base chosen by the
		 * clock again was the same one time in 256, and the second load's blocks
		 * then took the first's live addresses) */
		const char *seq = getenv("FAKECUDA_LOAD_SEQ");
		struct timespec ts;
		uint64_t step;
		char buf[24];

		clock_gettime(CLOCK_MONOTONIC, &ts);
		step = seq ? strtoull(seq, NULL, 10) + 1 : (uint64_t)(ts.tv_nsec >> 10);
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)step);
		setenv("FAKECUDA_LOAD_SEQ", buf, 1);
		fc.next_dptr = FC_BASE_DPTR + (step & 0xff) * (1ULL << 32);
		fc.next_dptr_v1 = FC_BASE_DPTR_V1;
		fc.next_va = FC_BASE_VA;
		fc.next_obj = FC_BASE_OBJ;
		fc.next_handle = FC_BASE_HANDLE;
		fc.next_fd = FC_BASE_FD;
	}
	fc.initialized = 1;
	return CUDA_SUCCESS;
}

CUresult fc_need_init(void)
{
	return fc.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

struct fc_ctx *fc_need_ctx(CUresult *rc)
{
	struct fc_ctx *ctx;

	if (!fc.initialized) {
		*rc = CUDA_ERROR_NOT_INITIALIZED;
		return NULL;
	}
	ctx = fc_current();
	if (!ctx || !ctx->alive) {
		*rc = CUDA_ERROR_INVALID_CONTEXT;
		return NULL;
	}
	*rc = CUDA_SUCCESS;
	return ctx;
}

uint64_t fc_bump(uint64_t *next, uint64_t size, uint64_t align, uint64_t limit)
{
	uint64_t addr = (*next + align - 1) & ~(align - 1);
	uint64_t end;

	if (addr < *next || __builtin_add_overflow(addr, size, &end) || end > limit)
		return 0;
	/* keep a gap so that an address one past the end names nothing */
	*next = (end + align) & ~(align - 1);
	return addr;
}

CUresult fc_over_capacity(int cls, uint64_t size)
{
	uint64_t used = fc.t.total_bytes[cls];

	if (cls == FAKECUDA_DEVICE || cls == FAKECUDA_MANAGED)
		used = fc.t.total_bytes[FAKECUDA_DEVICE] + fc.t.total_bytes[FAKECUDA_MANAGED];
	if (size > fc.capacity || used > fc.capacity - size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

static struct fc_rec **bucket(int kind, uint64_t key)
{
	uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ULL;

	return &fc.buckets[h >> 48];
}

struct fc_rec *fc_find(int kind, uint64_t key)
{
	struct fc_rec *r;

	if (!fc.buckets)
		return NULL;
	for (r = *bucket(kind, key); r; r = r->next) {
		if (r->kind == kind && r->key == key)
			return r;
	}
	return NULL;
}

static int seen(const struct fc_rec *r)
{
	return fc.epoch && r->epoch == fc.epoch;
}

static int is_range(int kind)
{
	return kind == FC_K_VA || kind == FC_K_MAPPING;
}

struct fc_rec *fc_insert(int kind, uint64_t key, uint64_t size, int cls, struct fc_ctx *ctx)
{
	struct fc_rec **b = bucket(kind, key);
	struct fc_rec *r;

	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->kind = kind;
	r->key = key;
	r->size = size;
	r->cls = cls;
	r->ctx = ctx;
	r->dev = -1;
	r->epoch = fc.epoch;
	r->next = *b;
	*b = r;
	if (is_range(kind)) {
		r->rnext = fc.ranges;
		fc.ranges = r;
	}
	if (cls < FAKECUDA_NR_CLASSES) {
		fc.t.total_bytes[cls] += size;
		fc.t.total_allocs[cls]++;
		if (seen(r)) {
			fc.t.bytes[cls] += size;
			fc.t.allocs[cls]++;
		}
		fc.t.alloc_calls++;
		if (ctx)
			fc_set_dev(r, ctx->dev);
	} else if (cls == FC_CLS_IMPORTED) {
		fc.t.imported_bytes += size;
	} else if (cls == FC_CLS_ADDRESS) {
		fc.t.reserved_bytes += size;
	}
	return r;
}

void fc_set_dev(struct fc_rec *r, int dev)
{
	int tallied = r->cls == FAKECUDA_DEVICE && seen(r);

	if (tallied && r->dev >= 0 && r->dev < FAKECUDA_TRUTH_DEVICES)
		fc.t.dev_bytes[r->dev] -= r->size;
	r->dev = dev;
	if (tallied && dev >= 0 && dev < FAKECUDA_TRUTH_DEVICES)
		fc.t.dev_bytes[dev] += r->size;
}

static void unlink_rec(struct fc_rec *r)
{
	struct fc_rec **pp;

	for (pp = bucket(r->kind, r->key); *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	if (!is_range(r->kind))
		return;
	for (pp = &fc.ranges; *pp; pp = &(*pp)->rnext) {
		if (*pp == r) {
			*pp = r->rnext;
			break;
		}
	}
}

static void account_removal(const struct fc_rec *r, enum fc_why why)
{
	int cls = r->cls;

	if (cls == FC_CLS_IMPORTED) {
		fc.t.imported_bytes -= r->size;
		return;
	}
	if (cls == FC_CLS_ADDRESS) {
		fc.t.reserved_bytes -= r->size;
		return;
	}
	if (cls >= FAKECUDA_NR_CLASSES)
		return;
	fc.t.total_bytes[cls] -= r->size;
	fc.t.total_allocs[cls]--;
	if (seen(r)) {
		fc.t.bytes[cls] -= r->size;
		fc.t.allocs[cls]--;
		if (cls == FAKECUDA_DEVICE && r->dev >= 0 && r->dev < FAKECUDA_TRUTH_DEVICES)
			fc.t.dev_bytes[r->dev] -= r->size;
	}
	if (why == FC_FREED && seen(r)) {
		fc.t.free_calls++;
	} else if (why == FC_FREED) {
		fc.t.unmatched_frees++;
	} else if (why == FC_DROPPED && seen(r)) {
		fc.t.ctx_dropped_bytes += r->size;
		fc.t.ctx_dropped_allocs++;
	} else if (why == FC_DROPPED) {
		fc.t.pre_attach_dropped_bytes += r->size;
	}
}

/* Freed addresses kept for reuse, most recently freed last. */
#define FC_MAX_HOLES 4096

struct fc_hole {
	uint64_t addr, size;
	void *host;
};

static struct fc_hole holes[FC_NR_POOLS][FC_MAX_HOLES];
static unsigned int nholes[FC_NR_POOLS];

/* Keeps a freed record's address for reuse; 0 if it does not (r->host is then the caller's). */
static int keep_hole(const struct fc_rec *r)
{
	enum fc_pool pool;

	if (!fc.reuse || (r->kind != FC_K_DPTR && r->kind != FC_K_HOST && r->kind != FC_K_HANDLE))
		return 0;
	if (r->kind == FC_K_HANDLE)
		pool = FC_POOL_HANDLE; /* handle values are reused as addresses are */
	else if (r->kind == FC_K_HOST)
		pool = FC_POOL_HOST;
	else
		pool = r->key < FC_LIMIT_DPTR_V1 ? FC_POOL_DPTR_V1 : FC_POOL_DPTR;
	if (nholes[pool] == FC_MAX_HOLES)
		return 0;
	holes[pool][nholes[pool]++] = (struct fc_hole){ r->key, r->size, r->host };
	return 1;
}

uint64_t fc_reuse(enum fc_pool pool, uint64_t size, void **host)
{
	uint64_t addr;

	for (unsigned int i = nholes[pool]; fc.reuse && i-- > 0;) {
		if (holes[pool][i].size < size)
			continue;
		addr = holes[pool][i].addr;
		if (host)
			*host = holes[pool][i].host;
		holes[pool][i] = holes[pool][--nholes[pool]];
		fc.t.reused_addresses++;
		return addr;
	}
	return 0;
}

static void free_holes(void)
{
	for (unsigned int i = 0; i < nholes[FC_POOL_HOST]; i++)
		free(holes[FC_POOL_HOST][i].host);
	memset(nholes, 0, sizeof(nholes));
}

void fc_remove(struct fc_rec *r, enum fc_why why)
{
	unlink_rec(r);
	account_removal(r, why);
	if (!keep_hole(r))
		free(r->host);
	free(r);
}

int fc_free_key(int kind, uint64_t key)
{
	struct fc_rec *r = fc_find(kind, key);

	if (!r)
		return 0;
	fc_remove(r, FC_FREED);
	return 1;
}

void fc_return_delay(void)
{
	struct timespec ts;

	if (!fc.return_delay_us)
		return;
	ts.tv_sec = 0;
	ts.tv_nsec = (long)fc.return_delay_us * 1000;
	nanosleep(&ts, NULL);
}

void fc_count_alloc_result(CUresult rc)
{
	if (rc == CUDA_ERROR_OUT_OF_MEMORY)
		fc.t.oom_failures++;
	else if (rc != CUDA_SUCCESS)
		fc.t.other_failures++;
}

void fc_count_free_failure(void)
{
	fc.t.free_failures++;
}

void fc_drop_ctx(struct fc_ctx *ctx)
{
	struct fc_rec **pp;
	unsigned int i;

	if (!fc.buckets)
		return;
	for (i = 0; i < FC_BUCKETS; i++) {
		pp = &fc.buckets[i];
		while (*pp) {
			if ((*pp)->ctx == ctx)
				fc_remove(*pp, FC_DROPPED); /* *pp now names the next record */
			else
				pp = &(*pp)->next;
		}
	}
}

void fc_reset(void)
{
	struct fc_rec *r, *next;
	unsigned int i;

	for (i = 0; fc.buckets && i < FC_BUCKETS; i++) {
		for (r = fc.buckets[i]; r; r = next) {
			next = r->next;
			free(r->host);
			free(r);
		}
	}
	free(fc.buckets);
	free_holes();
	fc.buckets = NULL;
	fc.ranges = NULL;
	fc_ctx_reset();
	memset(&fc.t, 0, sizeof(fc.t));
	fc.epoch = 0;
	fc.initialized = 0;
}

FC_EXPORT void fakecuda_mark(void)
{
	struct fakecuda_truth *t = &fc.t;

	pthread_mutex_lock(&fc_lock);
	fc.epoch++;
	memset(t->bytes, 0, sizeof(t->bytes));
	memset(t->dev_bytes, 0, sizeof(t->dev_bytes));
	memset(t->allocs, 0, sizeof(t->allocs));
	t->alloc_calls = t->free_calls = t->unmatched_frees = 0;
	t->oom_failures = t->other_failures = t->free_failures = 0;
	t->ctx_dropped_bytes = t->ctx_dropped_allocs = t->pre_attach_dropped_bytes = 0;
	t->reused_addresses = 0;
	pthread_mutex_unlock(&fc_lock);
}

FC_EXPORT void fakecuda_truth(struct fakecuda_truth *t)
{
	pthread_mutex_lock(&fc_lock);
	*t = fc.t;
	t->ndevices = fc.ndevices;
	pthread_mutex_unlock(&fc_lock);
	t->pid = (int)getpid();
}

FC_EXPORT int fakecuda_truth_write(FILE *f, const struct fakecuda_truth *t, const char *extra)
{
	const uint64_t *b = t->bytes, *a = t->allocs, *tb = t->total_bytes, *ta = t->total_allocs;
	int n;

	n = fprintf(f,
		    "{\"device_bytes\":%llu,\"managed_bytes\":%llu,\"host_pinned_bytes\":%llu,"
		    "\"outstanding_allocs\":%llu,\"device_allocs\":%llu,\"managed_allocs\":%llu,"
		    "\"host_pinned_allocs\":%llu,",
		    (unsigned long long)b[0], (unsigned long long)b[1], (unsigned long long)b[2],
		    (unsigned long long)(a[0] + a[1] + a[2]), (unsigned long long)a[0],
		    (unsigned long long)a[1], (unsigned long long)a[2]);
	if (n < 0 || fprintf(f, "\"device_bytes_by_device\":[") < 0)
		return -1;
	for (int d = 0; d < t->ndevices && d < FAKECUDA_TRUTH_DEVICES; d++)
		if (fprintf(f, "%s%llu", d ? "," : "", (unsigned long long)t->dev_bytes[d]) < 0)
			return -1;
	n = fprintf(f,
		    "],\"pre_attach_device_bytes\":%llu,\"pre_attach_managed_bytes\":%llu,"
		    "\"pre_attach_host_pinned_bytes\":%llu,\"pre_attach_allocs\":%llu,",
		    (unsigned long long)(tb[0] - b[0]), (unsigned long long)(tb[1] - b[1]),
		    (unsigned long long)(tb[2] - b[2]),
		    (unsigned long long)(ta[0] + ta[1] + ta[2] - a[0] - a[1] - a[2]));
	if (n < 0)
		return -1;
	n = fprintf(f,
		    "\"unmatched_frees\":%llu,\"oom_failures\":%llu,\"other_failures\":%llu,"
		    "\"free_failures\":%llu,\"alloc_calls\":%llu,\"free_calls\":%llu,"
		    "\"ctx_dropped_bytes\":%llu,\"ctx_dropped_allocs\":%llu,"
		    "\"pre_attach_dropped_bytes\":%llu,\"reserved_bytes\":%llu,"
		    "\"imported_bytes\":%llu,\"reused_addresses\":%llu,\"pid\":%d%s%s}\n",
		    (unsigned long long)t->unmatched_frees, (unsigned long long)t->oom_failures,
		    (unsigned long long)t->other_failures, (unsigned long long)t->free_failures,
		    (unsigned long long)t->alloc_calls, (unsigned long long)t->free_calls,
		    (unsigned long long)t->ctx_dropped_bytes,
		    (unsigned long long)t->ctx_dropped_allocs,
		    (unsigned long long)t->pre_attach_dropped_bytes,
		    (unsigned long long)t->reserved_bytes, (unsigned long long)t->imported_bytes,
		    (unsigned long long)t->reused_addresses, t->pid, extra && *extra ? "," : "",
		    extra ? extra : "");
	if (n < 0)
		return -1;
	return fflush(f) ? -1 : 0;
}

FC_EXPORT int fakecuda_truth_json(FILE *f, const char *extra)
{
	struct fakecuda_truth t;

	fakecuda_truth(&t);
	return fakecuda_truth_write(f, &t, extra);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&fc_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&fc_lock);
}

/* The child owns no device memory and no context: it starts as a new process would. */
static void fork_child(void)
{
	fc_reset();
	pthread_mutex_unlock(&fc_lock);
}

__attribute__((constructor)) static void fc_load(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void fc_unload(void)
{
	pthread_mutex_lock(&fc_lock);
	fc_reset();
	pthread_mutex_unlock(&fc_lock);
}
