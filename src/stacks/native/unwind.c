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
 *
 * The kernel's copy of the cache. An entry whose reads all lie in the copy
 * is also published to BPF under an id (gpuleak_abi.h): its shape (the
 * offsets read) under its key, once for all the stacks of that shape, and its
 * words under the shape and their hash. BPF checks the same words on the live
 * stack and, when all agree, sends the id instead of the copy, which the
 * unwinder answers with the entry's pcs. Ids and their pcs stay for the
 * unwinder's life (records naming one may still be in the ring buffer when the
 * entry goes). A kernel entry stays valid while the process's modules do: it
 * outlives a user-space entry dropped for room, and a process's kernel
 * entries are withdrawn when its Dwfl is built again, or it goes.
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
#define MAX_KIDS (1 << 16)     /* ids published to BPF; beyond, no more are */
/*
 * Stacks cached under one key (the same pc, stack pointer and first word: one call site
 * reached at one depth by many paths); beyond, the least recently used go. A miss reads
 * the whole chain, so a longer one makes each new stack of such a site cost more.
 */
#define MAX_CHAIN 256
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
	uint32_t kid;	/* the id published to BPF, 0 = none */
	uint32_t shape; /* BPF holds it under this shape (struct kshape), 0 = not */
	struct dwarf_check *checks;
	uint64_t *pcs;
};

/* A shape BPF holds under a key (cache_key, a way of it), and the stacks under it. */
struct kshape {
	struct kshape *next; /* same key */
	uint8_t way;
	uint64_t used; /* when a stack was last published under it (unwinder.pub_clock) */
	struct gl_scache_shape sh;
	struct htab *stacks; /* gl_scache_vkey.hash -> struct kref: its stacks, as BPF has them */
};

/* A stack BPF holds under a shape: its id, and the words it is checked by. */
struct kref {
	uint32_t kid;
	uint64_t bp;
	uint64_t *val; /* [sh.nr_checks] */
};

/* What the unwinder keeps for one process. */
struct uproc {
	struct proc_key key;
	bool published;		   /* entries of it were published to BPF */
	struct htab *shapes;	   /* cache_key -> struct kshape * (chain): what BPF holds */
	uint32_t nr_kernel;	   /* stacks BPF holds under them */
	struct dwarf_proc *dw;	   /* NULL: walk frame pointers */
	const struct addr_map *am; /* dw was built from am at generation gen */
	uint64_t gen;
	bool tried;
	struct htab *cache; /* cache_key -> struct centry * (chain) */
	uint32_t nr_entries;
	uint64_t used; /* LRU clock */
};

/* The pcs a published id stands for. */
struct kstack {
	struct proc_key proc;
	uint16_t nr_pcs;
	uint64_t *pcs;
};

