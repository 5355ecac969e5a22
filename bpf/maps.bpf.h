/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * maps.bpf.h - the maps and settings of gpuleak's BPF programs.
 *
 * Settings are const volatile globals that user space writes through the
 * skeleton's rodata before load; map sizes are set with
 * bpf_map__set_max_entries() before load as well.
 */
#ifndef GPULEAK_MAPS_BPF_H
#define GPULEAK_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "gpuleak_abi.h"

const volatile bool targ_all = false;	      /* trace every process, not only targets */
const volatile bool targ_follow_forks = true; /* children of targets become targets */
const volatile __u32 targ_stack_mode = GL_STACK_FP;
const volatile __u32 targ_stack_bytes = 16384; /* DWARF mode: user stack copied */
const volatile bool targ_python = false;
const volatile bool targ_torch_python_only = false; /* tensor blocks: no native stack */
const volatile __u64 targ_wakeup_bytes = 0;	    /* see rb_flags(); 0: wake for every record */
const volatile bool targ_hold = true; /* stop a target at the mapping of a library not attached */
const volatile __u32 targ_self = 0;   /* the tracer's own tgid: never held */
const volatile __u64 targ_self_ticks = 0;     /* the tracer's start (gl_hold_val.agent_ticks) */
const volatile bool targ_stop_on_oom = false; /* hold a process at an out-of-memory failure */
const volatile bool targ_stack_cache = false; /* DWARF mode: look stacks up in stack_cache */
/* read RANK, LOCAL_RANK and WORLD_SIZE at a library's mapping (environ.bpf.h) */
const volatile bool targ_rank_env = false;

/*
 * Libraries whose probes are all in: slot (the cookie's high half) -> 1, written by
 * user space once both links of the library exist. The kernel arms a call's return at
 * its entry, and a library's functions get their probes one after another: a call that
 * enters before its library is armed is from before the attach, and is ignored (its
 * return finds no entry), so that every call booked has its entry and its return, and
 * no function is traced before another (a free unseen after its allocation was seen).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GL_MAX_LIBS);
	__type(key, __u32);
	__type(value, __u32);
} lib_armed SEC(".maps");

/*
 * Set by user space when the session stops (tracer__stop): no call entered after it is
 * booked, and no tensor block is, so that the report's books stop with the kernel's
 * while the calls in flight still return into them; the ring then drains to its end.
 */
__u32 tracing_stopped = 0;

/* Processes to trace when !targ_all: tgid -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

struct gl_file_key {
	__u64 dev;
	__u64 ino;
};

/* Library files user space has handled (attached, or found unusable): key = the kernel's
 * (s_dev, i_ino) of the file, as in gl_libmap. Mapping one of them holds no process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct gl_file_key);
	__type(value, __u8);
} known_libs SEC(".maps");

/* Processes BPF stopped at a library's mapping: tgid -> bpf_ktime_get_ns() of the stop.
 * User space deletes the entry and sends SIGCONT once the probes are in. Key 0: the
 * tracer is going away, nothing more is held. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} held SEC(".maps");

/* Every gpuleak's holds on this host (gpuleak_abi.h): pinned by user space where it can
 * be; else this gpuleak's own, and two gpuleaks do not wait for each other. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GL_HOLD_BOOK_MAX);
	__type(key, struct gl_hold_key);
	__type(value, struct gl_hold_val);
} hold_book SEC(".maps");

/* Holds the guard ended at their deadline before user space released them: tgid ->
 * bpf_ktime_get_ns() of the stop. Written by the guard (loader.c), taken by user space
 * when it reaches the hold's record, so that the process is named and its books marked. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} hold_expired SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} events SEC(".maps");

struct gl_alloc_key {
	__u32 tgid;
	__u32 kind; /* enum gl_kind */
	__u64 key;
};

struct gl_alloc_val {
	__u64 size;
	__u64 ctx;
	__u64 handle; /* GL_KIND_MAPPING: the handle mapped here */
	__u32 refs;   /* GL_KIND_HANDLE: handle references + mappings */
	__u8 cls;
	__u8 pad;
	__s16 dev;
	__u64 id;	 /* the allocation's number (gl_call.id) */
	__u64 teardowns; /* when its call entered: gl_slot.teardowns */
};

/* What a free's entry took out of the books (gl_slot.claim). */
enum gl_claim {
	GL_CLAIM_NONE = 0,   /* nothing taken at entry: the return looks the key up */
	GL_CLAIM_TAKEN = 1,  /* the allocation was taken out: gl_slot.claimed */
	GL_CLAIM_ABSENT = 2, /* the key was not in the books at entry */
	GL_CLAIM_RACED = 3,  /* it was, but another thread's free took it out first */
};

