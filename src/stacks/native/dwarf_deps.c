// SPDX-License-Identifier: BSD-2-Clause
/*
 * dwarf_deps.c - which stack words an unwinding result depends on.
 *
 * libdwfl's result is a function of ip, sp, bp and of what its reads of the
 * copy return, and nothing else once the modules are fixed. But most of what
 * it reads does not matter: at every frame it restores each callee-saved
 * register from its save slot (rbx, r12, ... hold pointers and counters that
 * differ from call to call), while only the return addresses and the
 * registers that later CFA rules use (rsp, and rbp where code keeps frame
 * pointers) decide the frames. To know which reads matter, this module
 * replays libdwfl's algorithm (libdwfl/frame_unwind.c of elfutils 0.188:
 * .eh_frame then .debug_frame rules, each register's rule evaluated in order,
 * the x86-64 frame-pointer fallback, the pc of 0 that ends a stack) on the
 * same Dwarf_Frame rules, with each value carrying the inputs it was computed
 * from: initial sp, initial bp, or reads. Every branch the unwinding takes
 * (is the return address set, is it 0, does the rbp chain go up) and every pc
 * makes its inputs count, and so do the inputs of the addresses those reads
 * were made at, transitively. Another record with the same ip and sp whose
 * counted reads give the same words at the same addresses (and fail where
 * they failed), and the same bp if bp counts, leads libdwfl through the same
 * steps on the same values: to the same pcs.
 *
 * The replay must produce the pcs libdwfl produced, or nothing is cached.
 * Expressions with data-dependent jumps (DW_OP_bra, DW_OP_skip) and C
 * undefined behaviour in libdwfl's arithmetic are not followed either.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "dwarf_deps.h"

#define NREGS 17 /* registers libdwfl keeps per x86-64 frame: rax..r15, rip */
#define REG_BP 6
#define REG_SP 7
#define MAX_READS 4096
#define DV_DEPS 6
#define EVAL_STACK 64

enum { DEP_SP = 0, DEP_BP = 1, DEP_READ0 = 2 }; /* DEP_READ0 + i: read i */

/* A value of the replay and the inputs it was computed from; !set: libdwfl has none. */
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

/* libdwfl's Dwfl_Frame. */
struct mframe {
	struct dv r[NREGS];
	struct dv pc;
	bool initial, signal;
};

struct dwarf_replay {
	struct mread reads[MAX_READS];
	uint8_t marks[DEP_READ0 + MAX_READS]; /* counts for the result */
	struct dwarf_check checks[MAX_READS];
};

/* One analysis. */
struct shadow {
	struct dwarf_replay *r;
	Dwfl *dwfl;
	const struct dwarf_input *in;
	uint32_t nr_reads;
	bool unsupported;
};

struct dwarf_replay *dwarf_replay__new(void)
{
	return malloc(sizeof(struct dwarf_replay));
}

void dwarf_replay__free(struct dwarf_replay *r)
{
	free(r);
}

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

/* No value, for the reasons why depends on. */
static struct dv dv_fail(const struct dv *why)
{
	struct dv d = *why;

	d.set = false;
	d.v = 0;
	return d;
}

/* libdwfl's memory_read of the word at the address in a. */
static struct dv shadow_read(struct shadow *sh, const struct dv *a)
{
	struct dv d = { 0 };
	struct mread *m;

	if (sh->nr_reads == MAX_READS) {
		sh->unsupported = true;
		return d;
	}
	m = &sh->r->reads[sh->nr_reads];
	m->addr = a->v;
	m->n = a->n;
	memcpy(m->dep, a->dep, sizeof(m->dep));
	m->ok = dwarf_input__read(sh->in, a->v, &m->val);
	if (!m->ok)
		m->val = 0;
	d.v = m->val;
	d.set = m->ok;
	d.n = 1;
	d.dep[0] = DEP_READ0 + sh->nr_reads++;
	return d;
}

