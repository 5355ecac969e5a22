// SPDX-License-Identifier: BSD-2-Clause
/*
 * unwind.c - stack records to instruction addresses.
 *
 * FP records come unwound from the kernel: handed on. DWARF records are
 * unwound with the CFI of the process's modules (dwarf.c), through one Dwfl
 * per process, built from the process's address map and built again when the
 * map changes; processes without one (no map, nothing readable, not x86-64)
 * get the rbp chain of the copy.
 *
 * The cache. A process calls the driver from a handful of call sites, over
 * and over, with the same stack. Unwinding is deterministic: given the
 * modules, the pcs are a function of ip, sp, bp and of the stack words the
 * unwinder reads, and dwarf_replay__deps() says which of those reads, and
 * whether bp, can change them (return addresses, saved rbp where frame
 * pointers are used; not the other callee-saved registers). An entry keeps
 * those reads (address, word or unreadable), bp if needed, and the pcs. A
 * record is answered from an entry with its ip and sp whose reads all give
 * the same outcome on the record's copy: then the unwinder would have read
 * the same words at the same addresses and produced the same pcs. Entries are
 * found by (ip, sp, word at sp); sp is part of the key because the addresses
 * read derive from it (one call site on one thread has one sp; CFA
 * arithmetic is not assumed to be translation-invariant). The cache of a
 * process is dropped when its Dwfl is built again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dwarf.h"
#include "dwarf_deps.h"
#include "unwind.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"

#define MAX_PROCS 64	       /* processes with a Dwfl and a cache; least recently used go */
#define MAX_ENTRIES 4096       /* cached stacks per process; beyond, its cache starts over */
#define CACHE_BYTES (64 << 20) /* all caches together; beyond, they all start over */
/* re-reading a process's maps on an unknown pc: books.c's policy on the same fields */

struct proc_key {
	int64_t pid;
	uint64_t start_time;
};

struct cache_key {
	uint64_t ip, sp, word0;
};

struct centry {
	struct centry *next; /* same key */
	uint64_t bp;
	bool need_bp;
	uint16_t nr_pcs;
	uint16_t max; /* the unwinding stopped at max frames if nr_pcs == max */
	uint32_t nr_checks;
	struct dwarf_check *checks;
	uint64_t *pcs;
};

/* What the unwinder keeps for one process. */
struct uproc {
	struct dwarf_proc *dw;	   /* NULL: walk frame pointers */
	const struct addr_map *am; /* dw was built from am at generation gen */
	uint64_t gen;
	bool tried;
	struct htab *cache; /* cache_key -> struct centry * (chain) */
	uint32_t nr_entries;
	uint64_t used; /* LRU clock */
};

struct unwinder {
	struct modules *mods;
	enum gl_stack_mode mode;
	struct dwarf_ctx *dw; /* NULL: no CFI unwinding on this architecture */
	struct dwarf_replay *replay;
	struct htab *procs; /* proc_key -> struct uproc * */
	uint64_t clock;
	size_t cache_bytes;
	struct unwind_stats st;
};

struct unwinder *unwinder__new(struct modules *m, enum gl_stack_mode mode)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->mods = m;
	u->mode = mode;
	if (mode != GL_STACK_DWARF)
		return u;
	u->procs = htab__new(sizeof(struct proc_key), sizeof(struct uproc *));
	if (!u->procs)
		goto fail;
#ifdef __x86_64__
	u->dw = dwarf_ctx__new(m);
	u->replay = dwarf_replay__new();
	if (!u->dw || !u->replay)
		goto fail;
#endif
	return u;
fail:
	unwinder__free(u);
	errno = ENOMEM;
	return NULL;
}

static size_t entry_size(uint32_t nr_checks, int nr_pcs)
{
	return sizeof(struct centry) + nr_checks * sizeof(struct dwarf_check) +
	       nr_pcs * sizeof(uint64_t);
}

static void cache_clear(struct unwinder *u, struct uproc *up)
{
	struct centry **head, *e, *next;
	size_t it = 0;

	while (up->cache && (head = htab__next(up->cache, &it, NULL))) {
		for (e = *head; e; e = next) {
			next = e->next;
			u->cache_bytes -= entry_size(e->nr_checks, e->nr_pcs);
			free(e);
		}
	}
	if (up->cache)
		htab__clear(up->cache);
	up->nr_entries = 0;
}

static void uproc_free(struct unwinder *u, struct uproc *up)
{
	if (!up)
		return;
	cache_clear(u, up);
	htab__free(up->cache);
	dwarf_proc__free(up->dw);
	free(up);
}