/* One traced call between its entry and its return. */
struct gl_slot {
	__u64 args[5];
	__u64 sp; /* at entry: points at the return address */
	__u64 seq;
	__u64 teardowns; /* ctx_teardowns at entry */
	__u32 api;
	__u32 claim; /* enum gl_claim */
	struct gl_alloc_key claimed_key;
	struct gl_alloc_val claimed;
	/* cuMemUnmap: the handle of the mapping claimed, when this unmap frees it */
	__u32 claim_aux; /* enum gl_claim */
	__u32 pad;
	struct gl_alloc_key aux_key;
	struct gl_alloc_val aux;
};

/* Per-thread calls in flight; freed by the kernel when the thread exits. */
struct gl_inflight {
	__u64 seq;
	__u32 depth;
	__u32 pad;
	__u64 py_tstate; /* the thread's CPython thread state, last time it was found */
	__u64 stack_lo;	 /* the mapping the thread's sp was in last time (stack_want()) */
	__u64 stack_hi;
	__u32 py_block; /* bytes of its Python data stack its last walk read first */
	__u32 pad3;
	__u64 py_floor;	       /* the page its outermost Python frame lies on; 0: not known */
	__u64 ctx[GL_MAX_CTX]; /* the thread's context stack, top at ctx_depth-1 */
	__u32 ctx_depth;
	__s32 dev;	   /* the device of context dev_ctx (-1: none known) ... */
	__u64 dev_ctx;	   /* ... 0: no copy */
	__u32 dev_changes; /* ... while ctx_dev_changes is this */
	__u32 pad2;
	struct gl_slot slot[GL_MAX_NEST];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct gl_inflight);
} inflight SEC(".maps");

/* Allocated on demand: a preallocated table of a million entries would pin ~110 MB. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20);
	__type(key, struct gl_alloc_key);
	__type(value, struct gl_alloc_val);
} allocs SEC(".maps");

/*
 * The allocation table's front (alloctab.bpf.h): a small array of slots, each claimed
 * with a compare-and-swap of its state word, in front of allocs, for the allocations of
 * the kinds it takes (alloc_fast_kind()). It stays in the CPU's caches where a random
 * bucket of allocs, sized for a million entries, is a cache and TLB miss at every
 * insert; what does not fit goes to allocs (allocs_spilled counts those entries).
 */
#define GL_FAST_BITS 12
#define GL_FAST_SLOTS (1u << GL_FAST_BITS)
#define GL_FAST_PROBE 8 /* slots tried from a key's home slot */

/* A slot's state word: the state in the low 2 bits, above them a count of the slot's
 * uses, so that a compare-and-swap on a state read earlier fails once the slot was
 * emptied and filled again in between (the key and value change only while BUSY). */
enum gl_slot_state {
	GL_SLOT_FREE = 0,
	GL_SLOT_BUSY = 1, /* being filled or emptied by the one that claimed it */
	GL_SLOT_FULL = 2,
};

struct gl_fast_slot {
	__u64 state;
	struct gl_alloc_key k;
	struct gl_alloc_val v;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GL_FAST_SLOTS);
	__type(key, __u32);
	__type(value, struct gl_fast_slot);
} allocs_fast SEC(".maps");

/* Entries in allocs of the kinds allocs_fast takes: 0, and such a key not in allocs_fast
 * is in neither. Raised before such an entry goes in, lowered after it went out. */
__u64 allocs_spilled = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct gl_proc_stats);
} procs SEC(".maps");

struct gl_ctx_key {
	__u32 tgid;
	__u32 pad;
	__u64 ctx;
};

/*
 * Contexts torn down: (tgid, ctx) -> the teardown's number (ctx_teardowns,
 * counted before the teardown's books were dropped). A call that entered
 * before that teardown began (the count it noted at its entry is below the
 * number) and returns after it acted on a context the driver has since
 * destroyed; so an allocation whose call entered before it in that context
 * went with it, whether the teardown's walk of allocs met it or a free in
 * flight had taken it out; one whose call entered after it belongs to a new
 * context at the same address. Least recently used entries go first: only
 * calls in flight at the teardown need one.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gl_ctx_key);
	__type(value, __u64);
} ctx_dead SEC(".maps");

/*
 * Teardowns begun, counted before ctx_dead is written (mark_ctx_dead()): a
 * teardown's number is the count with it. A call notes the count at its entry
 * (gl_slot.teardowns), in place of a clock (a read of kvm-clock costs ~50 ns
 * in a guest): if it is the same at its return, no teardown began in between,
 * and one that began before has a number no greater than the call's count, so
 * ctx_dead has nothing to say of it (ctx_gone()).
 */