/* What d depends on decides the result. */
static void shadow_root(struct shadow *sh, const struct dv *d)
{
	for (int i = 0; i < d->n; i++)
		sh->r->marks[d->dep[i]] = 1;
}

/* DW_OP_reg*, DW_OP_breg*: a register of the frame, plus an offset. */
static bool eval_reg(const Dwarf_Op *op, const struct dv *r, struct dv *st, size_t *top,
		     struct dv *fail)
{
	uint8_t a = op->atom;
	uint64_t reg, off = 0;

	if (a == DW_OP_regx || a == DW_OP_bregx)
		reg = op->number;
	else if (a >= DW_OP_breg0)
		reg = a - DW_OP_breg0;
	else
		reg = a - DW_OP_reg0;
	if (a == DW_OP_bregx)
		off = op->number2;
	else if (a >= DW_OP_breg0 && a <= DW_OP_breg31)
		off = op->number;
	if (reg >= NREGS)
		return false;
	if (!r[reg].set) {
		*fail = dv_fail(&r[reg]);
		return false;
	}
	st[*top] = r[reg];
	st[(*top)++].v += off;
	return true;
}

/* DW_OP_dup, drop, pick, over, swap, rot. */
static bool eval_stack_op(const Dwarf_Op *op, struct dv *st, size_t *top)
{
	size_t t = *top;
	struct dv a;

	switch (op->atom) {
	case DW_OP_dup:
	case DW_OP_over:
	case DW_OP_pick: {
		uint64_t k = op->atom == DW_OP_dup ? 0 : op->atom == DW_OP_over ? 1 : op->number;

		if (t <= k)
			return false;
		st[t] = st[t - 1 - k];
		*top = t + 1;
		return true;
	}
	case DW_OP_drop:
		if (t < 1)
			return false;
		*top = t - 1;
		return true;
	case DW_OP_swap:
		if (t < 2)
			return false;
		a = st[t - 1];
		st[t - 1] = st[t - 2];
		st[t - 2] = a;
		return true;
	default: /* DW_OP_rot */
		if (t < 3)
			return false;
		a = st[t - 1];
		st[t - 1] = st[t - 2];
		st[t - 2] = st[t - 3];
		st[t - 3] = a;
		return true;
	}
}

/* Binary operations, as libdwfl computes them. Returns false where libdwfl fails. */
static bool binop(struct shadow *sh, uint8_t atom, struct dv *a, const struct dv *b)
{
	uint64_t x = a->v, y = b->v;
	int64_t sx = (int64_t)x, sy = (int64_t)y;

	dv_merge(sh, a, b);
	if ((atom == DW_OP_div || atom == DW_OP_mod) && !y)
		return false;
	if ((atom == DW_OP_div && sx == INT64_MIN && sy == -1) ||
	    ((atom == DW_OP_shl || atom == DW_OP_shr || atom == DW_OP_shra) && y >= 64))
		sh->unsupported = true; /* undefined in C: libdwfl's result is unknown */
	else if (atom == DW_OP_div)
		x = (uint64_t)(sx / sy);
	else if (atom == DW_OP_shl)
		x <<= y;
	else if (atom == DW_OP_shr)
		x >>= y;
	else if (atom == DW_OP_shra)
		x = (uint64_t)(sx >> y);
	/* the operations as DWARF lists them, several a line */
	/* clang-format off */
	switch (atom) {
	case DW_OP_and: x &= y; break;
	case DW_OP_or: x |= y; break;
	case DW_OP_xor: x ^= y; break;
	case DW_OP_plus: x += y; break;
	case DW_OP_minus: x -= y; break;
	case DW_OP_mul: x *= y; break;
	case DW_OP_mod: x %= y; break;
	case DW_OP_le: x = sx <= sy; break;
	case DW_OP_ge: x = sx >= sy; break;
	case DW_OP_eq: x = sx == sy; break;
	case DW_OP_lt: x = sx < sy; break;
	case DW_OP_gt: x = sx > sy; break;
	case DW_OP_ne: x = sx != sy; break;
	}
	/* clang-format on */
	a->v = x;
	return true;
}

