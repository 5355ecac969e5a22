// SPDX-License-Identifier: BSD-2-Clause
/*
 * dwarf.c - CFI unwinding of copied user stacks with libdwfl, and the
 * dependency analysis that makes its results cacheable.
 *
 * One Dwfl per process reports every module of the process's address map,
 * each opened through the module table's descriptor (a dup of it: libdwfl
 * closes what it is given), at the load bias worked out from the module's
 * program headers and the mapping. dwfl_attach_state() gives it callbacks
 * whose memory_read serves the stack copy of the record being unwound and
 * whose set_initial_registers gives rip, rsp and rbp. libdwfl follows the CFI
 * and falls back to the rbp chain where a pc has none.
 *
 * The analysis. libdwfl's result is a function of ip, sp, bp and of what its
 * reads of the copy return, and nothing else once the modules are fixed. But
 * most of what it reads does not matter: at every frame it restores each
 * callee-saved register from its save slot (rbx, r12, ... hold pointers and
 * counters that differ from call to call), while only the return addresses
 * and the registers that later CFA rules use (rsp, and rbp in code with frame
 * pointers) decide the frames. To know which reads matter, the analysis
 * replays libdwfl's algorithm (frame_unwind.c of elfutils 0.188: CFI from
 * .eh_frame then .debug_frame, each register rule evaluated in order, the
 * x86-64 frame-pointer fallback) on the same Dwarf_Frame rules, with each
 * value carrying the reads it was computed from. The reads that the pcs and
 * every branch taken (is the return address set, is it 0, does the fallback
 * go up) depend on, transitively through the addresses they read, are the
 * result's dependencies. Another record with the same ip, sp, those words at
 * those addresses (the same reads failing), and bp if it is among them, makes
 * libdwfl take the same steps on the same values: the same pcs. The replay
 * must produce the pcs libdwfl produced, or nothing is cached; expression
 * operations with data-dependent control flow (bra, skip) are not followed.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dwarf.h"
#include "util/htab.h"

#define NREGS 17 /* registers libdwfl keeps per x86-64 frame (rax..r15, rip) */
#define REG_BP 6
#define REG_SP 7
#define LAYOUT_SEGS 8
#define MAX_READS 4096
#define DV_DEPS 6
#define EVAL_STACK 64

enum { DEP_SP = 0, DEP_BP = 1, DEP_READ0 = 2 };

/* Where a module's PT_LOAD segments sit in its file and in its address space. */
struct elf_layout {
	uint8_t state; /* 0: not read, 1: read, 2: unusable */
	uint8_t nr;
	uint16_t e_type;
	struct {
		uint64_t off, vaddr, filesz;
	} seg[LAYOUT_SEGS];
};

/* A value of the replay, and the inputs it was computed from (DEP_*). */
struct dv {
	uint64_t v;
	bool set;
	uint8_t n;
	uint16_t dep[DV_DEPS];
};

/* A read of the replay; dep: what its address was computed from. */
struct mread {
	uint64_t addr, val;
	bool ok;
	uint8_t n;
	uint16_t dep[DV_DEPS];
};

/* A frame of the replay: libdwfl's Dwfl_Frame. */
struct mframe {
	struct dv r[NREGS];
	struct dv pc;
	bool initial, signal;
};

struct dwarf_ctx {
	struct modules *mods;
	struct elf_layout *layouts; /* index = module id */
	uint32_t nr_layouts;
	struct mread *reads;
	uint8_t *marks; /* MAX_READS + DEP_READ0 */
	struct dwarf_check *checks;
};

struct dwarf_proc {
	struct dwarf_ctx *ctx;
	Dwfl *dwfl;
	int pid;
	const struct dwarf_input *in; /* the record being unwound */
};

/* One replay. */
struct shadow {
	struct dwarf_proc *p;
	const struct dwarf_input *in;
	uint32_t nr_reads;
	bool unsupported;
};

struct dwarf_ctx *dwarf_ctx__new(struct modules *m)
{
	struct dwarf_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->mods = m;
	c->reads = malloc(MAX_READS * sizeof(*c->reads));
	c->marks = malloc(MAX_READS + DEP_READ0);
	c->checks = malloc(MAX_READS * sizeof(*c->checks));
	if (!c->reads || !c->marks || !c->checks) {
		dwarf_ctx__free(c);
		errno = ENOMEM;
		return NULL;
	}
	elf_version(EV_CURRENT);
	return c;
}

