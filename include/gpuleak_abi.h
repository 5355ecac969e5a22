/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * gpuleak_abi.h - the one header shared by the BPF programs and user space.
 *
 * It owns the probe table (which libcuda functions are traced and what each
 * one means), the records the BPF programs write to the ring buffer, and the
 * per-process counters BPF keeps so that user space can prove it lost nothing.
 * Plain __u32/__u64 only: it is compiled by clang for BPF and by the host
 * compiler for user space, and must not include anything.
 */
#ifndef GPULEAK_ABI_H
#define GPULEAK_ABI_H

#define GL_ABI_VERSION 3

/* Memory classes. Counters are indexed by class. */
enum gl_class {
	GL_CLASS_DEVICE = 0,	  /* device memory: cuMemAlloc*, cuMemCreate on a device, arrays */
	GL_CLASS_MANAGED = 1,	  /* cuMemAllocManaged: physical pages appear on first touch */
	GL_CLASS_HOST_PINNED = 2, /* cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister */
	GL_CLASS_TORCH_BLOCK = 3, /* reserved for PyTorch caching-allocator blocks */
	GL_CLASS_ADDRESS = 4,	  /* cuMemAddressReserve: address space, never memory */
	GL_CLASS_IMPORTED = 5,	  /* another process's memory: never charged */
	GL_NR_CLASSES = 6,
};
#define GL_CLASS_SLOTS 8 /* arrays indexed by class are this long (a power of two) */

/*
 * What a traced function does to the books. The BPF programs switch on the
 * role; the argument positions and widths below are the CUDA driver API's.
 */
enum gl_role {
	GL_ROLE_ALLOC = 1,	/* (T *out, size_t size, ...)         key=*out  */
	GL_ROLE_ALLOC_PITCH,	/* (dptr *out, size_t *pitch, w, h, e) size=*pitch*h */
	GL_ROLE_HOST_REGISTER,	/* (void *p, size_t size, flags)       key=p     */
	GL_ROLE_FREE,		/* (T key, ...)                                  */
	GL_ROLE_VMM_CREATE,	/* (handle *out, size, prop *, flags)  key=*out  */
	GL_ROLE_VMM_RELEASE,	/* (handle)                                      */
	GL_ROLE_VMM_MAP,	/* (va, size, offset, handle, flags)             */
	GL_ROLE_VMM_UNMAP,	/* (va, size)                                    */
	GL_ROLE_VMM_RETAIN,	/* (handle *out, void *addr)                     */
	GL_ROLE_VA_RESERVE,	/* (dptr *out, size, align, addr, flags)         */
	GL_ROLE_VA_FREE,	/* (dptr, size)                                  */
	GL_ROLE_IMPORT,		/* (handle *out, ...): another process's memory  */
	GL_ROLE_IPC_OPEN,	/* (dptr *out, CUipcMemHandle by value, flags)   */
	GL_ROLE_ARRAY_CREATE,	/* (CUarray *out, const CUDA_ARRAY_DESCRIPTOR *) */
	GL_ROLE_ARRAY3D_CREATE, /* (CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *) */
	GL_ROLE_MIPMAP_CREATE,	/* (CUmipmappedArray *out, 3D desc *, levels)    */
	GL_ROLE_CTX_CREATE,	/* (CUcontext *out, ..., CUdevice dev last)      */
	GL_ROLE_CTX_DESTROY,	/* (CUcontext)                                   */
	GL_ROLE_PRIMARY_RETAIN, /* (CUcontext *out, CUdevice)                    */
	GL_ROLE_PRIMARY_RESET,	/* (CUdevice)                                    */
	GL_ROLE_CTX_SET,	/* (CUcontext): becomes current on this thread   */
	GL_ROLE_CTX_PUSH,	/* (CUcontext)                                   */
	GL_ROLE_CTX_POP,	/* (CUcontext *out)                              */
};