void unwinder__free(struct unwinder *u)
{
	const struct unwind_stats *st;
	struct uproc **up;
	size_t it = 0;

	if (!u)
		return;
	st = &u->st;
	if (st->stacks)
		log_debug("unwinder: %llu DWARF stacks: %llu from the cache (%.0f ns each), %llu "
			  "unwound (%.1f us each, %llu not cacheable), %llu by frame pointers; "
			  "%llu Dwfl builds (%.1f ms each)",
			  (unsigned long long)st->stacks, (unsigned long long)st->hits,
			  st->hits ? (double)st->hit_ns / st->hits : 0,
			  (unsigned long long)st->misses,
			  st->misses ? st->miss_ns / 1e3 / st->misses : 0,
			  (unsigned long long)st->uncached, (unsigned long long)st->fp_walks,
			  (unsigned long long)st->builds,
			  st->builds ? st->build_ns / 1e6 / st->builds : 0);
	while (u->procs && (up = htab__next(u->procs, &it, NULL)))
		uproc_free(u, *up);
	htab__free(u->procs);
	dwarf_ctx__free(u->dw);
	dwarf_replay__free(u->replay);
	free(u);
}

void unwinder__stats(const struct unwinder *u, struct unwind_stats *out)
{
	*out = u->st;
}

/* Records from the kernel's frame-pointer walk. */
static int fp_stack(const struct stack_view *v, uint64_t *ips, int max)
{
	int n = 0;

	for (int i = 0; i < v->rec->nr_ips && n < max; i++) {
		if (!v->ips[i])
			break;
		ips[n++] = v->ips[i];
		/*
		 * At a function's first instruction the caller's return address is at
		 * sp, not yet behind a frame pointer: a frame-pointer walk skips the
		 * caller unless the kernel adds it (6.12+ does, for functions that
		 * start with push %rbp). Add it where it is missing.
		 */
		if (i == 0 && v->rec->ret_addr && n < max &&
		    (v->rec->nr_ips < 2 || v->ips[1] != v->rec->ret_addr))
			ips[n++] = v->rec->ret_addr;
	}
	return n;
}

static void evict_lru(struct unwinder *u)
{
	struct proc_key victim = { 0 };
	const struct proc_key *k;
	struct uproc **up, *old = NULL;
	size_t it = 0;

	while ((up = htab__next(u->procs, &it, (const void **)&k))) {
		if (!old || (*up)->used < old->used) {
			old = *up;
			victim = *k;
		}
	}
	if (old) {
		htab__delete(u->procs, &victim);
		uproc_free(u, old);
	}
}

static struct uproc *uproc_get(struct unwinder *u, const struct stack_owner *proc)
{
	struct proc_key k = { .pid = proc->pid, .start_time = proc->start_time };
	struct uproc **slot, *up;
	bool created;

	slot = htab__lookup(u->procs, &k);
	if (slot) {
		(*slot)->used = ++u->clock;
		return *slot;
	}
	if (htab__count(u->procs) >= MAX_PROCS)
		evict_lru(u);
	up = calloc(1, sizeof(*up));
	if (!up)
		return NULL;
	up->cache = htab__new(sizeof(struct cache_key), sizeof(struct centry *));
	slot = up->cache ? htab__upsert(u->procs, &k, &created) : NULL;
	if (!slot) {
		uproc_free(u, up);
		return NULL;
	}
	*slot = up;
	up->used = ++u->clock;
	return up;
}

/* The Dwfl of proc matches its address map: built (again) if not. */
static void uproc_sync(struct unwinder *u, struct uproc *up, const struct stack_owner *proc)
{
	const struct addr_map *am = proc->am;
	uint64_t t0;

	if (up->tried && up->am == am && (!am || up->gen == addr_map__generation(am)))
		return;
	cache_clear(u, up);
	dwarf_proc__free(up->dw);
	up->dw = NULL;
	up->tried = true;
	up->am = am;
	if (!am || !u->dw)
		return;
	up->gen = addr_map__generation(am);
	t0 = now_ns();
	up->dw = dwarf_proc__new(u->dw, am, proc->pid);
	u->st.builds++;
	u->st.build_ns += now_ns() - t0;
	if (!up->dw)
		log_debug("PID %d: no module to unwind with (%s): walking frame pointers",
			  proc->pid, strerror(errno));
}

static bool entry_matches(const struct centry *e, const struct dwarf_input *in, int max)
{
	uint64_t w;

	if ((e->need_bp && e->bp != in->bp) || (e->nr_pcs == e->max && max > e->max))
		return false;
	for (uint32_t i = 0; i < e->nr_checks; i++) {
		const struct dwarf_check *c = &e->checks[i];
		bool ok = dwarf_input__read(in, c->addr, &w);

		if (ok != c->ok || (ok && w != c->val))
			return false;
	}
	return true;
}

/* The cached pcs of in, moved to the front of its chain; NULL if none. */
static const struct centry *cache_find(struct uproc *up, const struct cache_key *k,
				       const struct dwarf_input *in, int max)
{
	struct centry **head = htab__lookup(up->cache, k), **pp, *e;

	if (!head)
		return NULL;
	for (pp = head; (e = *pp); pp = &e->next) {
		if (!entry_matches(e, in, max))
			continue;
		*pp = e->next;
		e->next = *head;
		*head = e;
		return e;
	}
	return NULL;
}

