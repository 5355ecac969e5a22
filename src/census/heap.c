// SPDX-License-Identifier: BSD-2-Clause
/*
 * heap.c - the census's walk of a CPython heap: the collector's generation
 * lists (every GC-tracked object: tensors, modules), then a breadth-first
 * walk from the modules' globals and the threads' frame locals that reaches,
 * for every tensor, the nodes that keep it alive (pytypes.c reads the
 * objects' types, holders.c names the paths and groups the tensors).
 *
 * Layouts (CPython's headers, x86-64 release builds, 3.11.7, 3.12.1, 3.13.0):
 * PyGC_Head (16 bytes) sits right before the object; _gc_runtime_state keeps
 * generations[3] (24 bytes each) and, right after them, generation0 (a
 * pointer to generations[0]) and permanent_generation: the walk finds the
 * state by that self-pointer rather than by an offset into the interpreter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "census_int.h"
#include "util/clock.h"

#define INTERP_SCAN 16384	 /* bytes of PyInterpreterState searched for the GC state */
#define MAX_CONTAINER (1u << 24) /* items of one list, tuple or dict read */
#define MAX_THREADS 1024
#define MAX_FRAMES 1024
#define MAX_LOCALS 4096
#define CHUNK 256 /* items read at once */

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static uint32_t add_label(struct census_walk *w, const char *s)
{
	size_t len = strlen(s) + 1;
	uint32_t off;

	if (w->labels_len + len > UINT32_MAX ||
	    !grow((void **)&w->labels, &w->labels_cap, w->labels_len + len, 1))
		return 0; /* offset 0 holds "" */
	off = w->labels_len;
	memcpy(w->labels + off, s, len);
	w->labels_len += len;
	return off;
}

/*
 * The label of a dict entry: ".name" in a __dict__, "['key']" or "[3]" in a dict, and
 * for a key of another type "[<TYPE @0xADDR>]", which the paths name by the key's own
 * path where the census reached it (holders.c).
 */
static void key_label(struct census_walk *w, uint64_t key, bool attrs, char *buf, size_t len)
{
	const struct census_type *t = census__obj_type(w, key);
	char s[128];
	long long v;

	if (t && t->kind == K_STR && !census__read_str(w, key, s, sizeof(s))) {
		if (attrs)
			snprintf(buf, len, ".%s", s);
		else
			snprintf(buf, len, "['%s']", s);
	} else if (t && t->kind == K_INT && !census__read_int(w, key, &v)) {
		snprintf(buf, len, "[%lld]", v);
	} else if (t) {
		snprintf(buf, len, "[<%s @0x%llx>]", t->name, (unsigned long long)key);
	} else {
		snprintf(buf, len, "[<unreadable key>]");
	}
}

static void add_tensor_obj(struct census_walk *w, uint64_t obj, uint32_t node)
{
	uint32_t *idx;
	bool created;

	idx = htab__upsert(w->tensor_of, &obj, &created);
	if (!idx)
		return;
	if (!created) {
		if (node != NO_NODE && w->tensor_node[*idx] == NO_NODE)
			w->tensor_node[*idx] = node;
		return;
	}
	if (!grow((void **)&w->tensor_objs, &w->cap_tensor_objs, w->nr_tensor_objs + 1, 8) ||
	    !grow((void **)&w->tensor_node, &w->cap_tensor_node, w->nr_tensor_objs + 1, 4) ||
	    !grow((void **)&w->tensor_extras, &w->cap_tensor_extras, w->nr_tensor_objs + 1, 1)) {
		htab__delete(w->tensor_of, &obj);
		return;
	}
	*idx = w->nr_tensor_objs;
	w->tensor_objs[w->nr_tensor_objs] = obj;
	w->tensor_extras[w->nr_tensor_objs] = 0;
	w->tensor_node[w->nr_tensor_objs++] = node;
}

/* A reference to a container of a type the walk does not enter, counted by its type. */
static void not_entered(const struct census_type *t)
{
	if (t->flags & TPF_HAVE_GC) /* else it holds no references: nothing is missed */
		((struct census_type *)t)->not_entered++;
}