/* Allocation namespaces: a free only matches an allocation of its own kind. */
enum gl_kind {
	GL_KIND_DPTR = 0,    /* device pointers (cuMemFree, cuMemFreeAsync) */
	GL_KIND_HOST = 1,    /* cuMemHostAlloc/cuMemAllocHost (cuMemFreeHost) */
	GL_KIND_HOSTREG = 2, /* cuMemHostRegister (cuMemHostUnregister) */
	GL_KIND_HANDLE = 3,  /* VMM allocation handles */
	GL_KIND_MAPPING = 4, /* VMM mappings va -> handle */
	GL_KIND_VA = 5,	     /* address reservations */
	GL_KIND_ARRAY = 6,   /* CUarray */
	GL_KIND_MIPMAP = 7,  /* CUmipmappedArray */
	GL_KIND_IPC = 8,     /* cuIpcOpenMemHandle pointers */
	GL_KIND_TORCH = 9,   /* PyTorch caching-allocator blocks (USDT pytorch:malloc/free) */
	GL_NR_KINDS = 10,
};

/* Probe-table flags. */
#define GL_API_V1 0x1	    /* legacy 32-bit CUdeviceptr_v1 pointers and unsigned int sizes */
#define GL_API_REQUIRED 0x2 /* warn loudly when the library does not export it */
#define GL_API_STACK 0x4    /* capture the caller's stack at entry */
#define GL_API_V1_SIZE 0x8  /* legacy unsigned int size, full-width pointer */
#define GL_API_USDT 0x10    /* a USDT probe of PyTorch's allocator, not a libcuda function */

/*
 * The probe table: X(symbol, role, class, kind, flags). The API id is the
 * position in this list; it is the BPF cookie of each attached probe.
 */