static void cache_add(struct unwinder *u, struct uproc *up, const struct cache_key *k,
		      const struct dwarf_deps *d, uint64_t bp, const uint64_t *pcs, int n, int max)
{
	size_t checks = d->nr_checks * sizeof(*d->checks), size = entry_size(d->nr_checks, n);
	struct centry **head, *e;
	struct uproc **other;
	size_t it = 0;

	if (up->nr_entries >= MAX_ENTRIES)
		cache_clear(u, up);
	if (u->cache_bytes + size > CACHE_BYTES) {
		while ((other = htab__next(u->procs, &it, NULL)))
			cache_clear(u, *other);
	}
	e = malloc(size);
	if (!e)
		return;
	head = htab__upsert(up->cache, k, NULL);
	if (!head) {
		free(e);
		return;
	}
	e->checks = (struct dwarf_check *)(e + 1);
	e->pcs = (uint64_t *)((char *)e->checks + checks);
	memcpy(e->checks, d->checks, checks);
	memcpy(e->pcs, pcs, n * sizeof(*pcs));
	e->nr_checks = d->nr_checks;
	e->nr_pcs = n;
	e->max = max;
	e->bp = bp;
	e->need_bp = d->bp;
	e->next = *head;
	*head = e;
	up->nr_entries++;
	u->cache_bytes += size;
}

static bool all_resolved(const struct addr_map *am, const uint64_t *pcs, int n)
{
	uint64_t off;

	for (int i = 0; i < n; i++)
		if (!addr_map__resolve(am, i ? pcs[i] - 1 : pcs[i], &off))
			return false;
	return true;
}

/* A miss: libdwfl, the maps read again if a pc is unknown, then the cache. */
static int dwarf_miss(struct unwinder *u, struct uproc *up, const struct stack_owner *proc,
		      const struct dwarf_input *in, const struct cache_key *k, uint64_t ts,
		      uint64_t *ips, int max)
{
	struct dwarf_deps deps;
	int n = dwarf_proc__unwind(up->dw, in, ips, max);

	if (!all_resolved(proc->am, ips, n) && addr_map__refresh_after_miss(proc->am, ts)) {
		uproc_sync(u, up, proc);
		if (!up->dw) {
			u->st.fp_walks++;
			return dwarf__fp_walk(in, ips, max);
		}
		n = dwarf_proc__unwind(up->dw, in, ips, max);
	}
	u->st.misses++;
	if (dwarf_replay__deps(u->replay, dwarf_proc__dwfl(up->dw), in, ips, n, max, &deps) == 0)
		cache_add(u, up, k, &deps, in->bp, ips, n, max);
	else
		u->st.uncached++;
	return n;
}

static int dwarf_stack(struct unwinder *u, const struct stack_owner *proc,
		       const struct stack_view *v, uint64_t *ips, int max)
{
	const struct gl_stack *r = v->rec;
	struct dwarf_input in = { .ip = r->ip,
				  .sp = r->sp,
				  .bp = r->bp,
				  .stack = v->stack,
				  .len = r->stack_bytes };
	struct cache_key k = { .ip = r->ip, .sp = r->sp, .word0 = ~0ULL };
	const struct centry *e;
	struct uproc *up;
	uint64_t t0 = now_ns();
	int n;

	if (max > UNWIND_MAX_FRAMES)
		max = UNWIND_MAX_FRAMES;
	u->st.stacks++;
	up = proc ? uproc_get(u, proc) : NULL;
	if (up)
		uproc_sync(u, up, proc);
	if (!up || !up->dw || in.len < 8) {
		u->st.fp_walks++;
		n = dwarf__fp_walk(&in, ips, max);
		if (in.len < 8 && n == 1 && r->ret_addr && n < max)
			ips[n++] = r->ret_addr;
		return n;
	}
	dwarf_input__read(&in, in.sp, &k.word0);
	e = cache_find(up, &k, &in, max);
	if (e) {
		n = e->nr_pcs < max ? e->nr_pcs : max;
		memcpy(ips, e->pcs, n * sizeof(*ips));
		u->st.hits++;
		u->st.hit_ns += now_ns() - t0;
		return n;
	}
	n = dwarf_miss(u, up, proc, &in, &k, r->hdr.ts, ips, max);
	u->st.miss_ns += now_ns() - t0;
	return n;
}

int unwind__stack(struct unwinder *u, const struct stack_owner *who, const struct stack_view *v,
		  uint64_t *ips, int max)
{
	if (v->rec->nr_ips || u->mode != GL_STACK_DWARF)
		return fp_stack(v, ips, max);
	return dwarf_stack(u, who, v, ips, max);
}
