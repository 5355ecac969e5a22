// SPDX-License-Identifier: BSD-2-Clause
/*
 * dwarf.c - CFI unwinding of copied user stacks with libdwfl.
 *
 * One Dwfl per process reports every module of the process's address map at
 * the load bias worked out from the module's program headers and the mapping.
 * libdwfl opens a module's ELF when it first needs it, through the module
 * table's descriptor (files of other mount namespaces and deleted files
 * work): the Elf it gets is mapped whole and keeps no descriptor, so a
 * process's Dwfl costs no file descriptors. dwfl_attach_state() gives it callbacks
 * whose memory_read serves the stack copy of the record being unwound and
 * whose set_initial_registers gives rip, rsp and rbp. libdwfl follows
 * .eh_frame, then .debug_frame, and falls back to the rbp chain where a pc
 * has neither. Separate debug files are never looked for.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include "dwarf.h"
#include "util/htab.h"

#define REG_BP 6 /* DWARF x86-64 rbp; 7 is rsp */
#define LAYOUT_SEGS 8

/* Where a module's PT_LOAD segments sit in its file and in its address space. */
struct elf_layout {
	uint8_t state; /* 0: not read, 1: read, 2: unusable */
	uint8_t nr;
	uint16_t e_type;
	uint64_t lo, hi; /* the span libdwfl gives the module, before the bias */
	struct {
		uint64_t off, vaddr, filesz;
		bool exec;
	} seg[LAYOUT_SEGS];
};

struct dwarf_ctx {
	struct modules *mods;
	struct elf_layout *layouts; /* index = module id */
	uint32_t nr_layouts;
};

struct dwarf_proc {
	struct dwarf_ctx *ctx;
	Dwfl *dwfl;
	int pid;
	const struct dwarf_input *in; /* the record being unwound */
};

struct dwarf_ctx *dwarf_ctx__new(struct modules *m)
{
	struct dwarf_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->mods = m;
	elf_version(EV_CURRENT);
	return c;
}

void dwarf_ctx__free(struct dwarf_ctx *c)
{
	if (!c)
		return;
	free(c->layouts);
	free(c);
}

static void read_layout(int fd, struct elf_layout *l)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t nph;

	l->state = 2;
	if (!e)
		return;
	if (gelf_getehdr(e, &eh) && elf_getphdrnum(e, &nph) == 0) {
		l->e_type = eh.e_type;
		for (size_t i = 0; i < nph && l->nr < LAYOUT_SEGS; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (!l->nr)
				l->lo = ph.p_vaddr & -ph.p_align; /* as libdwfl computes it */
			if (ph.p_vaddr + ph.p_memsz > l->hi)
				l->hi = ph.p_vaddr + ph.p_memsz;
			l->seg[l->nr].off = ph.p_offset;
			l->seg[l->nr].vaddr = ph.p_vaddr;
			l->seg[l->nr].filesz = ph.p_filesz;
			l->seg[l->nr].exec = ph.p_flags & PF_X;
			l->nr++;
		}
		if (l->nr)
			l->state = 1;
	}
	elf_end(e);
}

static const struct elf_layout *layout_of(struct dwarf_ctx *c, uint32_t mod, int fd)
{
	if (mod >= c->nr_layouts) {
		uint32_t nr = mod + 64;
		struct elf_layout *l = realloc(c->layouts, nr * sizeof(*l));

		if (!l)
			return NULL;
		memset(l + c->nr_layouts, 0, (nr - c->nr_layouts) * sizeof(*l));
		c->layouts = l;
		c->nr_layouts = nr;
	}
	if (!c->layouts[mod].state)
		read_layout(fd, &c->layouts[mod]);
	return c->layouts[mod].state == 1 ? &c->layouts[mod] : NULL;
}

/*
 * Load bias of a module from an executable mapping of it: the mapping is an
 * executable segment's, which it maps linearly, so start = bias + p_vaddr +
 * (off - p_offset). (A page of it may hold bytes of other segments too.)
 */
static bool mapping_bias(const struct elf_layout *l, uint64_t start, uint64_t end, uint64_t off,
			 uint64_t *bias)
{
	if (l->e_type == ET_EXEC) {
		*bias = 0;
		return true;
	}
	for (int i = 0; i < l->nr; i++) {
		if (l->seg[i].exec && l->seg[i].off < off + (end - start) &&
		    l->seg[i].off + l->seg[i].filesz > off) {
			*bias = start - off + l->seg[i].off - l->seg[i].vaddr;
			return true;
		}
	}
	return false;
}

struct report_key {
	uint64_t mod, bias;
};

struct report_ctx {
	struct dwarf_proc *p;
	struct htab *done; /* report_key -> nothing */
	int reported;
};