/* one row per function, aligned by hand */
/* clang-format off */
#define GL_APIS(X)                                                                    \
	X(cuMemAlloc, ALLOC, DEVICE, DPTR, GL_API_V1 | GL_API_STACK)                  \
	X(cuMemAlloc_v2, ALLOC, DEVICE, DPTR, GL_API_REQUIRED | GL_API_STACK)         \
	X(cuMemAllocPitch, ALLOC_PITCH, DEVICE, DPTR, GL_API_V1 | GL_API_STACK)       \
	X(cuMemAllocPitch_v2, ALLOC_PITCH, DEVICE, DPTR, GL_API_STACK)                \
	X(cuMemAllocManaged, ALLOC, MANAGED, DPTR, GL_API_STACK)                      \
	X(cuMemAllocAsync, ALLOC, DEVICE, DPTR, GL_API_STACK)                         \
	X(cuMemAllocAsync_ptsz, ALLOC, DEVICE, DPTR, GL_API_STACK)                    \
	X(cuMemAllocFromPoolAsync, ALLOC, DEVICE, DPTR, GL_API_STACK)                 \
	X(cuMemAllocFromPoolAsync_ptsz, ALLOC, DEVICE, DPTR, GL_API_STACK)            \
	X(cuMemFree, FREE, DEVICE, DPTR, GL_API_V1)                                   \
	X(cuMemFree_v2, FREE, DEVICE, DPTR, GL_API_REQUIRED)                          \
	X(cuMemFreeAsync, FREE, DEVICE, DPTR, 0)                                      \
	X(cuMemFreeAsync_ptsz, FREE, DEVICE, DPTR, 0)                                 \
	X(cuMemHostAlloc, ALLOC, HOST_PINNED, HOST, GL_API_STACK)                     \
	X(cuMemAllocHost, ALLOC, HOST_PINNED, HOST, GL_API_V1_SIZE | GL_API_STACK)         \
	X(cuMemAllocHost_v2, ALLOC, HOST_PINNED, HOST, GL_API_STACK)                  \
	X(cuMemFreeHost, FREE, HOST_PINNED, HOST, 0)                                  \
	X(cuMemHostRegister, HOST_REGISTER, HOST_PINNED, HOSTREG, GL_API_STACK)       \
	X(cuMemHostRegister_v2, HOST_REGISTER, HOST_PINNED, HOSTREG, GL_API_STACK)    \
	X(cuMemHostUnregister, FREE, HOST_PINNED, HOSTREG, 0)                         \
	X(cuMemCreate, VMM_CREATE, DEVICE, HANDLE, GL_API_STACK)                      \
	X(cuMemRelease, VMM_RELEASE, DEVICE, HANDLE, 0)                               \
	X(cuMemMap, VMM_MAP, DEVICE, MAPPING, 0)                                      \
	X(cuMemUnmap, VMM_UNMAP, DEVICE, MAPPING, 0)                                  \
	X(cuMemRetainAllocationHandle, VMM_RETAIN, DEVICE, HANDLE, 0)                 \
	X(cuMemAddressReserve, VA_RESERVE, ADDRESS, VA, 0)                            \
	X(cuMemAddressFree, VA_FREE, ADDRESS, VA, 0)                                  \
	X(cuMemImportFromShareableHandle, IMPORT, IMPORTED, HANDLE, 0)                \
	X(cuIpcOpenMemHandle, IPC_OPEN, IMPORTED, IPC, 0)                             \
	X(cuIpcOpenMemHandle_v2, IPC_OPEN, IMPORTED, IPC, 0)                          \
	X(cuIpcCloseMemHandle, FREE, IMPORTED, IPC, 0)                                \
	X(cuArrayCreate_v2, ARRAY_CREATE, DEVICE, ARRAY, GL_API_STACK)                \
	X(cuArray3DCreate_v2, ARRAY3D_CREATE, DEVICE, ARRAY, GL_API_STACK)            \
	X(cuArrayDestroy, FREE, DEVICE, ARRAY, 0)                                     \
	X(cuMipmappedArrayCreate, MIPMAP_CREATE, DEVICE, MIPMAP, GL_API_STACK)        \
	X(cuMipmappedArrayDestroy, FREE, DEVICE, MIPMAP, 0)                           \
	X(cuCtxCreate, CTX_CREATE, DEVICE, DPTR, 0)                                   \
	X(cuCtxCreate_v2, CTX_CREATE, DEVICE, DPTR, 0)                                \
	X(cuCtxCreate_v3, CTX_CREATE, DEVICE, DPTR, 0)                                \
	X(cuCtxCreate_v4, CTX_CREATE, DEVICE, DPTR, 0)                                \
	X(cuCtxDestroy, CTX_DESTROY, DEVICE, DPTR, 0)                                 \
	X(cuCtxDestroy_v2, CTX_DESTROY, DEVICE, DPTR, 0)                              \
	X(cuDevicePrimaryCtxRetain, PRIMARY_RETAIN, DEVICE, DPTR, 0)                  \
	X(cuDevicePrimaryCtxReset, PRIMARY_RESET, DEVICE, DPTR, 0)                    \
	X(cuDevicePrimaryCtxReset_v2, PRIMARY_RESET, DEVICE, DPTR, 0)                 \
	X(cuCtxSetCurrent, CTX_SET, DEVICE, DPTR, 0)                                  \
	X(cuCtxPushCurrent, CTX_PUSH, DEVICE, DPTR, 0)                                \
	X(cuCtxPushCurrent_v2, CTX_PUSH, DEVICE, DPTR, 0)                             \
	X(cuCtxPopCurrent, CTX_POP, DEVICE, DPTR, 0)                                  \
	X(cuCtxPopCurrent_v2, CTX_POP, DEVICE, DPTR, 0)                               \
	X(pytorch_malloc, ALLOC, TORCH_BLOCK, TORCH, GL_API_USDT | GL_API_STACK)       \
	X(pytorch_free, FREE, TORCH_BLOCK, TORCH, GL_API_USDT)
/* clang-format on */