/* Unary and binary arithmetic on the top of the stack. */
static bool eval_arith(struct shadow *sh, const Dwarf_Op *op, struct dv *st, size_t *top,
		       struct dv *fail)
{
	uint8_t atom = op->atom;
	struct dv *a;

	if (atom == DW_OP_abs || atom == DW_OP_neg || atom == DW_OP_not ||
	    atom == DW_OP_plus_uconst) {
		if (*top < 1)
			return false;
		a = &st[*top - 1];
		if (atom == DW_OP_abs && (int64_t)a->v == INT64_MIN)
			sh->unsupported = true;
		else if (atom == DW_OP_abs && (int64_t)a->v < 0)
			a->v = 0 - a->v;
		else if (atom == DW_OP_neg)
			a->v = 0 - a->v;
		else if (atom == DW_OP_not)
			a->v = ~a->v;
		else if (atom == DW_OP_plus_uconst)
			a->v += op->number;
		return true;
	}
	if (*top < 2)
		return false;
	(*top)--;
	a = &st[*top - 1];
	if (binop(sh, atom, a, &st[*top]))
		return true;
	*fail = dv_fail(a);
	return false;
}

/* DW_OP_deref, DW_OP_deref_size. cfa is NULL in the CFA rule itself. */
static bool eval_deref(struct shadow *sh, const Dwarf_Op *op, const struct dv *cfa, struct dv *st,
		       size_t *top, struct dv *fail)
{
	struct dv a;

	if (*top < 1)
		return false;
	if (op->atom == DW_OP_deref_size && (!cfa || op->number > 8)) {
		/* in a CFA rule, libdwfl reads the ELF class from a frame it has not got */
		sh->unsupported |= !cfa;
		return false;
	}
	a = shadow_read(sh, &st[*top - 1]);
	if (!a.set) {
		*fail = a;
		return false;
	}
	if (op->atom == DW_OP_deref_size && op->number < 8)
		a.v &= (1ULL << (op->number * 8)) - 1;
	st[*top - 1] = a;
	return true;
}

struct eval {
	const struct dv *r;   /* the frame's registers */
	const struct dv *cfa; /* NULL while evaluating the CFA rule */
	Dwarf_Addr bias;
	struct dv st[EVAL_STACK];
	size_t top;
	bool loc; /* the result is an address to read */
};

/* One operation of libdwfl's expr_eval(). false: the expression fails, for *fail's inputs. */
static bool eval_op(struct shadow *sh, struct eval *e, const Dwarf_Op *op, struct dv *fail)
{
	uint8_t atom = op->atom;

	/* the operations as DWARF lists them, several a line */
	/* clang-format off */
	switch (atom) {
	case DW_OP_lit0 ... DW_OP_lit31:
		e->st[e->top++] = dv_const(atom - DW_OP_lit0);
		return true;
	case DW_OP_addr:
		e->st[e->top++] = dv_const(op->number + e->bias);
		return true;
	case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u: case DW_OP_const2s:
	case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u: case DW_OP_const8s:
	case DW_OP_constu: case DW_OP_consts:
		e->st[e->top++] = dv_const(op->number);
		return true;
	case DW_OP_reg0 ... DW_OP_reg31: case DW_OP_regx:
	case DW_OP_breg0 ... DW_OP_breg31: case DW_OP_bregx:
		return eval_reg(op, e->r, e->st, &e->top, fail);
	case DW_OP_dup: case DW_OP_drop: case DW_OP_pick: case DW_OP_over: case DW_OP_swap:
	case DW_OP_rot:
		return eval_stack_op(op, e->st, &e->top);
	case DW_OP_deref: case DW_OP_deref_size:
		return eval_deref(sh, op, e->cfa, e->st, &e->top, fail);
	case DW_OP_abs: case DW_OP_neg: case DW_OP_not: case DW_OP_plus_uconst:
	case DW_OP_and: case DW_OP_div: case DW_OP_minus: case DW_OP_mod: case DW_OP_mul:
	case DW_OP_or: case DW_OP_plus: case DW_OP_shl: case DW_OP_shr: case DW_OP_shra:
	case DW_OP_xor: case DW_OP_le: case DW_OP_ge: case DW_OP_eq: case DW_OP_lt:
	case DW_OP_gt: case DW_OP_ne:
		return eval_arith(sh, op, e->st, &e->top, fail);
	case DW_OP_nop:
		return true;
	case DW_OP_call_frame_cfa:
		if (!e->cfa)
			return false;
		if (!e->cfa->set) {
			*fail = dv_fail(e->cfa);
			return false;
		}
		e->st[e->top++] = *e->cfa;
		e->loc = true;
		return true;
	case DW_OP_stack_value:
		e->loc = false;
		return true;
	case DW_OP_bra:
	case DW_OP_skip:
		sh->unsupported = true;
		return false;
	default:
		return false;
	}
	/* clang-format on */
}