/* The types most referenced without being entered, into the census. */
static void list_not_entered(struct census_walk *w)
{
	struct census *c = w->out;
	const struct census_type *t;
	size_t it = 0;

	while ((t = htab__next(w->types, &it, NULL))) {
		struct census_not_entered *e = c->not_entered;
		int n = c->nr_not_entered, at = n;

		if (!t->not_entered)
			continue;
		while (at > 0 && e[at - 1].refs < t->not_entered)
			at--;
		if (at == CENSUS_MAX_NOT_ENTERED) {
			c->not_entered_other += t->not_entered;
			continue;
		}
		if (n == CENSUS_MAX_NOT_ENTERED)
			c->not_entered_other += e[--n].refs;
		memmove(&e[at + 1], &e[at], (n - at) * sizeof(*e));
		snprintf(e[at].type, sizeof(e[at].type), "%s", t->name);
		e[at].refs = t->not_entered;
		c->nr_not_entered = n + 1;
	}
}

/* Adds obj as a node reached from parent (NO_NODE: a root) by label. */
static void reach(struct census_walk *w, uint64_t obj, uint32_t parent, const char *label,
		  bool attrs)
{
	const struct census_type *t;
	struct census_node *n;
	uint32_t *idx;
	bool created;

	if (!obj || (obj & 7) || w->out->truncated_by)
		return;
	idx = htab__lookup(w->seen, &obj);
	if (idx) {
		/* another holder of a tensor: keep a few */
		uint32_t *ti = w->nodes[*idx].kind == K_TENSOR ? htab__lookup(w->tensor_of, &obj) :
								 NULL;

		if (!ti || w->tensor_extras[*ti] + 1 >= CENSUS_MAX_HOLDERS ||
		    !grow((void **)&w->extras, &w->cap_extras, w->nr_extras + 1,
			  sizeof(*w->extras)))
			return;
		w->tensor_extras[*ti]++;
		w->extras[w->nr_extras++] = (struct census_extra){ .tensor = *ti,
								   .parent = parent,
								   .label = add_label(w, label) };
		return;
	}
	t = census__obj_type(w, obj);
	if (!t)
		return;
	if (t->kind == K_OTHER && !t->inst_dict) {
		not_entered(t);
		return;
	}
	if (t->kind == K_STR || t->kind == K_INT)
		return;
	if (w->out->objects_visited >= w->caps->max_objects) {
		w->out->truncated_by = "objects";
		return;
	}
	if (!grow((void **)&w->nodes, &w->cap_nodes, w->nr_nodes + 1, sizeof(*w->nodes)))
		return;
	idx = htab__upsert(w->seen, &obj, &created);
	if (!idx)
		return;
	*idx = w->nr_nodes;
	n = &w->nodes[w->nr_nodes++];
	*n = (struct census_node){ .addr = obj,
				   .parent = parent,
				   .label = add_label(w, label),
				   .kind = t->kind,
				   .attrs = attrs };
	w->out->objects_visited++;
	if (t->kind == K_TENSOR)
		add_tensor_obj(w, obj, w->nr_nodes - 1);
}

typedef void (*entry_fn)(struct census_walk *w, uint64_t key, uint64_t value, uint32_t parent,
			 bool attrs);

static void reach_entry(struct census_walk *w, uint64_t key, uint64_t value, uint32_t parent,
			bool attrs)
{
	char label[160];
	const struct census_type *t;

	if (!value || (value & 7))
		return;
	/* a label costs reads: only for what will be kept */
	t = htab__lookup(w->seen, &value) ? NULL : census__obj_type(w, value);
	if (t && t->kind == K_OTHER && !t->inst_dict)
		not_entered(t);
	if (!htab__lookup(w->seen, &value) &&
	    (!t || t->kind == K_STR || t->kind == K_INT || (t->kind == K_OTHER && !t->inst_dict)))
		return;
	key_label(w, key, attrs, label, sizeof(label));
	reach(w, value, parent, label, false);
}

/*
 * The entries of the dict keys object at keys (values from the split values
 * array vals when nonzero), each handed to fn.
 */