#define GL_API_ENUM(sym, role, cls, kind, flags) GL_API_##sym,
enum gl_api { GL_APIS(GL_API_ENUM) GL_NR_APIS };
#undef GL_API_ENUM

struct gl_api_desc {
	__u8 role;
	__u8 cls;
	__u8 kind;
	__u8 flags;
};

/* Ring-buffer records. Every record starts with struct gl_hdr. */
enum gl_rec_type {
	GL_REC_STACK = 1, /* caller's stack at the entry of an allocating call */
	GL_REC_CALL = 2,  /* a traced call returned: what it did to the books */
	GL_REC_PROC = 3,  /* a traced process exited, exec'd or forked */
	GL_NR_REC_TYPES = 4,
};

struct gl_hdr {
	__u32 type;
	__u32 size; /* whole record, header included */
	__u32 pid;  /* tgid */
	__u32 tid;
	__u64 start_time; /* process start (boot-time ns): with pid, names a process */
	__u64 ts;	  /* bpf_ktime_get_ns() */
};

/* What a call did to the books (gl_call.op). */
enum gl_op {
	GL_OP_NONE = 0,		  /* no change (mapping, retain, context switch) */
	GL_OP_ALLOC = 1,	  /* key gained bytes */
	GL_OP_FREE = 2,		  /* key's bytes were given back */
	GL_OP_FAIL = 3,		  /* an allocation failed: rc says why */
	GL_OP_UNMATCHED_FREE = 4, /* freed a key made before attach (not in the books) */
	GL_OP_CTX_DROP = 5,	  /* context teardown dropped allocations (key = ctx; bytes = when,
				   * bpf_ktime_get_ns: calls that entered before it and return
				   * after it acted on memory the teardown dropped) */
	GL_OP_CTX_NEW = 6,	  /* a context exists: key = ctx, dev = its device */
};

/* Tensor-block stack sampling: entries of the exponential quantile table (tiers.bpf.h). */
#define GL_SAMPLE_EXP_N 1024

/* gl_call.flags */
#define GL_CALL_DEFERRED 0x1	 /* release of a handle still mapped: freed at last unmap */
#define GL_CALL_TABLE_FULL 0x2	 /* BPF's allocation table was full: not tracked in BPF */
#define GL_CALL_NO_STACK 0x4	 /* no stack record was emitted for this call */
#define GL_CALL_ALL_CONTEXTS 0x8 /* CTX_DROP: the context was unknown, all were dropped */
#define GL_CALL_REPLACED \
	0x10 /* ALLOC: the key was still booked (its release was never
				   * seen): that allocation was dropped */
#define GL_CALL_CTX_GONE \
	0x20 /* a failed free of an allocation whose context was torn
				   * down during the call: the kernel dropped it (a teardown) */
#define GL_CALL_HELD \
	0x40 /* FAIL: out of memory, the process held for its census (--census-on-oom) */

struct gl_call {
	struct gl_hdr hdr;
	__u64 seq;   /* per-thread call number; the stack record carries the same */
	__u64 key;   /* address, handle or context */
	__u64 bytes; /* size added or removed (for FAIL: the size asked for) */
	__u64 ctx;   /* context current on the calling thread, 0 if unknown */
	/* Contexts' teardowns begun (a count of the host's, ctx_teardowns) when the call
	 * entered; CTX_DROP: the teardown's own number. A teardown whose number is above
	 * a call's count began after the call entered: the order of the two, where no
	 * clock is read at the call's entry. */
	__u64 teardowns;
	__s32 rc;
	__u16 api;
	__u8 op;
	__u8 cls;
	__s16 dev; /* device ordinal, -1 if unknown */
	__u16 flags;
	__u8 kind; /* enum gl_kind of key */
	__u8 pad[3];
	__u64 id; /* ALLOC: the allocation's number (unique while gpuleak runs); FREE: the
		   * number of the allocation freed. A driver hands an address freed on one
		   * thread to another before the free's record is written: the number
		   * says which of the two a free took. 0: not known */
};