__u64 ctx_teardowns = 0;

/* Allocations booked on each CPU: with the CPU, a number no other allocation has. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} alloc_ids SEC(".maps");

/*
 * A number for a new allocation, unique while the programs are loaded: the
 * CPU's count in the low 48 bits, the CPU + 1 above. Never 0. A program stays on
 * its CPU to its end, but a uprobe's program can be preempted (migration, not
 * preemption, is disabled), and the program of the task that runs next on the
 * CPU can take a number in between: the count is taken with one atomic add.
 */
static __always_inline __u64 next_alloc_id(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&alloc_ids, &zero), v;

	if (!n)
		return 0;
	v = __sync_fetch_and_add(n, 1) + 1;
	return ((__u64)(bpf_get_smp_processor_id() + 1) << 48) | (v & ((1ULL << 48) - 1));
}

/* Contexts seen being created or retained: (tgid, ctx) -> device ordinal. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gl_ctx_key);
	__type(value, __s32);
} ctx_dev SEC(".maps");

/*
 * Changes to ctx_dev, counted after each one: a thread's copy of a context's
 * device (gl_inflight.dev_*) holds while the count is the one read before
 * its lookup (ctx_device()).
 */
__u32 ctx_dev_changes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GL_NR_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

#define GL_STACK_DATA                                                           \
	(GL_MAX_PY_FRAMES * sizeof(struct gl_py_frame) + GL_MAX_FP_FRAMES * 8 + \
	 GL_MAX_STACK_COPY + GL_PAGE_SIZE)

struct gl_stack_buf {
	struct gl_stack rec;
	__u8 data[GL_STACK_DATA];
	__u64 busy; /* a program is building a record here (emit_stack); never sent */
};

/*
 * Scratch space for building a stack record, one per CPU (index = CPU id;
 * user space sizes it to the number of possible CPUs). A plain array because
 * a per-CPU value is limited to 32 KiB.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gl_stack_buf);
} scratch SEC(".maps");

/*
 * The native stack cache (gpuleak_abi.h): written by user space, read here. Its
 * entries are allocated as they are written: a process of ten call sites takes
 * ten stacks' room, one of ten thousand 11 MB of kernel memory.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct gl_scache_key);
	__type(value, struct gl_scache_shape);
} stack_shapes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct gl_scache_vkey);
	__type(value, struct gl_scache_val);
} stack_cache SEC(".maps");

/* Traced calls per API (entries seen, whatever their result). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GL_NR_APIS);
	__type(key, __u32);
	__type(value, __u64);
} api_calls SEC(".maps");

/*
 * The per-CPU counts are added to atomically: a preempted program's increment
 * would otherwise lose one made in between on its CPU (next_alloc_id()).
 */
static __always_inline void count_call(__u32 api)
{
	__u64 *v = bpf_map_lookup_elem(&api_calls, &api);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The last time a per-call record woke the consumer (any CPU; races are harmless). */
__u64 last_wakeup_ns = 0;
/* 1 while the thread at the ring's mouth polls the ring itself, records flowing (written
 * by user space, mouth.c): no wakeup is due then but the fill's (rb_flags()). */
__u32 mouth_polls = 0;

#define GL_WAKEUP_NS 8000000ULL

/*
 * Submit flags for a per-call record stamped ts. Waking the consumer costs the
 * traced thread an inter-processor interrupt (a VM exit in a guest), so in a
 * stream of records it is woken at most once every GL_WAKEUP_NS, or sooner once
 * targ_wakeup_bytes are waiting; the first record after a quiet spell wakes it at
 * once, so that a new process is seen while it lives. While the thread at the
 * ring's mouth polls the ring itself (mouth_polls: records are flowing, and it
 * looks every 8 ms) only the fill wakes it. It copies what it finds at each
 * wakeup, at its own timeouts and when the reader asks (a kick: a poll of the
 * reader's that found no copy announced), so 8 ms costs no record: the smallest
 * default ring (2 MiB) holds far more than 8 ms of the fastest stream (about
 * 120 KB). Process records and failures always wake
 * it (libraries loaded late must be attached at once; a failure may hold its
 * process).
 */
static __always_inline __u64 rb_flags(__u64 ts)
{
	if (!targ_wakeup_bytes)
		return 0;
	if ((*(volatile __u32 *)&mouth_polls || ts - last_wakeup_ns < GL_WAKEUP_NS) &&
	    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < targ_wakeup_bytes)
		return BPF_RB_NO_WAKEUP;
	last_wakeup_ns = ts;
	return BPF_RB_FORCE_WAKEUP;
}

#endif /* GPULEAK_MAPS_BPF_H */