static void keys_each(struct census_walk *w, uint64_t keys, uint64_t vals, entry_fn fn,
		      uint32_t parent, bool attrs)
{
	uint8_t hdr[32], buf[CHUNK * 24];
	uint64_t vbuf[CHUNK];
	unsigned int log2, log2_index;
	uint64_t nentries, entries;
	size_t esz;

	if (census__rd(w, keys, hdr, sizeof(hdr)))
		return;
	log2 = hdr[8];
	log2_index = hdr[9];
	nentries = w64(hdr, 24);
	if (log2 > 30 || log2_index > 34 || nentries > (1ULL << log2) || nentries > MAX_CONTAINER)
		return;
	esz = hdr[10] == 0 ? 24 : 16; /* DICT_KEYS_GENERAL: hash, key, value */
	entries = keys + 32 + (1ULL << log2_index);
	for (uint64_t i = 0; i < nentries; i += CHUNK) {
		size_t n = nentries - i < CHUNK ? nentries - i : CHUNK;

		if (census__rd(w, entries + i * esz, buf, n * esz))
			return;
		if (vals && census__rd(w, vals + 8 * i, vbuf, n * 8))
			return;
		for (size_t j = 0; j < n; j++) {
			const uint8_t *e = buf + j * esz + (esz == 24 ? 8 : 0);
			uint64_t key = w64(e, 0), value = vals ? vbuf[j] : w64(e, 8);

			if (key && value)
				fn(w, key, value, parent, attrs);
		}
	}
}

static void dict_each(struct census_walk *w, uint64_t dict, entry_fn fn, uint32_t parent,
		      bool attrs)
{
	uint8_t b[48];
	uint64_t vals;

	if (census__rd(w, dict, b, sizeof(b)))
		return;
	vals = w64(b, 40);
	if (vals && w->py->minor >= 13)
		vals += 8; /* PyDictValues: capacity, size, embedded, valid, then values */
	keys_each(w, w64(b, 32), vals, fn, parent, attrs);
}

static void seq_each(struct census_walk *w, uint64_t items, uint64_t n, uint32_t parent)
{
	uint64_t buf[CHUNK];
	char label[32];

	if (n > MAX_CONTAINER)
		return;
	for (uint64_t i = 0; i < n; i += CHUNK) {
		size_t k = n - i < CHUNK ? n - i : CHUNK;

		if (census__rd(w, items + 8 * i, buf, 8 * k))
			return;
		for (size_t j = 0; j < k; j++) {
			snprintf(label, sizeof(label), "[%llu]", (unsigned long long)(i + j));
			reach(w, buf[j], parent, label, false);
		}
	}
}

/* An instance's attributes: its __dict__, or (3.11+) the values its type's shared keys name. */
static void instance_each(struct census_walk *w, uint64_t obj, const struct census_type *t,
			  uint32_t parent)
{
	uint64_t dict = 0, vals = 0;

	if (t->flags & TPF_MANAGED_DICT) {
		census__rd64(w, obj - 24, &dict);
		if (w->py->minor == 11) {
			if (!dict)
				census__rd64(w, obj - 32, &vals);
		} else if (w->py->minor == 12 && (dict & 1)) {
			vals = dict + 1; /* PyDictOrValues: the values pointer less 1 */
			dict = 0;
		} else if (w->py->minor >= 13 && !dict && (t->flags & TPF_INLINE_VALUES)) {
			uint8_t valid = 0;

			/* inline PyDictValues after the object; its 4th byte says valid */
			if (!census__rd(w, obj + t->basicsize + 3, &valid, 1) && valid)
				vals = obj + t->basicsize + 8;
		}
	} else if (t->dictoffset > 0) {
		census__rd64(w, obj + t->dictoffset, &dict);
	}
	if (dict)
		reach(w, dict, parent, "", true);
	else if (vals && t->cached_keys)
		keys_each(w, t->cached_keys, vals, reach_entry, parent, true);
}