void dwarf_ctx__free(struct dwarf_ctx *c)
{
	if (!c)
		return;
	free(c->layouts);
	free(c->reads);
	free(c->marks);
	free(c->checks);
	free(c);
}

static bool copy_read(const struct dwarf_input *in, uint64_t addr, uint64_t *val)
{
	if (addr < in->sp || in->len < 8 || addr - in->sp > in->len - 8u)
		return false;
	memcpy(val, in->stack + (addr - in->sp), sizeof(*val));
	return true;
}

/* ---- libdwfl ---------------------------------------------------------------------------- */

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
			l->seg[l->nr].off = ph.p_offset;
			l->seg[l->nr].vaddr = ph.p_vaddr;
			l->seg[l->nr].filesz = ph.p_filesz;
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
 * Load bias of a module from one of its mappings: the segment holding file
 * offset off is mapped linearly, so start = bias + p_vaddr + (off - p_offset).
 */
static bool mapping_bias(const struct elf_layout *l, uint64_t start, uint64_t end, uint64_t off,
			 uint64_t *bias)
{
	if (l->e_type == ET_EXEC) {
		*bias = 0;
		return true;
	}
	for (int i = 0; i < l->nr; i++) {
		if (l->seg[i].off < off + (end - start) && l->seg[i].off + l->seg[i].filesz > off) {
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
	bool created;
	int fd;

	if (!mi || mi->fd < 0 || !(l = layout_of(c, mod, mi->fd)) ||
	    !mapping_bias(l, start, end, off, &k.bias))
		return 0;
	/* a module with several executable mappings is reported once: libdwfl
	 * drops a module reported again with another descriptor */
	if (!htab__upsert(rc->done, &k, &created))
		return -ENOMEM;
	if (!created)
		return 0;
	fd = dup(mi->fd);
	if (fd < 0)
		return 0;
	if (!dwfl_report_elf(rc->p->dwfl, mi->path, mi->path, fd, k.bias, true)) {
		close(fd);
		return 0;
	}
	rc->reported++;
	return 0;
}

static int no_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		  char **file_name, Elf **elfp)
{
	return -1;
}

static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file,
			GElf_Word debuglink_crc, char **debuginfo_file_name)
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

	if (!copy_read(p->in, addr, &v))
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
	.find_elf = no_elf,
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

int dwarf_proc__unwind(struct dwarf_proc *p, const struct dwarf_input *in, uint64_t *pcs,
		       int max)
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