/* Stack capture modes (targ_stack_mode). */
enum gl_stack_mode {
	GL_STACK_NONE = 0,
	GL_STACK_FP = 1,    /* bpf_get_stack: frame pointers, walked in the kernel */
	GL_STACK_DWARF = 2, /* registers + a copy of the user stack, unwound in user space */
};

#define GL_MAX_FP_FRAMES 127
#define GL_MAX_PY_FRAMES 64
#define GL_MAX_STACK_COPY 32768
#define GL_PAGE_SIZE 4096

struct gl_py_frame {
	__u64 code;  /* PyCodeObject * in the target */
	__u32 lasti; /* instruction index in code units; GL_PY_LASTI_NONE if unknown */
	__u32 flags;
};

/*
 * The stack record: header, then py[nr_py], then ips[nr_ips], then
 * stack_bytes of the user stack starting at regs.sp.
 */
struct gl_stack {
	struct gl_hdr hdr;
	__u64 seq;
	__u64 ip, sp, bp; /* user registers at the call's entry */
	__u64 ret_addr;	  /* the word at sp: the return address into the caller */
	__u32 stack_bytes;
	__u16 nr_ips;
	__u16 nr_py;
	__u16 api;
	__u16 py_status; /* 0 ok, else why the Python walk stopped (enum gl_py_status) */
	__u32 cache_id;	 /* DWARF mode: nonzero, the native stack is the one user space
			  * unwound for this id (struct gl_scache_val); no copy follows */
};

/*
 * The native stack cache (DWARF mode). User space unwinds a copy once and
 * learns which of its words the result depends on (return addresses, saved
 * rbp where it is used) and whether bp. A later stack of the same process
 * whose words at those offsets are all equal, with the same ip, sp and first
 * word, and whose copy would end where that one did (len: where its mapping
 * ends, or at a page it could not read), unwinds to the same frames: BPF
 * sends the stack's id and no copy. Anything else is a miss: the full copy.
 *
 * Two maps. stack_shapes holds, under (tgid, ip, sp, first word), the offsets
 * an unwinding from there read: its shape. One call site reached at one depth
 * by many paths (a function called from a thousand places, a recursion) has
 * the same ip, sp and first word for all of them, and mostly one shape, as
 * the frames differ in their return addresses and not in their layout; a key
 * holds up to GL_SC_WAYS shapes (way 0 up), which BPF tries in turn.
 * stack_cache holds the stacks of a shape by the hash of their words at its
 * offsets (gl_scache_mix()), each with those words, which BPF compares: the
 * hash finds the entry, the words make the answer exact.
 */
#define GL_SC_CHECKS 128 /* words checked at most (a power of two) */
#define GL_SC_WAYS 4	 /* shapes under one (tgid, ip, sp, word0) */

struct gl_scache_key {
	__u32 tgid;
	__u32 way; /* < GL_SC_WAYS */
	__u64 ip;
	__u64 sp;
	__u64 word0; /* the word at sp */
};

struct gl_scache_val {
	__u32 id; /* never 0 */
	__u32 pad;
	__u64 bp;
	__u64 val[GL_SC_CHECKS]; /* the words at the shape's offsets */
};

struct gl_scache_shape {
	__u64 start_time; /* of the process (gl_hdr.start_time) */
	__u32 shape;	  /* never 0: its stacks' gl_scache_vkey.shape */
	__u32 span;	  /* bytes at sp holding every word checked: max off + 8 */
	__u32 len;	  /* bytes the copy had; less than asked for: the page at sp + len
			   * could not be read */
	__u16 nr_checks;
	__u8 need_bp;  /* the result depends on bp */
	__u8 need_cut; /* the unwinding tried to read past len: a longer copy may go further */
	__u16 off[GL_SC_CHECKS]; /* the words read, from sp (each < GL_MAX_STACK_COPY) */
	/* the shape's first stack, also in stack_cache: checked before the hash, so that
	 * a key of one stack, the common case, costs one lookup */
	struct gl_scache_val first;
};