/* Reaches what node i holds. */
static void expand(struct census_walk *w, uint32_t i)
{
	struct census_node n = w->nodes[i];
	const struct census_type *tp = census__obj_type(w, n.addr);
	struct census_type type, *t = &type;
	uint64_t v, size;

	if (!tp)
		return;
	type = *tp; /* the cache moves when it grows */
	switch (n.kind) {
	case K_DICT: dict_each(w, n.addr, reach_entry, i, n.attrs); break;
	case K_LIST:
		if (!census__rd64(w, n.addr + 16, &size) && !census__rd64(w, n.addr + 24, &v))
			seq_each(w, v, size, i);
		break;
	case K_TUPLE:
		if (!census__rd64(w, n.addr + 16, &size))
			seq_each(w, n.addr + 24, size, i);
		break;
	case K_MODULE:
		if (!census__rd64(w, n.addr + 16, &v)) /* md_dict */
			reach(w, v, i, "", true);
		break;
	case K_CELL:
		if (!census__rd64(w, n.addr + 16, &v))
			reach(w, v, i, ".cell_contents", false);
		break;
	case K_FUNC:
		if (!census__rd64(w, n.addr + 72, &v)) /* func_closure */
			reach(w, v, i, ".__closure__", false);
		break;
	case K_TYPE:
		if (!census__rd64(w, n.addr + TP_FLAGS, &v) && (v & TPF_HEAPTYPE) &&
		    !census__rd64(w, n.addr + TP_DICT, &v))
			reach(w, v, i, "", true);
		break;
	default: break;
	}
	if (t->inst_dict && n.kind != K_TENSOR && n.kind != K_TYPE && n.kind != K_MODULE)
		instance_each(w, n.addr, t, i);
}

/*
 * A candidate GC state is the one if the heads of its three generations and of
 * the permanent generation each begin a list whose first entry points back.
 */
static bool gc_heads_ok(struct census_walk *w, uint64_t gen0)
{
	const uint64_t heads[] = { gen0, gen0 + 24, gen0 + 48, gen0 + 80 };

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		uint64_t next, back;

		if (census__rd64(w, heads[i], &next) || !next || (next & 6) ||
		    census__rd64(w, (next & ~1ULL) + 8, &back) || (back & ~3ULL) != heads[i])
			return false;
	}
	return true;
}

/* Finds the GC state by its generation0 pointer; returns the first generation's head. */
static int find_gc(struct census_walk *w, uint64_t *gen0)
{
	uint8_t *b = malloc(INTERP_SCAN);
	uint64_t interp = w->py->interp;
	int err = -ENOTSUP;

	if (!b)
		return -ENOMEM;
	if (census__rd(w, interp, b, INTERP_SCAN)) {
		err = -EFAULT;
		goto cleanup;
	}
	for (size_t o = 72; o + 8 <= INTERP_SCAN && err; o += 8) {
		if (w64(b, o) == interp + o - 72 && gc_heads_ok(w, interp + o - 72)) {
			*gen0 = interp + o - 72;
			err = 0;
		}
	}
cleanup:
	free(b);
	return err;
}

static void add_module(struct census_walk *w, uint64_t obj)
{
	if (grow((void **)&w->modules, &w->cap_modules, w->nr_modules + 1, 8))
		w->modules[w->nr_modules++] = obj;
}

/* Walks one generation's circular list from its head. */
static void walk_list(struct census_walk *w, uint64_t head)
{
	struct census *c = w->out;
	uint64_t node, prev = head, g[4];
	int err;

	if (census__rd64(w, head, &node))
		return;
	node &= ~1ULL; /* NEXT_MASK_UNREACHABLE, set only during a collection */
	while (node != head) {
		const struct census_type *t;

		if (c->objects_visited >= w->caps->max_objects) {
			c->truncated_by = "objects";
			return;
		}
		if (!node || (node & 7)) {
			c->torn = true;
			return;
		}
		err = census__rd(w, node, g, sizeof(g));
		if (err) {
			c->torn |= err != -E2BIG; /* a cap is no tear */
			return;
		}
		if ((g[1] & ~3ULL) != prev)
			c->torn = true; /* _gc_prev (its low bits are flags) does not point back */
		c->gc_objects++;
		c->objects_visited++;
		t = g[3] && !(g[3] & 7) ? census__type_of(w, g[3]) : NULL;
		if (t && t->kind == K_TENSOR)
			add_tensor_obj(w, node + 16, NO_NODE);
		else if (t && t->kind == K_MODULE)
			add_module(w, node + 16);
		prev = node;
		node = g[0] & ~1ULL;
	}
}