static int report_mapping(uint64_t start, uint64_t end, uint64_t off, uint32_t mod, void *arg)
{
	struct report_ctx *rc = arg;
	struct dwarf_ctx *c = rc->p->ctx;
	const struct module_info *mi = modules__info(c->mods, mod);
	struct report_key k = { .mod = mod };
	const struct elf_layout *l;
	Dwfl_Module *m;
	void **slot;
	bool created;

	if (!mi || mi->fd < 0 || !(l = layout_of(c, mod, mi->fd)) ||
	    !mapping_bias(l, start, end, off, &k.bias))
		return 0;
	/* a module with several executable mappings is reported once */
	if (!htab__upsert(rc->done, &k, &created))
		return -ENOMEM;
	if (!created)
		return 0;
	/* libdwfl takes the bias as the start less the first segment's aligned address */
	m = dwfl_report_module(rc->p->dwfl, mi->path, k.bias + l->lo, k.bias + l->hi);
	if (!m || !dwfl_module_info(m, &slot, NULL, NULL, NULL, NULL, NULL, NULL))
		return 0;
	*slot = (void *)(intptr_t)(mi->fd + 1);
	rc->reported++;
	return 0;
}

/* find_elf: the module's file through its descriptor (in its userdata, plus one). */
static int module_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		      char **file_name, Elf **elfp)
{
	int fd = (int)(intptr_t)*userdata - 1;

	if (fd < 0)
		return -1;
	*elfp = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	/* all in memory now: the descriptor stays the module table's */
	if (*elfp && elf_cntl(*elfp, ELF_C_FDREAD)) {
		elf_end(*elfp);
		*elfp = NULL;
	}
	return -1;
}

static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	return -1;
}

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	return 0;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	*thread_argp = arg;
	return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct dwarf_proc *p = arg;
	uint64_t v;

	if (!dwarf_input__read(p->in, addr, &v))
		return false;
	*result = v;
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct dwarf_proc *p = arg;
	Dwarf_Word regs[2] = { p->in->bp, p->in->sp }; /* DWARF 6 = rbp, 7 = rsp */

	if (!dwfl_thread_state_registers(thread, REG_BP, 2, regs))
		return false;
	dwfl_thread_state_register_pc(thread, p->in->ip);
	return true;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = module_elf,
	.find_debuginfo = no_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

struct dwarf_proc *dwarf_proc__new(struct dwarf_ctx *c, const struct addr_map *am, int pid)
{
	struct dwarf_proc *p = calloc(1, sizeof(*p));
	struct report_ctx rc = { .p = p };
	int err = ENOMEM;

	if (!p)
		return NULL;
	p->ctx = c;
	p->pid = pid;
	p->dwfl = dwfl_begin(&dwfl_callbacks);
	rc.done = htab__new(sizeof(struct report_key), 1);
	if (!p->dwfl || !rc.done)
		goto cleanup;
	dwfl_report_begin(p->dwfl);
	if (addr_map__for_each(am, report_mapping, &rc))
		goto cleanup;
	err = ENOENT;
	if (dwfl_report_end(p->dwfl, NULL, NULL) || !rc.reported)
		goto cleanup;
	if (!dwfl_attach_state(p->dwfl, NULL, pid, &thread_callbacks, p))
		goto cleanup;
	err = 0;
cleanup:
	htab__free(rc.done);
	if (err) {
		dwarf_proc__free(p);
		errno = err;
		return NULL;
	}
	return p;
}

void dwarf_proc__free(struct dwarf_proc *p)
{
	if (!p)
		return;
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p);
}

Dwfl *dwarf_proc__dwfl(const struct dwarf_proc *p)
{
	return p->dwfl;
}

struct collect {
	uint64_t *pcs;
	int n, max;
};

static int cb_frame(Dwfl_Frame *f, void *arg)
{
	struct collect *c = arg;
	Dwarf_Addr pc;

	if (c->n >= c->max || !dwfl_frame_pc(f, &pc, NULL) || pc == 0)
		return DWARF_CB_ABORT;
	c->pcs[c->n++] = pc;
	return DWARF_CB_OK;
}

int dwarf_proc__unwind(struct dwarf_proc *p, const struct dwarf_input *in, uint64_t *pcs, int max)
{
	struct collect c = { .pcs = pcs, .max = max };

	p->in = in;
	/* ends with an error at the first frame it cannot unwind: what came before stands */
	dwfl_getthread_frames(p->dwfl, p->pid, cb_frame, &c);
	p->in = NULL;
	if (c.n == 0 && max > 0 && in->ip)
		pcs[c.n++] = in->ip;
	return c.n;
}

bool dwarf_proc__knows(const struct dwarf_proc *p, uint64_t pc)
{
	return dwfl_addrmodule(p->dwfl, pc) != NULL;
}

int dwarf__fp_walk(const struct dwarf_input *in, uint64_t *pcs, int max)
{
	uint64_t fp = in->bp, ret, next;
	int n = 0;

	if (n < max && in->ip)
		pcs[n++] = in->ip;
	if (in->at_entry && n < max && dwarf_input__read(in, in->sp, &ret) && ret)
		pcs[n++] = ret;
	while (n < max && dwarf_input__read(in, fp, &next) && dwarf_input__read(in, fp + 8, &ret) &&
	       ret) {
		pcs[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}
