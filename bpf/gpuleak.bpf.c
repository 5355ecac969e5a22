// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * gpuleak.bpf.c - uprobes on the CUDA driver's memory API.
 *
 * One entry program and one return program serve every traced function: the
 * probe's BPF cookie is the API id, and the probe table in gpuleak_abi.h says
 * what the function means. The entry saves the arguments per thread and, for
 * allocating calls, writes the caller's stack to the ring buffer. The return
 * checks the result, updates the exact per-process books (allocs, procs) and
 * writes a call record saying what changed. Scheduler tracepoints close the
 * books of processes that exit or exec and follow forks of targets; a hook on
 * file mappings finds the libraries to attach and holds a target until they are.
 *
 * Every program of the object is in this file (PyTorch's allocator probes and
 * the benchmarks' do-nothing programs too); the *.bpf.h files are helpers,
 * each including what it uses.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "gpuleak_abi.h"
#include "maps.bpf.h"
#include "stack.bpf.h"
#include "deadline.bpf.h"
#include "call.bpf.h"
#include "allocs.bpf.h"
#include "books.bpf.h"
#include "tiers.bpf.h"
#include "environ.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GL_API_DESC(sym, role, cls, kind, flags) \
	{ GL_ROLE_##role, GL_CLASS_##cls, GL_KIND_##kind, (flags) },
static const struct gl_api_desc apis[GL_NR_APIS] = { GL_APIS(GL_API_DESC) };
#undef GL_API_DESC

static __always_inline bool is_target(__u32 tgid)
{
	return targ_all || bpf_map_lookup_elem(&targets, &tgid);
}

/*
 * The current thread's calls in flight, created at its first call if it is a
 * target's. A thread that has them is a target's: they are created for no
 * other, and a process leaves targets only when it exits (proc_exit), with
 * its threads and their entries, so the targets lookup (a hash lookup at
 * every entry) is paid once a thread.
 */
static __always_inline struct gl_inflight *target_inflight(struct task_struct *task, __u32 tgid)
{
	struct gl_inflight *inf = bpf_task_storage_get(&inflight, task, NULL, 0);

	if (inf)
		return inf;
	if (!is_target(tgid))
		return NULL;
	inf = bpf_task_storage_get(&inflight, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!inf)
		stat_inc(GL_STAT_INFLIGHT_FULL);
	return inf;
}

static __always_inline __u64 arg_of(struct pt_regs *ctx, int i)
{
	switch (i) {
	case 0: return PT_REGS_PARM1(ctx);
	case 1: return PT_REGS_PARM2(ctx);
	case 2: return PT_REGS_PARM3(ctx);
	case 3: return PT_REGS_PARM4(ctx);
	default: return PT_REGS_PARM5(ctx);
	}
}

/*
 * Calls in flight whose stack pointer is at or below a new entry's were left
 * without returning (longjmp out of a callback, a uretprobe the kernel did
 * not install): the new call reuses their stack, so they are dead. Returns
 * the depth that remains.
 */
static __always_inline __u32 drop_stale(struct gl_inflight *inf, __u64 sp)
{
	__u32 d = inf->depth;

	for (int i = 0; i < GL_MAX_NEST && d > 0 && d <= GL_MAX_NEST; i++) {
		if (inf->slot[(d - 1) & (GL_MAX_NEST - 1)].sp > sp)
			break;
		unclaim(&inf->slot[(d - 1) & (GL_MAX_NEST - 1)]);
		d--;
		stat_inc(GL_STAT_STALE_ENTRY);
	}
	inf->depth = d;
	return d;
}

/* uprobe on every traced libcuda function: remember the call, capture the stack. */
SEC("uprobe")
int call_enter(struct pt_regs *ctx)
{
	__u64 api = bpf_get_attach_cookie(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 lib = api >> 32, *armed;
	struct task_struct *task;
	struct gl_inflight *inf;
	struct gl_slot *slot;
	__u32 depth;

	api &= 0xffffffff;
	barrier_var(api); /* one value, the one checked below */
	if (api >= GL_NR_APIS || tracing_stopped)
		return 0;
	armed = bpf_map_lookup_elem(&lib_armed, &lib);
	if (!armed || !*armed)
		return 0; /* its library is being attached: a call from before the attach */
	task = bpf_get_current_task_btf();
	inf = target_inflight(task, pid_tgid >> 32);
	if (!inf)
		return 0;
	count_call(api);
	depth = drop_stale(inf, PT_REGS_SP(ctx));
	if (depth >= GL_MAX_NEST) {
		stat_inc(GL_STAT_NESTED_OVERFLOW);
		return 0;
	}
	/* depth is below GL_MAX_NEST: masked where the compiler keeps it, for the verifier */
	asm volatile("%0 &= %1" : "+r"(depth) : "i"(GL_MAX_NEST - 1));
	slot = &inf->slot[depth];
	for (int i = 0; i < 5; i++)
		slot->args[i] = arg_of(ctx, i);
	slot->sp = PT_REGS_SP(ctx);
	slot->seq = ++inf->seq;
	slot->teardowns = *(volatile __u64 *)&ctx_teardowns;
	slot->api = api;
	claim_key(slot, pid_tgid >> 32, &apis[api]);
	inf->depth = depth + 1;

	if ((apis[api].flags & GL_API_STACK) && targ_stack_mode != GL_STACK_NONE)
		emit_stack(ctx, task, inf, pid_tgid, slot->seq, api, true, targ_stack_mode);
	return 0;
}

/*
 * Find the entry this return belongs to. Entries above it whose stack pointer
 * lies below the returning frame were abandoned (longjmp, or the kernel's
 * uretprobe depth limit) and are dropped. Returns the slot index or -1.
 */
static __always_inline int pop_slot(struct gl_inflight *inf, __u32 api, __u64 ret_sp)
{
	for (int i = 0; i < GL_MAX_NEST; i++) {
		__u32 d = inf->depth;
		struct gl_slot *s;

		if (d == 0 || d > GL_MAX_NEST)
			break;
		s = &inf->slot[(d - 1) & (GL_MAX_NEST - 1)];
		if (s->sp + 8 < ret_sp) {
			/* deeper than the returning frame: abandoned */
			unclaim(s);
			inf->depth = d - 1;
			stat_inc(GL_STAT_STALE_ENTRY);
			continue;
		}
		if (s->sp + 8 == ret_sp && s->api == api) {
			inf->depth = d - 1;
			return (d - 1) & (GL_MAX_NEST - 1);
		}
		break; /* an outer call: this return's entry was never saved */
	}
	stat_inc(GL_STAT_UNPAIRED_RETURN);
	return -1;
}

/* uretprobe on every traced libcuda function: apply the result to the books. */
SEC("uretprobe")
int call_exit(struct pt_regs *ctx)
{
	__u64 api = bpf_get_attach_cookie(ctx) & 0xffffffff;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_struct *task = bpf_get_current_task_btf();
	struct gl_inflight *inf;
	struct gl_call_ctx c = {};
	int idx;

	if (api >= GL_NR_APIS)
		return 0;
	inf = bpf_task_storage_get(&inflight, task, NULL, 0);
	if (!inf) {
		/* a target's thread with no call entered: this call entered before the entry
		 * probes were in (or its entry found no room, counted there) */
		if (is_target(pid_tgid >> 32))
			stat_inc(GL_STAT_UNPAIRED_RETURN);
		return 0;
	}
	idx = pop_slot(inf, api, PT_REGS_SP(ctx));
	if (idx < 0)
		return 0;
	c.slot = &inf->slot[idx & (GL_MAX_NEST - 1)];
	c.inf = inf;
	c.desc = apis[api];
	c.api = api;
	c.rc = (int)PT_REGS_RC(ctx);
	c.pid_tgid = pid_tgid;
	c.task = task;
	apply_call(&c);
	return 0;
}

/*
 * PyTorch's caching allocator, seen through its USDT probes.
 *
 * The CUDA driver only sees the allocator's segments; a tensor block that
 * leaks inside a segment never reaches it. libc10_cuda.so announces every
 * block with pytorch:malloc (ptr, device, size, stream) and pytorch:free
 * (ptr), each behind a semaphore that libbpf's USDT attachment raises. The
 * blocks are booked as class torch_block, with the same stacks as driver
 * calls. There is no entry/return pair: one probe, one record of each kind.
 */

/* A call context for a probe that is its own entry and return. */
static __always_inline struct gl_inflight *torch_begin(struct gl_call_ctx *c, struct gl_slot *slot,
						       __u32 api)
{
	struct gl_inflight *inf;

	c->pid_tgid = bpf_get_current_pid_tgid();
	if (tracing_stopped)
		return NULL;
	c->task = bpf_get_current_task_btf();
	inf = target_inflight(c->task, c->pid_tgid >> 32);
	if (!inf)
		return NULL;
	count_call(api);
	slot->seq = ++inf->seq;
	slot->api = api;
	c->slot = slot;
	c->inf = inf;
	c->api = api;
	c->desc = apis[api];
	c->dev = -1;
	return inf;
}

/* pytorch:malloc(ptr, device, size, stream): a tensor block handed out. The
 * stream is not declared: BPF_USDT fetches every argument it names, each one a
 * call and, for an argument in memory, a read of the target's stack. */
SEC("usdt")
int BPF_USDT(torch_malloc, void *ptr, long device, long size)
{
	struct gl_call_ctx c = {};
	struct gl_slot slot = {};

	if (!torch_begin(&c, &slot, GL_API_pytorch_malloc) || !ptr || size <= 0)
		return 0;
	/* tensors are many: --torch-stacks python keeps their Python frames only,
	 * --tensor-sample a byte-weighted sample of their stacks */
	if (targ_stack_mode != GL_STACK_NONE && sample_take(size))
		emit_stack(ctx, c.task, c.inf, c.pid_tgid, slot.seq, c.api, false,
			   targ_torch_python_only ? GL_STACK_NONE : targ_stack_mode);
	book_alloc(&c, GL_KIND_TORCH, (__u64)ptr, size, GL_CLASS_TORCH_BLOCK, (__s16)device);
	return 0;
}

/* pytorch:free(ptr): the block went back to the allocator's cache. */
SEC("usdt")
int BPF_USDT(torch_free, void *ptr)
{
	struct gl_call_ctx c = {};
	struct gl_slot slot = {};

	if (!torch_begin(&c, &slot, GL_API_pytorch_free) || !ptr)
		return 0;
	/* a block whose malloc was not seen (before attach, between tensor windows,
	 * in a window's tail) tells nothing: no record, no count. One walk of the
	 * table takes the block out and hands it to book_free, which then looks
	 * nothing up (one another thread's free took first is booked unmatched). */
	slot.claim = take_key(&slot.claimed_key, &slot.claimed, tgid_of(&c), GL_KIND_TORCH,
			      (__u64)ptr, false);
	if (slot.claim == GL_CLAIM_ABSENT)
		return 0;
	book_free(&c, GL_KIND_TORCH, (__u64)ptr);
	return 0;
}

/*
 * The tensor tier's window boundary, run by user space (BPF_PROG_RUN) while
 * the allocator probes are detached: drops every tensor block (of the process
 * tiers_forget_tgid names, or of all) from allocs and from its process's
 * counters (tiers.bpf.h).
 */
SEC("syscall")
int forget_tensors(void *ctx)
{
	tiers_forgotten = 0;
	bpf_for_each_map_elem(&allocs, forget_one, NULL, 0);
	return 0;
}

/*
 * A SIGSTOP taken by a process held from a uprobe (--census-on-oom's hold at a failure):
 * its deadline starts here, where a BPF timer may be started. A hold that has one
 * already (held at a library's mapping) keeps it.
 */
SEC("tp_btf/signal_deliver")
int BPF_PROG(hold_signal, int sig)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (sig != 19 /* SIGSTOP */ || !bpf_map_lookup_elem(&held, &tgid) ||
	    bpf_map_lookup_elem(&hold_timers, &tgid))
		return 0;
	start_deadline(task, tgid);
	return 0;
}

/* A thread exits: when it is the last of its process, the driver frees everything, and
 * nothing of the process is kept. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *exiting)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct gl_hold_key hk = { .agent = targ_self };

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	close_books(task, tgid, GL_PROC_EXIT);
	bpf_map_delete_elem(&targets, &tgid);
	/* its frames' layout goes with it, whatever user space does next */
	bpf_map_delete_elem(&py_procs, &tgid);
	hk.tgid = tgid;
	bpf_map_delete_elem(&hold_book, &hk);
	return 0;
}

/* exec replaces the address space: the old image's CUDA memory is gone. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *execing)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	close_books(task, tgid, GL_PROC_EXEC);
	return 0;
}

/* A target forks: its child is traced too (its books start empty). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (targ_all || !targ_follow_forks || ctgid != child->pid || ptgid == ctgid)
		return 0;
	if (!bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	emit_proc(child, ctgid, GL_PROC_FORK, ptgid, NULL);
	return 0;
}

/* Whether the NUL-terminated n starts with the len bytes of p. */
static __always_inline bool has_prefix(const char *n, const char *p, int len)
{
	for (int i = 0; i < len; i++)
		if (n[i] != p[i])
			return false;
	return true;
}

/* Which library a file's base name names (enum gl_lib_kind), or 0. */
static __always_inline __u32 lib_kind(const char *n)
{
	if (has_prefix(n, "libcuda.so", 10) && (n[10] == '\0' || n[10] == '.'))
		return GL_LIB_CUDA;
	if (has_prefix(n, "libc10_cuda.so", 14))
		return GL_LIB_TORCH;
	return has_prefix(n, "libpython", 9) ? GL_LIB_PYTHON : 0;
}

/* The file of the mmap(2) current is in, and that call's prot; NULL if it is in none. */
static __always_inline struct file *mmap_call_file(struct task_struct *task, __u64 *prot)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct file **fds, *file = NULL;
	unsigned int max;
	long nr, fd;

#if defined(__TARGET_ARCH_arm64)
	nr = BPF_CORE_READ(regs, syscallno);
	fd = BPF_CORE_READ(regs, regs[4]);
	*prot = BPF_CORE_READ(regs, regs[2]);
	if (nr != 222 /* __NR_mmap */)
		return NULL;
#else
	nr = BPF_CORE_READ(regs, orig_ax);
	fd = BPF_CORE_READ(regs, r8);
	*prot = BPF_CORE_READ(regs, dx);
	if (nr != 9 /* __NR_mmap */)
		return NULL;
#endif
	max = BPF_CORE_READ(task, files, fdt, max_fds);
	if (fd < 0 || fd >= max)
		return NULL;
	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]))
		return NULL;
	return file;
}