static int module_name(struct census_walk *w, uint64_t mod, char *buf, size_t len)
{
	uint8_t b[48];
	uint8_t e[CHUNK * 16];
	uint8_t hdr[32];
	uint64_t dict, keys, n, entries;

	/* md_dict, then its "__name__" among its first entries (a module's dict is unicode-keyed) */
	if (census__rd64(w, mod + 16, &dict) || census__rd(w, dict, b, sizeof(b)))
		return -EFAULT;
	keys = w64(b, 32);
	if (w64(b, 40) || census__rd(w, keys, hdr, sizeof(hdr)) || hdr[10] == 0 || hdr[9] > 34)
		return -ENOTSUP;
	n = w64(hdr, 24) < 8 ? w64(hdr, 24) : 8;
	entries = keys + 32 + (1ULL << hdr[9]);
	if (census__rd(w, entries, e, n * 16))
		return -EFAULT;
	for (uint64_t i = 0; i < n; i++) {
		char key[16];

		if (!census__read_str(w, w64(e, 16 * i), key, sizeof(key)) &&
		    !strcmp(key, "__name__"))
			return census__read_str(w, w64(e, 16 * i + 8), buf, len);
	}
	return -ENOENT;
}

static void seed_modules(struct census_walk *w, bool main_only)
{
	char name[128];
	uint64_t dict;

	for (size_t i = 0; i < w->nr_modules; i++) {
		if (module_name(w, w->modules[i], name, sizeof(name)))
			continue;
		/* the module's dict is the root: a frame's local naming it is no shorter path */
		if (main_only == !strcmp(name, "__main__") &&
		    !census__rd64(w, w->modules[i] + 16, &dict))
			reach(w, dict, NO_NODE, name, true);
	}
}

/* The locals of one frame as roots, named "thread TID func(): name". */
static void seed_frame(struct census_walk *w, uint64_t fr, uint64_t tid)
{
	const struct census_py *py = w->py;
	uint64_t code, names, locals[CHUNK], name_obj;
	int32_t nlocals;
	char func[96], name[96], label[256];

	if (census__rd64(w, fr + py->fr_code, &code) ||
	    census__rd(w, code + (py->minor == 11 ? 76 : 72), &nlocals, 4) ||
	    census__rd64(w, code + 96, &names) || nlocals <= 0 || nlocals > MAX_LOCALS)
		return;
	if (census__rd64(w, code + py->co_name, &name_obj) ||
	    census__read_str(w, name_obj, func, sizeof(func)))
		snprintf(func, sizeof(func), "?");
	for (int32_t i = 0; i < nlocals; i += CHUNK) {
		int k = nlocals - i < CHUNK ? nlocals - i : CHUNK;

		if (census__rd(w, fr + 72 + 8 * (uint64_t)i, locals, 8 * k))
			return;
		for (int j = 0; j < k; j++) {
			if (!locals[j])
				continue;
			if (census__rd64(w, names + 24 + 8 * (uint64_t)(i + j), &name_obj) ||
			    census__read_str(w, name_obj, name, sizeof(name)))
				snprintf(name, sizeof(name), "local%d", i + j);
			snprintf(label, sizeof(label), "thread %llu %s(): %s",
				 (unsigned long long)tid, func, name);
			reach(w, locals[j], NO_NODE, label, false);
		}
	}
}

static void seed_threads(struct census_walk *w)
{
	const struct census_py *py = w->py;
	uint64_t ts, fr, tid = 0;
	uint8_t owner;

	if (census__rd64(w, py->interp + py->is_threads_head, &ts))
		return;
	for (int t = 0; ts && t < MAX_THREADS; t++) {
		if (py->ts_native_tid)
			census__rd64(w, ts + py->ts_native_tid, &tid);
		if (census__rd64(w, ts + py->ts_frame, &fr))
			break;
		if (py->cframe && fr && census__rd64(w, fr + py->cf_frame, &fr))
			fr = 0;
		w->out->threads++;
		for (int f = 0; fr && f < MAX_FRAMES; f++) {
			if (!py->owner_shim || census__rd(w, fr + py->fr_owner, &owner, 1) ||
			    owner < py->owner_shim)
				seed_frame(w, fr, tid);
			if (census__rd64(w, fr + py->fr_previous, &fr))
				break;
		}
		if (census__rd64(w, ts + py->ts_next, &ts))
			break;
	}
}