int dwarf__fp_walk(const struct dwarf_input *in, uint64_t *pcs, int max)
{
	uint64_t fp = in->bp, ret, next;
	int n = 0;

	if (n < max && in->ip)
		pcs[n++] = in->ip;
	if (n < max && copy_read(in, in->sp, &ret) && ret)
		pcs[n++] = ret;
	while (n < max && copy_read(in, fp, &next) && copy_read(in, fp + 8, &ret) && ret) {
		pcs[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}

/* ---- the replay ------------------------------------------------------------------------- */

static void dv_merge(struct shadow *sh, struct dv *d, const struct dv *s)
{
	for (int i = 0; i < s->n; i++) {
		int j;

		for (j = 0; j < d->n && d->dep[j] != s->dep[i]; j++)
			;
		if (j < d->n)
			continue;
		if (d->n == DV_DEPS) {
			sh->unsupported = true;
			return;
		}
		d->dep[d->n++] = s->dep[i];
	}
}

static struct dv dv_const(uint64_t v)
{
	return (struct dv){ .v = v, .set = true };
}

/* The same value failed: unset, depending on what made it fail. */
static struct dv dv_fail(const struct dv *why)
{
	struct dv d = why ? *why : (struct dv){ 0 };

	d.set = false;
	d.v = 0;
	return d;
}

/* A read of the copy at the address in a (libdwfl's memory_read). */
static struct dv shadow_read(struct shadow *sh, const struct dv *a)
{
	struct mread *r;
	struct dv d = { 0 };

	if (sh->nr_reads == MAX_READS) {
		sh->unsupported = true;
		return d;
	}
	r = &sh->p->ctx->reads[sh->nr_reads];
	r->addr = a->v;
	r->n = a->n;
	memcpy(r->dep, a->dep, sizeof(r->dep));
	r->ok = copy_read(sh->in, a->v, &r->val);
	if (!r->ok)
		r->val = 0;
	d.v = r->val;
	d.set = r->ok;
	d.n = 1;
	d.dep[0] = DEP_READ0 + sh->nr_reads++;
	return d;
}

/* Marks what d depends on as deciding the result. */
static void shadow_root(struct shadow *sh, const struct dv *d)
{
	for (int i = 0; i < d->n; i++)
		sh->p->ctx->marks[d->dep[i]] = 1;
}

static bool binop(struct shadow *sh, uint8_t atom, struct dv *a, const struct dv *b)
{
	uint64_t x = a->v, y = b->v;

	dv_merge(sh, a, b);
	switch (atom) {
	case DW_OP_and: x &= y; break;
	case DW_OP_or: x |= y; break;
	case DW_OP_xor: x ^= y; break;
	case DW_OP_plus: x += y; break;
	case DW_OP_minus: x -= y; break;
	case DW_OP_mul: x *= y; break;
	case DW_OP_mod:
		if (!y)
			return false;
		x %= y;
		break;
	case DW_OP_div:
		if (!y)
			return false;
		if ((int64_t)x == INT64_MIN && (int64_t)y == -1)
			sh->unsupported = true;
		else
			x = (uint64_t)((int64_t)x / (int64_t)y);
		break;
	case DW_OP_shl:
	case DW_OP_shr:
	case DW_OP_shra:
		if (y >= 64) {
			sh->unsupported = true; /* undefined in C: libdwfl's result is unknown */
			break;
		}
		x = atom == DW_OP_shl ? x << y : atom == DW_OP_shr ? x >> y :
		    (uint64_t)((int64_t)x >> y);
		break;
	case DW_OP_le: x = (int64_t)x <= (int64_t)y; break;
	case DW_OP_ge: x = (int64_t)x >= (int64_t)y; break;
	case DW_OP_eq: x = (int64_t)x == (int64_t)y; break;
	case DW_OP_lt: x = (int64_t)x < (int64_t)y; break;
	case DW_OP_gt: x = (int64_t)x > (int64_t)y; break;
	case DW_OP_ne: x = (int64_t)x != (int64_t)y; break;
	}
	a->v = x;
	return true;
}

static int reg_of(const Dwarf_Op *op, int64_t *off)
{
	uint8_t a = op->atom;

	*off = 0;
	if (a >= DW_OP_reg0 && a <= DW_OP_reg31)
		return a - DW_OP_reg0;
	if (a == DW_OP_regx)
		return op->number < NREGS ? (int)op->number : -1;
	if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
		*off = (int64_t)op->number;
		return a - DW_OP_breg0;
	}
	*off = (int64_t)op->number2; /* DW_OP_bregx */
	return op->number < NREGS ? (int)op->number : -1;
}

/*
 * libdwfl's expr_eval(): the value of ops over the registers r of a frame.
 * cfa is NULL while evaluating the CFA rule itself.
 */
static struct dv shadow_eval(struct shadow *sh, const struct dv *r, const struct dv *cfa,
			     Dwarf_Addr bias, const Dwarf_Op *ops, size_t nops)
{
	struct dv st[EVAL_STACK], a, none = { 0 };
	size_t top = 0;
	bool loc = false;
	int64_t off;
	int reg;

	for (size_t i = 0; i < nops; i++) {
		const Dwarf_Op *op = &ops[i];
		uint8_t atom = op->atom;

		if (top >= EVAL_STACK - 1) {
			sh->unsupported = true;
			return none;
		}
		switch (atom) {
		case DW_OP_lit0 ... DW_OP_lit31:
			st[top++] = dv_const(atom - DW_OP_lit0);
			break;
		case DW_OP_addr:
			st[top++] = dv_const(op->number + bias);
			break;
		case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u: case DW_OP_const2s:
		case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u: case DW_OP_const8s:
		case DW_OP_constu: case DW_OP_consts:
			st[top++] = dv_const(op->number);
			break;
		case DW_OP_reg0 ... DW_OP_reg31:
		case DW_OP_regx:
		case DW_OP_breg0 ... DW_OP_breg31:
		case DW_OP_bregx:
			reg = reg_of(op, &off);
			if (reg < 0 || reg >= NREGS)
				return none;
			if (!r[reg].set)
				return dv_fail(&r[reg]);
			st[top] = r[reg];
			st[top++].v += off;
			break;
		case DW_OP_dup:
			if (top < 1)
				return none;
			st[top] = st[top - 1];
			top++;
			break;
		case DW_OP_drop:
			if (top < 1)
				return none;
			top--;
			break;
		case DW_OP_pick:
			if (top <= op->number)
				return none;
			st[top] = st[top - 1 - op->number];
			top++;
			break;
		case DW_OP_over:
			if (top < 2)
				return none;
			st[top] = st[top - 2];
			top++;
			break;
		case DW_OP_swap:
			if (top < 2)
				return none;
			a = st[top - 1];
			st[top - 1] = st[top - 2];
			st[top - 2] = a;
			break;
		case DW_OP_rot:
			if (top < 3)
				return none;
			a = st[top - 1];
			st[top - 1] = st[top - 2];
			st[top - 2] = st[top - 3];
			st[top - 3] = a;
			break;
		case DW_OP_deref:
		case DW_OP_deref_size:
			if (top < 1)
				return none;
			if (atom == DW_OP_deref_size && (!cfa || op->number > 8)) {
				/* libdwfl reads the class from a frame it has not got */
				sh->unsupported = !cfa;
				return none;
			}
			a = shadow_read(sh, &st[top - 1]);
			if (!a.set)
				return a;
			if (atom == DW_OP_deref_size && op->number < 8)
				a.v &= (1ULL << (op->number * 8)) - 1;
			st[top - 1] = a;
			break;
		case DW_OP_abs:
		case DW_OP_neg:
		case DW_OP_not:
			if (top < 1)
				return none;
			a = st[top - 1];
			if (atom == DW_OP_abs && (int64_t)a.v == INT64_MIN)
				sh->unsupported = true;
			else if (atom == DW_OP_abs)
				a.v = (int64_t)a.v < 0 ? -a.v : a.v;
			else
				a.v = atom == DW_OP_neg ? 0 - a.v : ~a.v;
			st[top - 1] = a;
			break;
		case DW_OP_plus_uconst:
			if (top < 1)
				return none;
			st[top - 1].v += op->number;
			break;
		case DW_OP_and: case DW_OP_div: case DW_OP_minus: case DW_OP_mod: case DW_OP_mul:
		case DW_OP_or: case DW_OP_plus: case DW_OP_shl: case DW_OP_shr: case DW_OP_shra:
		case DW_OP_xor: case DW_OP_le: case DW_OP_ge: case DW_OP_eq: case DW_OP_lt:
		case DW_OP_gt: case DW_OP_ne:
			if (top < 2)
				return none;
			top--;
			if (!binop(sh, atom, &st[top - 1], &st[top]))
				return dv_fail(&st[top - 1]);
			break;
		case DW_OP_nop:
			break;
		case DW_OP_call_frame_cfa:
			if (!cfa)
				return none;
			if (!cfa->set)
				return dv_fail(cfa);
			st[top++] = *cfa;
			loc = true;
			break;
		case DW_OP_stack_value:
			loc = false;
			break;
		case DW_OP_bra:
		case DW_OP_skip:
			sh->unsupported = true;
			return none;
		default:
			return none;
		}
	}
	if (top == 0)
		return none;
	return loc ? shadow_read(sh, &st[top - 1]) : st[top - 1];
}

/*
 * handle_cfi(): the caller's frame from the rules of cfi at pc. Returns false
 * if cfi has no rules for pc; else *more says whether next has a pc.
 */
static bool shadow_cfi(struct shadow *sh, const struct mframe *cur, struct mframe *next,
		       Dwarf_CFI *cfi, Dwarf_Addr pc, Dwarf_Addr bias, bool *more)
{
	bool undefined_pc = false, signal = false;
	Dwarf_Frame *frame;
	struct dv cfa = { 0 };
	Dwarf_Op *ops;
	size_t nops;
	int ra;

	if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0)
		return false;
	memset(next, 0, sizeof(*next));
	ra = dwarf_frame_info(frame, NULL, NULL, &signal);
	next->signal = signal;
	if (ra < 0 || ra >= NREGS) {
		sh->unsupported = true;
		free(frame);
		*more = false;
		return true;
	}
	if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops)
		cfa = shadow_eval(sh, cur->r, NULL, bias, ops, nops);
	for (int regno = 0; regno < NREGS; regno++) {
		Dwarf_Op mem[3];

		if (dwarf_frame_register(frame, regno, mem, &ops, &nops) != 0)
			continue;
		if (nops == 0 && ops == mem) /* undefined */
			undefined_pc |= regno == ra;
		else if (nops == 0 && !ops) /* same value */
			next->r[regno] = cur->r[regno];
		else if (nops)
			next->r[regno] = shadow_eval(sh, cur->r, &cfa, bias, ops, nops);
	}
	free(frame);
	next->pc = next->r[ra];
	if (undefined_pc) {
		*more = false;
		return true;
	}
	shadow_root(sh, &next->pc);
	*more = next->pc.set && next->pc.v != 0;
	return true;
}