struct unwinder {
	struct modules *mods;
	struct scache_publisher pub; /* .put NULL: nothing is published */
	struct kstack *kids;	     /* id i at kids[i - 1] */
	uint32_t nr_kids, cap_kids;
	enum gl_stack_mode mode;
	struct dwarf_ctx *dw; /* NULL: no CFI unwinding on this architecture */
	struct dwarf_replay *replay;
	struct htab *procs; /* proc_key -> struct uproc * */
	uint64_t clock;
	uint64_t pub_clock; /* entries published */
	uint32_t last_shape;
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

/* Drops up's user-space entries (for room: what BPF holds stays valid). */
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

static void kshape_free(struct kshape *ks)
{
	struct kref *ref;
	size_t it = 0;

	while (ks->stacks && (ref = htab__next(ks->stacks, &it, NULL)))
		free(ref->val);
	htab__free(ks->stacks);
	free(ks);
}

/* Withdraws what BPF holds of up's process (its modules changed, or it went). */
static void kernel_clear(struct unwinder *u, struct uproc *up)
{
	struct kshape **head, *ks, *next;
	struct centry **ch;
	size_t it = 0;

	while (up->shapes && (head = htab__next(up->shapes, &it, NULL))) {
		for (ks = *head; ks; ks = next) {
			next = ks->next;
			kshape_free(ks);
		}
	}
	if (up->shapes)
		htab__clear(up->shapes);
	it = 0;
	while (up->cache && (ch = htab__next(up->cache, &it, NULL)))
		for (struct centry *e = *ch; e; e = e->next)
			e->shape = 0; /* to be written again */
	up->nr_kernel = 0;
	if (up->published && u->pub.drop)
		u->pub.drop(u->pub.ctx, (int)up->key.pid);
	up->published = false;
}

static void uproc_free(struct unwinder *u, struct uproc *up)
{
	if (!up)
		return;
	cache_clear(u, up);
	kernel_clear(u, up);
	htab__free(up->cache);
	htab__free(up->shapes);
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
	u->pub = (struct scache_publisher){ 0 }; /* the tracer may be gone: its maps go with it */
	if (u->nr_kids)
		log_debug("unwinder: %u stacks published to BPF (%llu refused), %llu records "
			  "answered by id",
			  u->nr_kids, (unsigned long long)st->publish_failed,
			  (unsigned long long)st->kernel_hits);
	while (u->procs && (up = htab__next(u->procs, &it, NULL)))
		uproc_free(u, *up);
	htab__free(u->procs);
	for (uint32_t i = 0; i < u->nr_kids; i++)
		free(u->kids[i].pcs);
	free(u->kids);
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
	up->shapes = htab__new(sizeof(struct cache_key), sizeof(struct kshape *));
	slot = up->cache && up->shapes ? htab__upsert(u->procs, &k, &created) : NULL;
	if (!slot) {
		uproc_free(u, up);
		return NULL;
	}
	*slot = up;
	up->key = k;
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
	kernel_clear(u, up);
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
static struct centry *cache_find(struct uproc *up, const struct cache_key *k,
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

void unwinder__set_publisher(struct unwinder *u, const struct scache_publisher *pub)
{
	u->pub = *pub;
}

/* A new id for pcs[0..n) of up's process; 0 when no more can be given. */
static uint32_t kid_new(struct unwinder *u, const struct uproc *up, const uint64_t *pcs, int n)
{
	struct kstack *ks;

	if (u->nr_kids >= MAX_KIDS)
		return 0;
	if (u->nr_kids == u->cap_kids) {
		uint32_t cap = u->cap_kids ? 2 * u->cap_kids : 256;

		ks = realloc(u->kids, cap * sizeof(*ks));
		if (!ks)
			return 0;
		u->kids = ks;
		u->cap_kids = cap;
	}
	ks = &u->kids[u->nr_kids];
	ks->pcs = malloc((n ? n : 1) * sizeof(*pcs));
	if (!ks->pcs)
		return 0;
	memcpy(ks->pcs, pcs, n * sizeof(*pcs));
	ks->nr_pcs = n;
	ks->proc = up->key;
	return ++u->nr_kids;
}

/*
 * The kernel's shape and words for e, found under k with a copy of len bytes:
 * the words read in the copy, to be compared (a read that was not in the copy
 * is not in any copy of that length at that sp, which BPF checks once the
 * shape says a read went past the copy's end: need_cut). False when e cannot
 * be checked by BPF.
 */
static bool kernel_entry(const struct centry *e, const struct cache_key *k, uint32_t len,
			 uint64_t start_time, struct gl_scache_shape *sh, struct gl_scache_val *kv)
{
	uint32_t nr = 0, span = 8;

	memset(sh, 0, sizeof(*sh));
	memset(kv, 0, sizeof(*kv));
	if (len < 8 || len > GL_MAX_STACK_COPY)
		return false;
	for (uint32_t i = 0; i < e->nr_checks; i++) {
		const struct dwarf_check *c = &e->checks[i];
		uint64_t off = c->addr - k->sp;

		if (!c->ok) {
			/* not in a copy of len bytes at sp (the key says so); past its end, it
			 * may be in a longer one */
			sh->need_cut |= c->addr >= k->sp;
			continue;
		}
		if (c->addr < k->sp || off > len - 8 || nr >= GL_SC_CHECKS)
			return false;
		sh->off[nr] = (uint16_t)off;
		kv->val[nr] = c->val;
		if (off + 8 > span)
			span = off + 8;
		nr++;
	}
	sh->start_time = start_time;
	sh->need_bp = e->need_bp;
	sh->span = span;
	sh->len = len;
	sh->nr_checks = nr;
	kv->bp = e->bp;
	kv->id = e->kid;
	return true;
}

/* The hash BPF finds kv's entry under in shape sh (gl_scache_mix()). */
static uint64_t scache_hash(const struct gl_scache_shape *sh, const struct gl_scache_val *kv)
{
	uint64_t h = GL_SC_SEED;

	if (sh->need_bp)
		h = gl_scache_mix(h, kv->bp);
	for (uint32_t i = 0; i < sh->nr_checks; i++)
		h = gl_scache_mix(h, kv->val[i]);
	return h;
}

static bool same_shape(const struct gl_scache_shape *a, const struct gl_scache_shape *b)
{
	return a->start_time == b->start_time && a->span == b->span && a->len == b->len &&
	       a->nr_checks == b->nr_checks && a->need_bp == b->need_bp &&
	       a->need_cut == b->need_cut &&
	       !memcmp(a->off, b->off, a->nr_checks * sizeof(a->off[0]));
}

/*
 * BPF's shape sh under k: the one it holds, or a new one, with kv as its first
 * stack, written in a way no shape of the key holds, else in that of the shape
 * used longest ago, which goes with its stacks. NULL and *err on failure.
 */
static struct kshape *kshape_get(struct unwinder *u, struct uproc *up, const struct cache_key *k,
				 struct gl_scache_shape *sh, const struct gl_scache_val *kv,
				 int *err)
{
	struct kshape **head = htab__upsert(up->shapes, k, NULL), **pp, *ks, *old = NULL;
	struct gl_scache_key kk = { .tgid = (uint32_t)up->key.pid,
				    .ip = k->ip,
				    .sp = k->sp,
				    .word0 = k->word0 };
	unsigned used = 0, n = 0;

	*err = -ENOMEM;
	if (!head)
		return NULL;
	for (ks = *head; ks; ks = ks->next) {
		if (same_shape(&ks->sh, sh))
			return ks;
		used |= 1u << ks->way;
		if (!old || ks->used < old->used)
			old = ks;
		n++;
	}
	ks = calloc(1, sizeof(*ks));
	if (ks)
		ks->stacks = htab__new(sizeof(uint64_t), sizeof(struct kref));
	if (!ks || !ks->stacks) {
		free(ks);
		return NULL;
	}
	if (!++u->last_shape)
		++u->last_shape; /* never 0 */
	sh->shape = u->last_shape;
	sh->first = *kv;
	ks->sh = *sh;
	for (ks->way = 0; ks->way < GL_SC_WAYS && (used & (1u << ks->way)); ks->way++)
		;
	if (n < GL_SC_WAYS)
		old = NULL;
	else
		ks->way = old->way;
	kk.way = ks->way;
	*err = u->pub.put_shape(u->pub.ctx, &kk, &ks->sh);
	if (*err) {
		kshape_free(ks);
		return NULL;
	}
	up->published = true;
	if (old) {
		/* its way now holds ks: its stacks are found no more; withdrawn for room */
		struct centry **ch = htab__lookup(up->cache, k);
		struct gl_scache_vkey vk = { .tgid = kk.tgid, .shape = old->sh.shape };
		const uint64_t *hash;
		size_t it = 0;

		while (htab__next(old->stacks, &it, (const void **)&hash)) {
			vk.hash = *hash;
			u->pub.del_stack(u->pub.ctx, &vk);
		}
		for (struct centry *e = ch ? *ch : NULL; e; e = e->next)
			if (e->shape == old->sh.shape)
				e->shape = 0;
		up->nr_kernel -= htab__count(old->stacks);
		for (pp = head; *pp != old; pp = &(*pp)->next)
			;
		*pp = old->next;
		kshape_free(old);
		u->st.shapes_evicted++;
	}
	ks->next = *head;
	*head = ks;
	return ks;
}

/* Keeps what BPF now holds under ks and hash: kv; false if there is no room to. */
static bool kshape_note(struct kshape *ks, uint64_t hash, const struct gl_scache_val *kv)
{
	size_t size = ks->sh.nr_checks * sizeof(kv->val[0]);
	uint64_t *val = malloc(size ? size : 1);
	struct kref *ref = val ? htab__upsert(ks->stacks, &hash, NULL) : NULL;

	if (!ref) {
		free(val);
		return false;
	}
	free(ref->val); /* one BPF replaced: the same hash */
	memcpy(val, kv->val, size);
	*ref = (struct kref){ .kid = kv->id, .bp = kv->bp, .val = val };
	return true;
}

/*
 * What BPF's lookup answers for the copy in, from the shapes and stacks it
 * holds under k (as they were written): the pcs of the stack published with
 * the copy's words, or 0. It answers copies BPF sent before it had the stack
 * (they were on their way), and those of stacks user space's own entries have
 * let go of (a call site reached by more paths than a chain holds).
 */
static int kernel_find(struct unwinder *u, struct uproc *up, const struct cache_key *k,
		       const struct dwarf_input *in, uint64_t start_time, uint64_t *ips, int max)
{
	struct kshape **head = htab__lookup(up->shapes, k), *ks;
	struct gl_scache_val cur = { .bp = in->bp }; /* the copy's words, as BPF reads them */

	for (ks = head ? *head : NULL; ks; ks = ks->next) {
		const struct gl_scache_shape *sh = &ks->sh;
		const struct kstack *st;
		const struct kref *ref;
		uint64_t h;
		bool ok = true;
		int n;

		/* BPF's conditions: the words within the copy, cut where that one was if
		 * the unwinding read past the cut */
		if (sh->start_time != start_time || sh->span > in->len ||
		    (sh->need_cut && in->len != sh->len))
			continue;
		for (uint32_t i = 0; i < sh->nr_checks && ok; i++) {
			uint64_t w = 0;

			ok = dwarf_input__read(in, k->sp + sh->off[i], &w);
			cur.val[i] = w;
		}
		h = scache_hash(sh, &cur);
		ref = ok ? htab__lookup(ks->stacks, &h) : NULL;
		if (!ref || (sh->need_bp && ref->bp != in->bp) ||
		    memcmp(ref->val, cur.val, sh->nr_checks * sizeof(cur.val[0])) || !ref->kid ||
		    ref->kid > u->nr_kids)
			continue;
		st = &u->kids[ref->kid - 1];
		n = st->nr_pcs < max ? st->nr_pcs : max;
		memcpy(ips, st->pcs, n * sizeof(*ips));
		u->st.hits++;
		u->st.shape_hits++;
		return n;
	}
	return 0;
}

/*
 * BPF's maps are full: room is made by withdrawing what BPF holds of up's
 * process, which starts over as after its modules changed, or, if it holds
 * nothing, of every process. False when nothing could be withdrawn.
 */
static bool kernel_room(struct unwinder *u, struct uproc *up)
{
	struct uproc **other;
	bool freed = false;
	size_t it = 0;

	u->st.kernel_clears++;
	if (up->nr_kernel) {
		kernel_clear(u, up);
		return true;
	}
	while ((other = htab__next(u->procs, &it, NULL))) {
		if (!(*other)->published)
			continue;
		kernel_clear(u, *other);
		freed = true;
	}
	return freed;
}

/* Writes the stack kv of shape sh under k (with room made once if BPF's maps are full). */
static int kernel_put(struct unwinder *u, struct uproc *up, const struct cache_key *k,
		      struct gl_scache_shape *sh, const struct gl_scache_val *kv,
		      struct kshape **out)
{
	struct gl_scache_vkey vk = { .tgid = (uint32_t)up->key.pid };
	struct kshape *ks;
	size_t had;
	int err;

	for (int tries = 0;; tries++) {
		ks = kshape_get(u, up, k, sh, kv, &err);
		if (ks) {
			vk.shape = ks->sh.shape;
			vk.hash = scache_hash(&ks->sh, kv);
			err = u->pub.put_stack(u->pub.ctx, &vk, kv);
		}
		if (err != -E2BIG || tries || !kernel_room(u, up))
			break;
	}
	if (err)
		return err;
	had = htab__count(ks->stacks);
	if (!kshape_note(ks, vk.hash, kv)) {
		u->pub.del_stack(u->pub.ctx, &vk);
		return -ENOMEM;
	}
	up->nr_kernel += htab__count(ks->stacks) - had;
	*out = ks;
	return 0;
}

/*
 * Publishes e (found under k for record r, from a copy of len bytes) to BPF,
 * with an id if it has none. BPF checks the process by the start time its own
 * records carry (user space may know the process by a coarser one, from /proc).
 */
static void publish(struct unwinder *u, struct uproc *up, struct centry *e,
		    const struct cache_key *k, const struct gl_stack *r, uint32_t len)
{
	struct {
		struct gl_scache_shape sh;
		struct gl_scache_val kv;
	} * b;
	struct kshape *ks = NULL;
	int err;

	/* records BPF sent before it had the entry: no need to write it again */
	if (!u->pub.put_shape || e->max != UNWIND_MAX_FRAMES || e->shape)
		return;
	b = malloc(sizeof(*b));
	if (!b)
		return;
	if (!kernel_entry(e, k, len, r->hdr.start_time, &b->sh, &b->kv))
		goto out;
	if (!e->kid)
		e->kid = kid_new(u, up, e->pcs, e->nr_pcs);
	b->kv.id = e->kid;
	err = e->kid ? kernel_put(u, up, k, &b->sh, &b->kv, &ks) : -ENOSPC;
	if (!err) {
		u->st.published++;
		e->shape = ks->sh.shape;
		ks->used = ++u->pub_clock;
	} else if (!u->st.publish_failed++) {
		log_warn("BPF's stack cache took no more stacks (%s): stacks of new call sites "
			 "are copied and unwound every time, which costs the traced threads more; "
			 "the figures are unchanged",
			 strerror(-err));
	}
	log_msg(LOG_TRACE,
		"stack cache: PID %d ip %#llx sp %#llx len %u: id %u, shape %u way %d, %u checks, "
		"span %u: %s",
		(int)up->key.pid, (unsigned long long)k->ip, (unsigned long long)k->sp, b->sh.len,
		e->kid, ks ? ks->sh.shape : 0, ks ? ks->way : -1, b->sh.nr_checks, b->sh.span,
		err ? strerror(-err) : "published");
out:
	free(b);
}

/* Frees the entries of head's chain past MAX_CHAIN: the least recently found. */
static void trim_chain(struct unwinder *u, struct uproc *up, struct centry *head)
{
	struct centry **pp = &head->next, *e, *next;

	for (int n = 1; *pp && n < MAX_CHAIN; n++)
		pp = &(*pp)->next;
	for (e = *pp, *pp = NULL; e; e = next) {
		next = e->next;
		u->cache_bytes -= entry_size(e->nr_checks, e->nr_pcs);
		up->nr_entries--;
		u->st.chain_evicted++;
		free(e);
	}
}

static struct centry *cache_add(struct unwinder *u, struct uproc *up, const struct cache_key *k,
				const struct dwarf_deps *d, uint64_t bp, const uint64_t *pcs, int n,
				int max)
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
		return NULL;
	head = htab__upsert(up->cache, k, NULL);
	if (!head) {
		free(e);
		return NULL;
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
	e->kid = 0;
	e->shape = 0;
	e->next = *head;
	*head = e;
	up->nr_entries++;
	u->cache_bytes += size;
	trim_chain(u, up, e);
	return e;
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
		      const struct dwarf_input *in, const struct cache_key *k,
		      const struct gl_stack *r, uint64_t *ips, int max)
{
	uint64_t ts = r->hdr.ts;
	struct dwarf_deps deps;
	struct centry *e;
	int n = dwarf_proc__unwind(up->dw, in, ips, max);

	if (!all_resolved(proc->am, ips, n) && addr_map__refresh_after_miss(proc->am, ts)) {
		uproc_sync(u, up, proc);
		if (!up->dw) {
			u->st.fp_walks++;
			return dwarf__fp_walk(in, ips, max);
		}
		n = dwarf_proc__unwind(up->dw, in, ips, max);
	}
	/*
	 * A pc in no module libdwfl knows (a map without its library, a file that could
	 * not be opened) has no CFI: libdwfl falls back to the rbp chain, which at a
	 * function's entry skips the caller, and the frame above it would be taken for
	 * the call's site. This walk keeps the caller (the word at sp); nothing is cached.
	 */
	if (!dwarf_proc__knows(up->dw, in->ip)) {
		u->st.fp_walks++;
		return dwarf__fp_walk(in, ips, max);
	}
	u->st.misses++;
	if (dwarf_replay__deps(u->replay, dwarf_proc__dwfl(up->dw), in, ips, n, max, &deps) == 0) {
		e = cache_add(u, up, k, &deps, in->bp, ips, n, max);
		if (e)
			publish(u, up, e, k, r, in->len);
	} else {
		u->st.uncached++;
	}
	return n;
}

/* A record the kernel answered from its cache: the pcs its id stands for. */
static int kernel_hit(struct unwinder *u, const struct stack_owner *proc, const struct gl_stack *r,
		      uint64_t *ips, int max)
{
	const struct kstack *ks;
	int n;

	if (r->cache_id > u->nr_kids || !proc) {
		u->st.kernel_bad++;
		return 0;
	}
	ks = &u->kids[r->cache_id - 1];
	if (ks->proc.pid != proc->pid || ks->proc.start_time != proc->start_time) {
		u->st.kernel_bad++;
		return 0;
	}
	n = ks->nr_pcs < max ? ks->nr_pcs : max;
	memcpy(ips, ks->pcs, n * sizeof(*ips));
	u->st.kernel_hits++;
	u->st.hits++; /* answered from the cache, by the kernel's copy of it */
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
				  .len = r->stack_bytes,
				  .at_entry = r->ret_addr != 0 };
	struct cache_key k = { .ip = r->ip, .sp = r->sp, .word0 = ~0ULL };
	struct centry *e;
	struct uproc *up;
	uint64_t t0 = now_ns();
	int n;

	if (max > UNWIND_MAX_FRAMES)
		max = UNWIND_MAX_FRAMES;
	u->st.stacks++;
	if (r->cache_id)
		return kernel_hit(u, proc, r, ips, max);
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
		/* the kernel sent the copy: its entry for this key is another, or none */
		if (max == UNWIND_MAX_FRAMES)
			publish(u, up, e, &k, r, in.len);
		u->st.hit_ns += now_ns() - t0;
		return n;
	}
	n = max == UNWIND_MAX_FRAMES ? kernel_find(u, up, &k, &in, r->hdr.start_time, ips, max) : 0;
	if (n) {
		u->st.hit_ns += now_ns() - t0;
		return n;
	}
	n = dwarf_miss(u, up, proc, &in, &k, r, ips, max);
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