/* The tensors found, in the order of tensor_objs, with their types' names. */
static int tensor_list(struct census_walk *w)
{
	struct census *c = w->out;

	c->tensors = calloc(w->nr_tensor_objs + 1, sizeof(*c->tensors));
	if (!c->tensors)
		return -ENOMEM;
	c->nr_tensors = w->nr_tensor_objs;
	for (size_t i = 0; i < c->nr_tensors; i++) {
		struct census_tensor *t = &c->tensors[i];
		const struct census_type *ty;
		bool was = c->truncated_by != NULL;

		t->obj = w->tensor_objs[i];
		t->ndim = -1;
		t->dtype = -1;
		t->group = -1;
		/* the types were read while walking: no cap applies to the cache */
		ty = was ? NULL : census__obj_type(w, t->obj);
		snprintf(t->type, sizeof(t->type), "%s", ty ? ty->name : "?");
	}
	return 0;
}

static void walk_free(struct census_walk *w)
{
	htab__free(w->types);
	htab__free(w->seen);
	htab__free(w->tensor_of);
	free(w->nodes);
	free(w->labels);
	free(w->tensor_objs);
	free(w->tensor_node);
	free(w->tensor_extras);
	free(w->extras);
	free(w->modules);
}

int census__walk(const struct census_mem *m, const struct census_py *py,
		 const struct census_caps *caps, struct census *out)
{
	struct census_walk w = { .m = m, .py = py, .caps = caps, .out = out };
	uint64_t gen0;
	int err;

	memset(out, 0, sizeof(*out));
	out->minor = py->minor;
	w.start_ns = now_ns();
	if (py->minor < 11 || py->minor > 13) {
		snprintf(out->layout_error, sizeof(out->layout_error),
			 "CPython 3.%d: the census reads the collectors of 3.11 to 3.13 (3.14's "
			 "incremental collector keeps young and old spaces with no generation0 "
			 "pointer; 3.10's dicts have another keys layout)",
			 py->minor);
		return -ENOTSUP;
	}
	w.types = htab__new(sizeof(uint64_t), sizeof(struct census_type));
	w.seen = htab__new(sizeof(uint64_t), sizeof(uint32_t));
	w.tensor_of = htab__new(sizeof(uint64_t), sizeof(uint32_t));
	err = -ENOMEM;
	if (!w.types || !w.seen || !w.tensor_of || add_label(&w, "") != 0)
		goto cleanup;
	err = find_gc(&w, &gen0);
	if (err) {
		if (err == -ENOTSUP)
			snprintf(out->layout_error, sizeof(out->layout_error),
				 "no garbage-collector state (generation0 pointing at the first "
				 "generation) in the interpreter state at 0x%llx",
				 (unsigned long long)py->interp);
		goto cleanup;
	}
	/* generations[0..2] (24 bytes apart), generation0, permanent_generation */
	for (int g = 0; g < 3; g++)
		walk_list(&w, gen0 + 24 * g);
	walk_list(&w, gen0 + 80);
	seed_modules(&w, true);
	seed_modules(&w, false);
	seed_threads(&w);
	for (uint32_t i = 0; i < w.nr_nodes && !out->truncated_by; i++)
		expand(&w, i);
	err = tensor_list(&w);
	if (!err)
		err = census__tensors(&w);
	if (!err)
		err = census__fill_holders(&w);
	if (!err)
		err = census__build_groups(&w);
	list_not_entered(&w);
cleanup:
	out->elapsed_ns = now_ns() - w.start_ns;
	walk_free(&w);
	return err;
}

void census__free(struct census *c)
{
	for (size_t i = 0; c->tensors && i < c->nr_tensors; i++)
		for (int h = 0; h < c->tensors[i].nr_holders; h++)
			free(c->tensors[i].holders[h]);
	for (size_t i = 0; c->groups && i < c->nr_groups; i++)
		free(c->groups[i].path);
	for (size_t i = 0; i < c->nr_graphs; i++)
		free(c->graphs[i]);
	free(c->tensors);
	free(c->groups);
	free(c->graphs);
	memset(c, 0, sizeof(*c));
}