/*
 * tp_btf on mmap_lock_acquire_returned, which an mmap(2) reaches once its
 * file has passed the security checks, just before the mapping is made (the
 * dynamic loader mapping a library at start-up or at dlopen): a target that
 * maps the code of a libcuda or libc10_cuda that user space has not handled
 * yet is stopped with SIGSTOP, taken as the mmap returns, before any code of
 * the library can run; user space attaches the probes, then sends SIGCONT (or
 * the guard does, once the hold's deadline has passed: loader.c). No
 * probe is placed in any process; other write locks of the address space
 * (munmap, mprotect, brk) pay this check and nothing else. (fentry and LSM
 * hooks on the mmap path would be simpler, but are refused on some kernels.)
 */
SEC("tp_btf/mmap_lock_acquire_returned")
int BPF_PROG(lib_mmap, struct mm_struct *mm, bool write, bool success)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now, prot = 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = pid_tgid >> 32, zero = 0;
	struct gl_file_key key;
	char name[sizeof(((struct gl_libmap *)0)->name)] = {};
	struct file *file;
	struct gl_proc *r;
	__u32 kind;
	bool known;

	if (!write || !success || tgid == targ_self || !is_target(tgid))
		return 0;
	file = mmap_call_file(task, &prot);
	/* only the mapping of the code: the dynamic loader maps it before any of the
	 * library's code can run, while a tool that reads the file (another gpuleak,
	 * libelf, a debugger) maps it readable only and is never held */
	if (!file || !(prot & 4 /* PROT_EXEC */))
		return 0;
	if (bpf_probe_read_kernel_str(name, sizeof(name),
				      BPF_CORE_READ(file, f_path.dentry, d_name.name)) < 0)
		return 0;
	kind = lib_kind(name);
	/* with -a, libpython's mapping says nothing: a process matters once it maps libcuda,
	 * and the scan then made finds its interpreter */
	if (!kind || (kind == GL_LIB_PYTHON && targ_all))
		return 0;
	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(file, f_inode, i_ino);
	known = bpf_map_lookup_elem(&known_libs, &key);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		stat_inc(GL_STAT_LOST_PROC);
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, GL_REC_PROC, sizeof(*r), task, pid_tgid);
	r->event = GL_PROC_LIBLOAD;
	r->ppid = BPF_CORE_READ(task, group_leader, real_parent, tgid);
	BPF_CORE_READ_STR_INTO(&r->comm, task, group_leader, comm);
	r->lib.dev = key.dev;
	r->lib.ino = key.ino;
	r->lib.kind = kind;
	__builtin_memcpy(r->lib.name, name, sizeof(name));
	read_env_ranks(task, &r->lib);
	now = bpf_ktime_get_ns();
	/* key 0 in held: the tracer is going away, hold nothing more */
	if (targ_hold && !known && kind != GL_LIB_PYTHON && !bpf_map_lookup_elem(&held, &zero)) {
		/* an entry in held already: held at an earlier mapping */
		int h = hold_current(task, tgid, now);

		if (h > 0)
			start_deadline(task, tgid);
		r->lib.held = h > 0 ? 1 : h < 0 ? 2 : 0;
	}
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * Programs that do nothing, for benchmarks only.
 *
 * `gpuleak --bench-floor` attaches these on the same functions, through the
 * same links, instead of call_enter/call_exit: what a traced call then costs
 * is the price of the uprobe and uretprobe themselves, the floor that no
 * tracer built on them can go below.
 */

/* uprobe on every traced function, in place of call_enter. */
SEC("uprobe")
int floor_enter(struct pt_regs *ctx)
{
	return 0;
}

/* uretprobe on every traced function, in place of call_exit. */
SEC("uretprobe")
int floor_exit(struct pt_regs *ctx)
{
	return 0;
}

/* pytorch:malloc, in place of torch_malloc: the USDT probe's own price. */
SEC("usdt")
int floor_torch_malloc(struct pt_regs *ctx)
{
	return 0;
}

/* pytorch:free, in place of torch_free. */
SEC("usdt")
int floor_torch_free(struct pt_regs *ctx)
{
	return 0;
}