/* x86_64_unwind(): the rbp chain, for pcs without CFI. Returns whether next has a pc. */
static bool shadow_fp(struct shadow *sh, const struct mframe *cur, struct mframe *next)
{
	const struct dv *fp = &cur->r[REG_BP], *sp = &cur->r[REG_SP];
	struct dv a, prev, ret;

	shadow_root(sh, fp);
	if (!fp->set || fp->v == 0)
		return false;
	prev = shadow_read(sh, fp);
	if (!prev.set)
		prev = (struct dv){ .v = 0, .set = true, .n = prev.n, .dep = { prev.dep[0] } };
	a = *fp;
	a.v += 8;
	ret = shadow_read(sh, &a);
	shadow_root(sh, &ret);
	if (!ret.set)
		return false;
	memset(next, 0, sizeof(*next));
	next->r[REG_BP] = prev;
	next->r[REG_SP] = *fp;
	next->r[REG_SP].v += 16;
	next->pc = ret;
	shadow_root(sh, sp);
	return (sp->set ? sp->v : 0) < fp->v + 16;
}

/* __libdwfl_frame_unwind(): returns whether next has a pc. */
static bool shadow_step(struct shadow *sh, const struct mframe *cur, struct mframe *next)
{
	Dwarf_Addr pc = cur->pc.v - (cur->initial || cur->signal ? 0 : 1), bias;
	Dwfl_Module *mod = dwfl_addrmodule(sh->p->dwfl, pc);
	Dwarf_CFI *cfi;
	bool more;

	if (mod) {
		cfi = dwfl_module_eh_cfi(mod, &bias);
		if (cfi && shadow_cfi(sh, cur, next, cfi, pc - bias, bias, &more))
			return more;
		cfi = dwfl_module_dwarf_cfi(mod, &bias);
		if (cfi && shadow_cfi(sh, cur, next, cfi, pc - bias, bias, &more))
			return more;
	}
	return shadow_fp(sh, cur, next);
}

