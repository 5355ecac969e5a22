// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_unwind.c - libFuzzer target: the DWARF unwinder (unwind.c, dwarf.c,
 * dwarf_deps.c) on hostile stack copies. A traced process chooses every byte
 * of its stack, so the input is the registers and the copy; it is unwound
 * through this very process's address map and its modules' CFI, twice (the
 * second time answered from the cache, or checked against it).
 *
 * Input: ip selector, sp, bp (8 bytes each), then the copy. So that the
 * unwinding meets real CFI whatever the address layout of the run, the ip is
 * taken near a function of this process, and a word of the copy whose top
 * byte is 0xc0 becomes an address near one (a return address), one whose top
 * byte is 0x5c an address in the copy (a saved frame pointer); other words
 * stay as they are.
 */
#include "fuzz.h"
#include "stacks/modules.h"
#include "stacks/native/unwind.h"

static struct modules *mods;
static struct unwinder *uw;
static struct stack_owner proc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Code in this binary and in the C library. */
static const void *const anchors[] = {
	(const void *)LLVMFuzzerTestOneInput, (const void *)unwind__stack,
	(const void *)modules__new,	      (const void *)qsort,
	(const void *)snprintf,		      (const void *)fopen,
	(const void *)memcmp,		      (const void *)strtoul,
};

#define NR_ANCHORS (sizeof(anchors) / sizeof(anchors[0]))

static uint64_t near_anchor(uint64_t sel)
{
	return (uint64_t)anchors[sel % NR_ANCHORS] + ((sel >> 8) & 0x3ff);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	mods = modules__new();
	uw = mods ? unwinder__new(mods, GL_STACK_DWARF) : NULL;
	proc.pid = getpid();
	proc.start_time = 1;
	proc.am = mods ? addr_map__new(mods, getpid()) : NULL;
	if (!uw || !proc.am) {
		fprintf(stderr, "fuzz_unwind: cannot set up the unwinder\n");
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct {
		struct gl_stack rec;
		uint8_t stack[GL_MAX_STACK_COPY];
	} cap;
	uint64_t regs[3], ips[UNWIND_MAX_FRAMES];
	struct stack_view v = { .rec = &cap.rec, .stack = cap.stack };

	if (size < sizeof(regs))
		return 0;
	memcpy(regs, data, sizeof(regs));
	data += sizeof(regs);
	size -= sizeof(regs);
	if (size > GL_MAX_STACK_COPY)
		size = GL_MAX_STACK_COPY;
	memset(&cap.rec, 0, sizeof(cap.rec));
	cap.rec.hdr.type = GL_REC_STACK;
	cap.rec.ip = near_anchor(regs[0]);
	cap.rec.sp = regs[1] >> 56 == 0xff ? 0x7ffc00000000ULL + (regs[1] & 0xffff) : regs[1];
	cap.rec.stack_bytes = size;
	memcpy(cap.stack, data, size);
	for (size_t off = 0; off + 8 <= size; off += 8) {
		uint64_t w;

		memcpy(&w, cap.stack + off, 8);
		if (w >> 56 == 0xc0)
			w = near_anchor(w);
		else if (w >> 56 == 0x5c)
			w = cap.rec.sp + (w & 0xffff);
		memcpy(cap.stack + off, &w, 8);
	}
	cap.rec.bp = regs[2] >> 56 == 0x5c ? cap.rec.sp + (regs[2] & 0xffff) : regs[2];
	if (size >= 8)
		memcpy(&cap.rec.ret_addr, cap.stack, 8);
	unwind__stack(uw, &proc, &v, ips, UNWIND_MAX_FRAMES);
	unwind__stack(uw, &proc, &v, ips, UNWIND_MAX_FRAMES);
	return 0;
}