/* libdwfl's expr_eval(): the value of ops over the registers r of a frame. */
static struct dv shadow_eval(struct shadow *sh, const struct dv *r, const struct dv *cfa,
			     Dwarf_Addr bias, const Dwarf_Op *ops, size_t nops)
{
	struct eval e = { .r = r, .cfa = cfa, .bias = bias };
	struct dv res = { 0 };

	for (size_t i = 0; i < nops; i++) {
		if (e.top >= EVAL_STACK - 1) {
			sh->unsupported = true;
			return res;
		}
		if (!eval_op(sh, &e, &ops[i], &res))
			return res;
	}
	if (e.top)
		res = e.loc ? shadow_read(sh, &e.st[e.top - 1]) : e.st[e.top - 1];
	return res;
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
	*more = false;
	if (ra < 0 || ra >= NREGS) {
		sh->unsupported = true;
		free(frame);
		return true;
	}
	/* libdwfl evaluates it at each DW_OP_call_frame_cfa: the same reads, the same value */
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
	if (undefined_pc)
		return true;
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
	prev.set = true; /* 0 if unreadable */
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
	Dwfl_Module *mod = dwfl_addrmodule(sh->dwfl, pc);
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

/* The counted reads, with the reads their addresses came from (earlier ones: one pass). */
static void collect_checks(struct shadow *sh, struct dwarf_deps *out)
{
	struct dwarf_replay *r = sh->r;

	for (uint32_t i = sh->nr_reads; i-- > 0;) {
		if (!r->marks[DEP_READ0 + i])
			continue;
		for (int j = 0; j < r->reads[i].n; j++)
			r->marks[r->reads[i].dep[j]] = 1;
	}
	out->nr_checks = 0;
	for (uint32_t i = 0; i < sh->nr_reads; i++) {
		const struct mread *m = &r->reads[i];

		if (r->marks[DEP_READ0 + i])
			r->checks[out->nr_checks++] =
				(struct dwarf_check){ .addr = m->addr, .val = m->val, .ok = m->ok };
	}
	out->checks = r->checks;
	out->bp = r->marks[DEP_BP];
}

int dwarf_replay__deps(struct dwarf_replay *r, Dwfl *dwfl, const struct dwarf_input *in,
		       const uint64_t *pcs, int n, int max, struct dwarf_deps *out)
{
	struct shadow sh = { .r = r, .dwfl = dwfl, .in = in };
	struct mframe fr[2], *cur = &fr[0], *next = &fr[1], *t;
	int got = 0;

	memset(r->marks, 0, sizeof(r->marks));
	memset(cur, 0, sizeof(*cur));
	cur->r[REG_BP] = (struct dv){ .v = in->bp, .set = true, .n = 1, .dep = { DEP_BP } };
	cur->r[REG_SP] = (struct dv){ .v = in->sp, .set = true, .n = 1, .dep = { DEP_SP } };
	cur->pc = dv_const(in->ip);
	cur->initial = true;
	/* dwarf.c's frame callback, then the unwinding of the frame */
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
	collect_checks(&sh, out);
	return 0;
}