int dwarf_proc__deps(struct dwarf_proc *p, const struct dwarf_input *in, const uint64_t *pcs,
		     int n, int max, struct dwarf_deps *out)
{
	struct dwarf_ctx *c = p->ctx;
	struct shadow sh = { .p = p, .in = in };
	struct mframe fr[2], *cur = &fr[0], *next = &fr[1], *t;
	int got = 0;

	memset(c->marks, 0, MAX_READS + DEP_READ0);
	memset(cur, 0, sizeof(*cur));
	cur->r[REG_BP] = (struct dv){ .v = in->bp, .set = true, .n = 1, .dep = { DEP_BP } };
	cur->r[REG_SP] = (struct dv){ .v = in->sp, .set = true, .n = 1, .dep = { DEP_SP } };
	cur->pc = dv_const(in->ip);
	cur->initial = true;
	for (;;) {
		shadow_root(&sh, &cur->pc);
		if (got >= max || cur->pc.v == 0)
			break;
		if (got >= n || pcs[got] != cur->pc.v)
			return -EAGAIN;
		got++;
		if (!shadow_step(&sh, cur, next) || sh.unsupported)
			break;
		t = cur;
		cur = next;
		next = t;
	}
	if (sh.unsupported || got != n)
		return -EAGAIN;
	/* a read's address was computed from earlier reads only: one pass backwards */
	for (uint32_t i = sh.nr_reads; i-- > 0;) {
		if (!c->marks[DEP_READ0 + i])
			continue;
		for (int j = 0; j < c->reads[i].n; j++)
			c->marks[c->reads[i].dep[j]] = 1;
	}
	out->nr_checks = 0;
	for (uint32_t i = 0; i < sh.nr_reads; i++) {
		if (c->marks[DEP_READ0 + i])
			c->checks[out->nr_checks++] = (struct dwarf_check){
				.addr = c->reads[i].addr, .val = c->reads[i].val, .ok = c->reads[i].ok
			};
	}
	out->checks = c->checks;
	out->bp = c->marks[DEP_BP];
	return 0;
}