struct gl_scache_vkey {
	__u32 tgid;
	__u32 shape;
	__u64 hash; /* of bp (if the shape needs it) and the words (gl_scache_mix()) */
};

/*
 * The hash of a stack's words, one word at a time from GL_SC_SEED: bp first
 * when the shape needs it, then the words in the shape's order. Its only use
 * is to find an entry; the words are compared whatever it says.
 */
#define GL_SC_SEED 0x9e3779b97f4a7c15ULL

static inline __u64 gl_scache_mix(__u64 h, __u64 w)
{
	h ^= w;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

enum gl_proc_event {
	GL_PROC_EXIT = 1,
	GL_PROC_EXEC = 2,
	GL_PROC_FORK = 3,
	GL_PROC_LIBLOAD = 4, /* a target mapped a library gpuleak attaches to (lib below) */
};

/* What a GL_PROC_LIBLOAD record's file is, by its name. */
enum gl_lib_kind {
	GL_LIB_CUDA = 1,   /* libcuda.so* */
	GL_LIB_TORCH = 2,  /* libc10_cuda.so* (PyTorch's allocator probes) */
	GL_LIB_PYTHON = 3, /* libpython* */
};

/* GL_PROC_LIBLOAD: the file a target maps (security_mmap_file), as the kernel names it. */
struct gl_libmap {
	__u64 dev; /* the kernel's identity of the file: super block s_dev, inode number */
	__u64 ino;
	__u32 kind;    /* enum gl_lib_kind */
	__u32 held;    /* 1: BPF stopped the process (SIGSTOP) until user space releases it;
		     * 2: a file not handled yet, but the process could not be stopped */
	char name[48]; /* the file's base name */
	/* With --ranks-from-env: RANK, LOCAL_RANK and WORLD_SIZE as the environment said at
	 * the mapping (-1: absent, or not a number), where env_read is 1: the whole
	 * environment was read (a rank killed soon after leaves none in /proc to read) */
	__s32 env[3];
	__u32 env_read;
};

/*
 * The book of holds that every gpuleak on the host shares (map hold_book, pinned
 * at GL_HOLD_BOOK_PIN where a BPF file system is mounted there): one entry per
 * process held and gpuleak holding it. A gpuleak done attaching takes its entry
 * out and continues the process only when no other live gpuleak still holds it;
 * each one's guard ends the entries of others past the deadline, or whose gpuleak
 * is gone. The layout is part of the pinned map's name: change both together.
 */
#define GL_HOLD_BOOK_PIN "/sys/fs/bpf/gpuleak/hold_book_v1"
#define GL_HOLD_BOOK_MAX 4096
/* In a hold_expired value: the kernel side (a BPF timer) ended the hold, not the guard. */
#define GL_HOLD_BY_KERNEL (1ULL << 63)

struct gl_hold_key {
	__u32 tgid;  /* the process held */
	__u32 agent; /* the gpuleak holding it (its tgid in the initial PID namespace) */
};

struct gl_hold_val {
	__u64 since;	   /* bpf_ktime_get_ns() of the stop */
	__u64 start_ns;	   /* the held process's start (start_boottime): its identity */
	__u64 agent_ticks; /* the gpuleak's start, in clock ticks (/proc/PID/stat) */
};

/* Exact per-process counters kept by BPF (map procs, key = tgid). */
struct gl_proc_stats {
	__u64 start_time;
	__u64 bytes[GL_CLASS_SLOTS];  /* outstanding */
	__u64 allocs[GL_CLASS_SLOTS]; /* outstanding allocations */
	__u64 alloc_calls;
	__u64 free_calls;
	__u64 failures;
	__u64 unmatched_frees;
	__u64 dropped_bytes;	/* dropped by context teardown */
	__u64 exit_time;	/* the process exited (bpf_ktime_get_ns); the books above are final
			      * and stay until user space takes them (its exit record may be lost) */
	__u64 untracked_allocs; /* allocations the full allocation table could not hold */
	__u64 untracked_bytes;	/* their bytes (memory classes only) */
	__u64 ctx_drops;	/* context teardowns applied (they change the books too) */
};

struct gl_proc {
	struct gl_hdr hdr;
	__u32 event; /* enum gl_proc_event */
	union {
		__u32 ppid;	 /* FORK, EXEC, LIBLOAD: the parent (0 in EXEC records of
				  * recordings from before it) */
		__u32 exit_code; /* EXIT: the wait status (a signal in its low 7 bits, else the
				  * exit status above them); 0 in recordings from before it */
	};
	char comm[16];
	union {
		struct gl_proc_stats stats; /* EXIT/EXEC: the books at that moment */
		struct gl_libmap lib;	    /* LIBLOAD */
	};
};

/* Global counters (per-CPU array stats, summed by user space). */
enum gl_stat {
	GL_STAT_LOST_STACK = 0,	  /* ring buffer full: stack record dropped */
	GL_STAT_LOST_CALL,	  /* ring buffer full: call record dropped */
	GL_STAT_LOST_PROC,	  /* ring buffer full: process record dropped */
	GL_STAT_INFLIGHT_FULL,	  /* entry not saved: too many threads in calls */
	GL_STAT_NESTED_OVERFLOW,  /* entry not saved: nesting deeper than GL_MAX_NEST */
	GL_STAT_UNPAIRED_RETURN,  /* a return with no entry saved (entered before the attach) */
	GL_STAT_STALE_ENTRY,	  /* an entry abandoned (longjmp, uretprobe depth limit) */
	GL_STAT_ALLOC_TABLE_FULL, /* BPF allocation table full */
	GL_STAT_STACK_ERROR,	  /* stack capture failed, or the CPU's scratch was busy */
	GL_STAT_READ_ERROR,	  /* could not read an out-argument */
	GL_STAT_PROC_TABLE_FULL,  /* BPF process table full */
	GL_STAT_SCACHE_HIT,	  /* a native stack sent as a cache id, no copy */
	GL_STAT_SCACHE_MISS,	  /* a cache entry had the key, a checked word differed: copied */
	GL_STAT_PY_REREAD,	  /* a block of Python frames read again from its frame's page */
	GL_NR_STATS,
};

/* Calls in flight per thread (the kernel keeps at most 64 return probes per task). */
#define GL_MAX_NEST 64
/*
 * Libraries one tracer attaches. A traced function's probe cookie is its API id
 * (enum gl_api) in the low 32 bits and the tracer's slot of its library above.
 */
#define GL_MAX_LIBS 64
#define GL_COOKIE(api, lib) ((__u64)(api) | ((__u64)(lib) << 32))
/* Depth of the per-thread context stack (cuCtxPushCurrent). */
#define GL_MAX_CTX 8

/* ==== CPython frames: bpf/python.bpf.h walks them, src/stacks/python/ configures it === */

/* gl_py_frame.flags */
#define GL_PY_ENTRY 0x1 /* outermost frame run by one native call of the eval loop */
/*
 * The calling thread has no Python thread state (it never ran Python: a runtime's
 * worker thread): the frames are those of the only other Python thread that was
 * inside Python code at that moment, most likely waiting for this work. Inferred.
 */
#define GL_PY_INFERRED 0x2

#define GL_PY_LASTI_NONE 0xffffffffu

/* gl_stack.py_status: why the walk stopped. */
enum gl_py_status {
	GL_PY_OK = 0,		/* at the thread's first frame, or the process is not Python */
	GL_PY_NO_THREAD = 1,	/* no thread state for this thread (it never ran Python), and
				   no other thread inside Python code */
	GL_PY_NO_RUNTIME = 2,	/* no interpreter yet, or _PyRuntime unreadable */
	GL_PY_FAULT = 3,	/* a read failed: a frame torn down meanwhile, or wrong offsets */
	GL_PY_TRUNCATED = 4,	/* GL_MAX_PY_FRAMES frames recorded and more remain */
	GL_PY_LOOP = 5,		/* the frame chain did not end within GL_PY_MAX_STEPS */
	GL_PY_MANY_THREADS = 6, /* no match within GL_PY_MAX_THREADS thread states */
	GL_PY_STALE = 7,	/* configured for an earlier process with this PID */
	GL_PY_AMBIGUOUS = 8,	/* no thread state for this thread, and more than one other
				   thread inside Python code: no caller inferred */
	GL_PY_NR_STATUS = 9,
};

/* gl_py_proc.flags */
#define GL_PY_F_LASTI_INT 0x1	/* fr_instr holds an int instruction index (3.10 f_lasti) */
#define GL_PY_F_CFRAME 0x2	/* ts_frame points at a _PyCFrame (3.11, 3.12) */
#define GL_PY_F_ALL_ENTRY 0x4	/* one eval-loop call per frame (3.10) */
#define GL_PY_F_IS_ENTRY 0x8	/* fr_is_entry is valid (3.11) */
#define GL_PY_F_NATIVE_TID 0x10 /* ts_native_tid is valid (3.11+) */

#define GL_PY_WINDOW 256      /* most bytes read at once from a thread state or frame */
#define GL_PY_MAX_THREADS 256 /* thread states looked at, over all interpreters */
#define GL_PY_MAX_INTERPS 8   /* interpreters looked at */
#define GL_PY_MAX_STEPS 160   /* frames looked at (shims included) */

/*
 * How to walk one process's interpreter (map py_procs, key = tgid). The
 * thread-state and frame fields lie inside the first win_ts and win_fr bytes.
 */
struct gl_py_proc {
	__u64 runtime;	       /* address of _PyRuntime in the process */
	__u64 start_ticks;     /* process start, clock ticks after boot (/proc/PID/stat) */
	__u32 tick_ns;	       /* nanoseconds per clock tick */
	__u16 version;	       /* major << 8 | minor */
	__u16 flags;	       /* GL_PY_F_* */
	__u32 rt_interp_head;  /* _PyRuntimeState: interpreters.head */
	__u32 is_next;	       /* PyInterpreterState: next */
	__u32 is_threads_head; /* PyInterpreterState: threads.head (3.10: tstate_head) */
	__u16 ts_next;	       /* PyThreadState: next */
	__u16 ts_thread_id;    /* PyThreadState: thread_id (pthread_self()) */
	__u16 ts_native_tid;   /* PyThreadState: native_thread_id */
	__u16 ts_frame;	       /* PyThreadState: frame (3.10), cframe (3.11, 3.12), current_frame */
	__u16 cf_frame;	       /* _PyCFrame: current_frame */
	__u16 fr_previous;     /* frame: f_back (3.10), previous */
	__u16 fr_code;	       /* frame: f_code, f_executable (3.13+) */
	__u16 fr_instr;	       /* frame: f_lasti (3.10), prev_instr, instr_ptr (3.13+) */
	__u16 fr_owner;	       /* frame: owner (3.12+) */
	__u16 fr_is_entry;     /* frame: is_entry (3.11) */
	__u16 co_code;	       /* code object: co_code_adaptive (3.11+) */
	__u8 owner_shim;       /* frames owned from this value up are C-stack shims; 0: none */
	__u8 pad;
	__u16 win_ts; /* bytes of a thread state read at once (<= GL_PY_WINDOW) */
	__u16 win_fr; /* bytes of a frame read at once (<= GL_PY_WINDOW) */
};
/* ==== end of CPython frames ==== */

#endif /* GPULEAK_ABI_H */
