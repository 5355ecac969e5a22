// SPDX-License-Identifier: BSD-2-Clause
/*
 * unwind_bench.c - user-space cost of a DWARF stack record: the program copies
 * its own stack at the entry of a function (as the BPF program does) through a
 * recursion of --depth frames built without frame pointers, for --stacks
 * different depths, and times unwind__stack() on the copies:
 *   first   the first record of a process: its Dwfl built ("build"), the
 *           modules' CFI read for the first time, the miss below
 *   miss    a stack not seen before: libdwfl, then the dependency analysis
 *           (both also timed alone: "libdwfl", "analysis")
 *   hit     a stack seen before, from the cache
 * Usage: unwind_bench [DEPTH [STACKS]] (defaults 40 and 32).
 * Prints one "name value unit" line per figure. Built by bench/stack_modes.py.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "stacks/native/dwarf.h"
#include "stacks/native/dwarf_deps.h"
#include "stacks/modules.h"
#include "stacks/native/unwind.h"
#include "util/parse.h"

struct capture {
	struct gl_stack rec;
	uint8_t stack[GL_MAX_STACK_COPY];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

__attribute__((used)) void bench_copy(struct capture *c, uint64_t sp, uint64_t bp, uint64_t ip)
{
	struct iovec local, remote;
	pthread_attr_t attr;
	void *addr;
	size_t size;
	uint64_t end;

	if (pthread_getattr_np(pthread_self(), &attr) ||
	    pthread_attr_getstack(&attr, &addr, &size))
		abort();
	pthread_attr_destroy(&attr);
	end = (uint64_t)addr + size;
	memset(&c->rec, 0, sizeof(c->rec));
	c->rec.hdr.type = GL_REC_STACK;
	c->rec.ip = ip;
	c->rec.sp = sp;
	c->rec.bp = bp;
	c->rec.stack_bytes = end - sp < sizeof(c->stack) ? end - sp : sizeof(c->stack);
	local = (struct iovec){ c->stack, c->rec.stack_bytes };
	remote = (struct iovec){ (void *)sp, c->rec.stack_bytes };
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)c->rec.stack_bytes)
		abort();
	memcpy(&c->rec.ret_addr, c->stack, sizeof(c->rec.ret_addr));
}

/* The registers at its first instruction, and the stack copied below sp. */
void bench_entry(struct capture *c);
__asm__(".text\n"
	".type bench_entry, @function\n"
	"bench_entry:\n"
	".cfi_startproc\n"
	"mov %rsp, %rsi\n"
	"mov %rbp, %rdx\n"
	"lea bench_entry(%rip), %rcx\n"
	"sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call bench_copy\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size bench_entry, .-bench_entry\n");

/* Frames with callee-saved registers in use and a buffer, as in optimized C++. */
__attribute__((noipa)) static void recurse(struct capture *c, int depth)
{
	unsigned long a = depth * 3UL, b = depth ^ 5UL, d = depth + 7UL;
	volatile char buf[48];

	buf[0] = (char)depth;
	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d));
	if (depth == 0)
		bench_entry(c);
	else
		recurse(c, depth - 1);
	__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(d));
	c->rec.pad += (uint32_t)(a + b + d + buf[0]);
}

static int unwind_view(struct unwinder *u, struct stack_owner *p, struct capture *c, uint64_t *ips)
{
	struct stack_view v = { .rec = &c->rec, .stack = c->stack };

	return unwind__stack(u, p, &v, ips, UNWIND_MAX_FRAMES);
}

int main(int argc, char **argv)
{
	uint64_t depth = 40, nr = 32, reps = 2000, ips[UNWIND_MAX_FRAMES], t0, libdw = 0, deps = 0;
	struct modules *mods = modules__new();
	struct stack_owner p = { .pid = getpid(), .start_time = 1 };
	struct dwarf_replay *replay = dwarf_replay__new();
	struct capture *caps;
	struct unwind_stats st, first;
	struct unwinder *u;
	int frames = 0;

	if (argc > 1 && parse_u64(argv[1], 1, 200, &depth))
		return 2;
	if (argc > 2 && parse_u64(argv[2], 2, 1000, &nr))
		return 2;
	caps = calloc(nr, sizeof(*caps));
	if (!mods || !replay || !caps || !(p.am = addr_map__new(mods, getpid())))
		return 1;
	for (uint64_t i = 0; i < nr; i++)
		recurse(&caps[i], (int)(depth + i)); /* each its own stack */

	u = unwinder__new(mods, GL_STACK_DWARF);
	t0 = now_ns();
	frames = unwind_view(u, &p, &caps[0], ips);
	printf("first %.1f us (%d frames)\n", (now_ns() - t0) / 1e3, frames);
	unwinder__stats(u, &first);
	printf("build %.1f us\n", first.build_ns / 1e3);
	for (uint64_t i = 1; i < nr; i++)
		unwind_view(u, &p, &caps[i], ips);
	unwinder__stats(u, &st);
	printf("miss %.1f us\n", (double)(st.miss_ns - first.miss_ns) / (st.misses - 1) / 1e3);

	t0 = now_ns();
	for (uint64_t r = 0; r < reps; r++)
		for (uint64_t i = 0; i < nr; i++)
			unwind_view(u, &p, &caps[i], ips);
	printf("hit %.0f ns\n", (double)(now_ns() - t0) / (reps * nr));
	unwinder__stats(u, &st);
	printf("stats stacks=%llu hits=%llu misses=%llu uncached=%llu builds=%llu\n",
	       (unsigned long long)st.stacks, (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)st.uncached,
	       (unsigned long long)st.builds);

	/* the two halves of a miss, with a warm Dwfl */
	{
		struct dwarf_ctx *ctx = dwarf_ctx__new(mods);
		struct dwarf_proc *dp = dwarf_proc__new(ctx, p.am, getpid());
		struct dwarf_deps d;

		for (int pass = 0; pass < 2; pass++) {
			libdw = deps = 0;
			for (uint64_t i = 0; i < nr; i++) {
				struct dwarf_input in = { caps[i].rec.ip, caps[i].rec.sp,
							  caps[i].rec.bp, caps[i].stack,
							  caps[i].rec.stack_bytes };
				int n;

				t0 = now_ns();
				n = dwarf_proc__unwind(dp, &in, ips, UNWIND_MAX_FRAMES);
				libdw += now_ns() - t0;
				t0 = now_ns();
				if (dwarf_replay__deps(replay, dwarf_proc__dwfl(dp), &in, ips, n,
						       UNWIND_MAX_FRAMES, &d))
					return 1;
				deps += now_ns() - t0;
				if (pass && i == 0)
					printf("checks %u of %d frames (bp %s)\n", d.nr_checks, n,
					       d.bp ? "counts" : "does not count");
			}
		}
		printf("libdwfl %.1f us\n", libdw / 1e3 / nr);
		printf("analysis %.1f us\n", deps / 1e3 / nr);
		dwarf_proc__free(dp);
		dwarf_ctx__free(ctx);
	}
	unwinder__free(u);
	dwarf_replay__free(replay);
	addr_map__free(p.am);
	modules__free(mods);
	free(caps);
	return 0;
}
