// SPDX-License-Identifier: BSD-2-Clause
/*
 * pprof.c - the snapshot as a gzipped profile.proto, the format of pprof,
 * Parca and Pyroscope. The protobuf encoding is written here (varints and
 * length-delimited fields); zlib makes the gzip stream.
 *
 * Native frames become locations in a mapping per module (filename, build
 * id); a location's address is a per-mapping base plus the frame's file
 * offset, and the mapping starts at that base with file offset 0, so tools
 * that symbolize by build id find the right spot. Python frames are
 * locations of their own functions (filename, line), with no mapping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "report.h"
#include "trace/probes.h"
#include "util/fmt.h"
#include "util/htab.h"

#ifndef GPULEAK_VERSION
#define GPULEAK_VERSION "0.1.0"
#endif

#define MAPPING_SHIFT 40 /* mapping i starts at i << 40 */
#define PAGE 4096ULL

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* profile.proto field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE,
	PROFILE_MAPPING,
	PROFILE_LOCATION,
	PROFILE_FUNCTION,
	PROFILE_STRING_TABLE,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION,
	PROFILE_PERIOD_TYPE,
	PROFILE_PERIOD,
	PROFILE_COMMENT,
	PROFILE_DEFAULT_SAMPLE_TYPE,
};

struct pbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

struct mapping {
	uint32_t filename, build_id;
	uint64_t limit;
	bool all_functions, any_file, any_line;
};

struct location {
	uint64_t mapping, address, function;
	int64_t line;
};

struct function {
	uint32_t name, filename;
};

struct loc_key {
	uint32_t kind; /* 1: native in a mapping, 2: python, 3: bare address */
	uint32_t mapping;
	uint64_t a, b;
};

struct pprof {
	struct pbuf out, msg, sub, samples;
	struct htab *strings, *functions_ix, *mappings_ix, *locations_ix; /* -> id */
	const char **strtab;
	size_t nstr, capstr;
	struct function *functions;
	struct mapping *mappings;
	struct location *locations;
	size_t nfunc, capfunc, nmap, capmap, nloc, caploc;
	char **owned; /* strings made here (not the snapshot's), freed with the profile */
	size_t nowned, capowned;
	bool oom;
};

static void pb_grow(struct pbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *p;

	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void pb_raw(struct pbuf *b, const void *data, size_t len)
{
	if (!len)
		return;
	if (b->len + len > b->cap)
		pb_grow(b, len);
	if (b->oom)
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void pb_varint(struct pbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	pb_raw(b, tmp, n);
}

/* A varint field; proto3 leaves zero values out. */
static void pb_uint(struct pbuf *b, int field, uint64_t v)
{
	if (!v)
		return;
	pb_varint(b, (uint64_t)field << 3 | WIRE_VARINT);
	pb_varint(b, v);
}

static void pb_bytes(struct pbuf *b, int field, const void *data, size_t len)
{
	pb_varint(b, (uint64_t)field << 3 | WIRE_LEN);
	pb_varint(b, len);
	pb_raw(b, data, len);
}

/* Appends sub as a length-delimited field of b and empties sub. */
static void pb_msg(struct pbuf *b, int field, struct pbuf *sub)
{
	b->oom |= sub->oom;
	pb_bytes(b, field, sub->p, sub->len);
	sub->len = 0;
}

static uint64_t intern(struct pprof *pp, const char *s)
{
	uint64_t key[2] = { 0, 0 };
	uint32_t *id;
	bool created;

	if (!s || !*s)
		return 0;
	/* on a collision of the 64-bit hash, probe with the next seed */
	for (key[1] = 0;; key[1]++) {
		key[0] = hash_bytes(s, strlen(s), key[1]);
		id = htab__upsert(pp->strings, key, &created);
		if (!id) {
			pp->oom = true;
			return 0;
		}
		if (!created && !strcmp(pp->strtab[*id], s))
			return *id;
		if (created)
			break;
	}
	if (pp->nstr == pp->capstr) {
		size_t cap = pp->capstr * 2;
		const char **t = realloc(pp->strtab, cap * sizeof(*t));

		if (!t) {
			htab__delete(pp->strings, key);
			pp->oom = true;
			return 0;
		}
		pp->strtab = t;
		pp->capstr = cap;
	}
	pp->strtab[pp->nstr] = s;
	*id = pp->nstr;
	return pp->nstr++;
}

/* Makes room for one more element in *arr; returns false when out of memory. */
static bool reserve(void **arr, size_t n, size_t *cap, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return true;
	ncap = *cap ? *cap * 2 : 64;
	p = realloc(*arr, ncap * size);
	if (!p)
		return false;
	*arr = p;
	*cap = ncap;
	return true;
}

/* Looks key up in ix; on a miss, *created is set and the caller fills entry id. */
static uint64_t *index_slot(struct pprof *pp, struct htab *ix, const void *key, bool *created)
{
	uint64_t *id = htab__upsert(ix, key, created);

	if (!id)
		pp->oom = true;
	return id;
}

/* intern() of a string that does not outlive the call: the table keeps a copy. */
static uint64_t intern_copy(struct pprof *pp, const char *s)
{
	uint64_t id = intern(pp, s);
	char *copy;

	if (!id || pp->strtab[id] != s)
		return id;
	copy = strdup(s);
	if (!copy || !reserve((void **)&pp->owned, pp->nowned, &pp->capowned, sizeof(*pp->owned))) {
		free(copy);
		pp->strtab[id] = ""; /* never read through a dangling pointer */
		pp->oom = true;
		return id;
	}
	pp->owned[pp->nowned++] = copy;
	pp->strtab[id] = copy;
	return id;
}

static uint64_t function_id(struct pprof *pp, const char *name, const char *file)
{
	struct function fn = { intern(pp, name), intern(pp, file) };
	uint64_t *id;
	bool created;

	id = index_slot(pp, pp->functions_ix, &fn, &created);
	if (!id || !created)
		return id ? *id : 0;
	if (!reserve((void **)&pp->functions, pp->nfunc, &pp->capfunc, sizeof(fn))) {
		htab__delete(pp->functions_ix, &fn);
		pp->oom = true;
		return 0;
	}
	pp->functions[pp->nfunc++] = fn;
	*id = pp->nfunc;
	return *id;
}

static uint64_t mapping_id(struct pprof *pp, const struct snap_frame *fr)
{
	struct mapping m = { .filename = intern(pp, fr->module),
			     .build_id = intern(pp, fr->build_id),
			     .all_functions = true };
	uint32_t key[2] = { m.filename, m.build_id };
	uint64_t *id;
	bool created;

	id = index_slot(pp, pp->mappings_ix, key, &created);
	if (!id || !created)
		return id ? *id : 0;
	if (!reserve((void **)&pp->mappings, pp->nmap, &pp->capmap, sizeof(m))) {
		htab__delete(pp->mappings_ix, key);
		pp->oom = true;
		return 0;
	}
	pp->mappings[pp->nmap++] = m;
	*id = pp->nmap;
	return *id;
}

/*
 * A Python function's name as pprof shows it. pprof takes a name with '<' for a
 * C++ one and strips "<...>" as template arguments, leaving "<module>",
 * "<lambda>" and "<listcomp>" empty ("<unknown>"), unless a '.' comes before
 * the '<', as in Java's "Class.<init>": such a name is qualified by its
 * file's stem ("train.<module>").
 */
static const char *python_name(const struct snap_frame *fr, char *buf, size_t len)
{
	const char *file = fr->file, *base, *dot;
	int n;

	if (!fr->function)
		return "?";
	if (fr->function[0] != '<')
		return fr->function;
	base = file ? strrchr(file, '/') : NULL;
	base = base ? base + 1 : file ? file : "";
	dot = strrchr(base, '.');
	n = snprintf(buf, len, "%.*s.%s",
		     (int)(dot && dot != base ? dot - base : (long)strlen(base)), base,
		     fr->function);
	return n > 0 && (size_t)n < len && *base ? buf : fr->function;
}

static uint64_t location_id(struct pprof *pp, const struct snap_frame *fr)
{
	struct location loc = { 0 };
	struct loc_key key = { 0 };
	uint64_t *id;
	bool created;

	if (fr->kind[0] == 'p') {
		char buf[256];
		const char *name = python_name(fr, buf, sizeof(buf));

		if (name == buf)
			intern_copy(pp, name); /* function_id() then finds it */
		loc.function = function_id(pp, name, fr->file);
		loc.line = fr->line;
		key = (struct loc_key){ .kind = 2, .a = loc.function, .b = (uint64_t)fr->line };
	} else if (fr->module) {
		loc.mapping = mapping_id(pp, fr);
		if (!loc.mapping)
			return 0;
		loc.address = (loc.mapping << MAPPING_SHIFT) + fr->offset;
		key = (struct loc_key){ .kind = 1, .mapping = loc.mapping, .a = fr->offset };
	} else {
		loc.address = fr->address;
		key = (struct loc_key){ .kind = 3, .a = fr->address };
	}
	if (fr->kind[0] != 'p' && fr->function) {
		loc.function = function_id(pp, fr->function, fr->file);
		loc.line = fr->line;
	}
	id = index_slot(pp, pp->locations_ix, &key, &created);
	if (!id || !created)
		return id ? *id : 0;
	if (!reserve((void **)&pp->locations, pp->nloc, &pp->caploc, sizeof(loc))) {
		htab__delete(pp->locations_ix, &key);
		pp->oom = true;
		return 0;
	}
	if (loc.mapping) {
		struct mapping *m = &pp->mappings[loc.mapping - 1];
		uint64_t end = (fr->offset + PAGE) & ~(PAGE - 1);

		if (end > m->limit)
			m->limit = end;
		m->all_functions &= loc.function != 0;
		m->any_file |= fr->file != NULL;
		m->any_line |= fr->line != 0;
	}
	pp->locations[pp->nloc++] = loc;
	*id = pp->nloc;
	return *id;
}

/*
 * pprof calls the first mapping the main binary ("File:" in its reports): the
 * traced program, the module of the outermost native frame of most stacks
 * (never libcuda, which every stack starts in). Made the first mapping.
 */
static void main_mapping(struct pprof *pp, const struct snapshot *s)
{
	enum { CANDIDATES = 16 };
	const struct snap_frame *cand[CANDIDATES];
	uint32_t votes[CANDIDATES] = { 0 }, ncand = 0, best = 0;

	for (uint32_t i = 0; i < s->nprocs; i++) {
		for (uint32_t j = 0; j < s->procs[i].nstacks; j++) {
			const struct snap_stack *st = &s->procs[i].stacks[j];
			const struct snap_frame *out = NULL;
			uint32_t c;

			for (uint32_t k = 0; k < st->nframes; k++)
				if (st->frames[k].kind[0] != 'p' && st->frames[k].module &&
				    !strstr(st->frames[k].module, "libcuda.so"))
					out = &st->frames[k];
			if (!out || !report__is_memory_class(st->cls))
				continue;
			for (c = 0; c < ncand; c++)
				if (!strcmp(cand[c]->module, out->module))
					break;
			if (c == ncand && ncand < CANDIDATES)
				cand[ncand++] = out;
			if (c < ncand)
				votes[c]++;
		}
	}
	for (uint32_t c = 1; c < ncand; c++)
		if (votes[c] > votes[best])
			best = c;
	if (ncand)
		mapping_id(pp, cand[best]);
}

static void add_label(struct pprof *pp, const char *key, const char *str, int64_t num)
{
	pb_uint(&pp->sub, 1, intern(pp, key));
	if (str)
		pb_uint(&pp->sub, 2, intern(pp, str));
	else
		pb_uint(&pp->sub, 3, (uint64_t)num);
	pb_msg(&pp->msg, 3, &pp->sub);
}

static void add_sample(struct pprof *pp, const struct snap_proc *p, const struct snap_stack *st)
{
	uint64_t values[4] = { st->outstanding_bytes, st->outstanding_allocs, st->alloc_bytes,
			       st->allocs };

	for (uint32_t i = 0; i < st->nframes; i++)
		pb_varint(&pp->sub, location_id(pp, &st->frames[i]));
	if (st->nframes)
		pb_msg(&pp->msg, 1, &pp->sub);
	for (int i = 0; i < 4; i++)
		pb_varint(&pp->sub, values[i]);
	pb_msg(&pp->msg, 2, &pp->sub);
	add_label(pp, "pid", NULL, p->pid);
	add_label(pp, "comm", p->comm, 0);
	add_label(pp, "memory", class__name(st->cls), 0);
	add_label(pp, "verdict", st->verdict, 0);
	pb_msg(&pp->samples, PROFILE_SAMPLE, &pp->msg);
}

static void value_type(struct pprof *pp, int field, const char *type, const char *unit)
{
	pb_uint(&pp->msg, 1, intern(pp, type));
	pb_uint(&pp->msg, 2, intern(pp, unit));
	pb_msg(&pp->out, field, &pp->msg);
}

static void put_tables(struct pprof *pp)
{
	pb_raw(&pp->out, pp->samples.p, pp->samples.len);
	pp->out.oom |= pp->samples.oom;
	for (size_t i = 0; i < pp->nmap; i++) {
		const struct mapping *m = &pp->mappings[i];
		uint64_t start = (uint64_t)(i + 1) << MAPPING_SHIFT;

		pb_uint(&pp->msg, 1, i + 1);
		pb_uint(&pp->msg, 2, start);
		pb_uint(&pp->msg, 3, start + (m->limit ? m->limit : PAGE));
		pb_uint(&pp->msg, 5, m->filename);
		pb_uint(&pp->msg, 6, m->build_id);
		pb_uint(&pp->msg, 7, m->all_functions);
		pb_uint(&pp->msg, 8, m->any_file);
		pb_uint(&pp->msg, 9, m->any_line);
		pb_msg(&pp->out, PROFILE_MAPPING, &pp->msg);
	}
	for (size_t i = 0; i < pp->nloc; i++) {
		const struct location *l = &pp->locations[i];

		pb_uint(&pp->msg, 1, i + 1);
		pb_uint(&pp->msg, 2, l->mapping);
		pb_uint(&pp->msg, 3, l->address);
		if (l->function) {
			pb_uint(&pp->sub, 1, l->function);
			pb_uint(&pp->sub, 2, (uint64_t)l->line);
			pb_msg(&pp->msg, 4, &pp->sub);
		}
		pb_msg(&pp->out, PROFILE_LOCATION, &pp->msg);
	}
	for (size_t i = 0; i < pp->nfunc; i++) {
		pb_uint(&pp->msg, 1, i + 1);
		pb_uint(&pp->msg, 2, pp->functions[i].name);
		pb_uint(&pp->msg, 3, pp->functions[i].name);
		pb_uint(&pp->msg, 4, pp->functions[i].filename);
		pb_msg(&pp->out, PROFILE_FUNCTION, &pp->msg);
	}
}

static void encode(struct pprof *pp, const struct snapshot *s, const struct pprof_opts *o)
{
	static const char *const types[4][2] = {
		{ "inuse_space", "bytes" },
		{ "inuse_objects", "count" },
		{ "alloc_space", "bytes" },
		{ "alloc_objects", "count" },
	};
	uint64_t comments[2] = { 0, 0 };
	uint64_t def = o->default_sample < 4 ? o->default_sample : 0;
	uint64_t duration = u64_of(s->duration_s * 1e9);

	for (int i = 0; i < 4; i++)
		value_type(pp, PROFILE_SAMPLE_TYPE, types[i][0], types[i][1]);
	intern(pp, "space"); /* the period type, written after the string table */
	main_mapping(pp, s);
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];
		enum report_draw rule = report__draw_rule(p);

		for (uint32_t j = 0; j < p->nstacks; j++) {
			const struct snap_stack *st = &p->stacks[j];

			if (!report__drawn(rule, st) ||
			    (o->leak_only && strcmp(st->verdict, "leak")))
				continue;
			add_sample(pp, p, st);
		}
	}
	comments[0] = intern(pp, "gpuleak " GPULEAK_VERSION ": outstanding CUDA memory per stack");
	if (!s->complete)
		comments[1] = intern(pp, "incomplete: events were lost or the books disagree "
					 "with the kernel's counters");
	put_tables(pp);
	for (size_t i = 0; i < pp->nstr; i++)
		pb_bytes(&pp->out, PROFILE_STRING_TABLE, pp->strtab[i], strlen(pp->strtab[i]));
	if (o->time_ns > duration)
		pb_uint(&pp->out, PROFILE_TIME_NANOS, o->time_ns - duration);
	pb_uint(&pp->out, PROFILE_DURATION, duration);
	value_type(pp, PROFILE_PERIOD_TYPE, "space", "bytes");
	pb_uint(&pp->out, PROFILE_PERIOD, 1);
	for (int i = 0; i < 2; i++)
		pb_uint(&pp->out, PROFILE_COMMENT, comments[i]);
	pb_uint(&pp->out, PROFILE_DEFAULT_SAMPLE_TYPE, intern(pp, types[def][0]));
}

/* gzip-compresses data onto f. Returns 0, -ENOMEM or -EIO. */
static int gzip_write(FILE *f, const uint8_t *data, size_t len)
{
	uint8_t chunk[65536];
	z_stream zs = { 0 };
	int err = 0, zr, flush;
	size_t n;

	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY))
		return -ENOMEM;
	do {
		if (!zs.avail_in) {
			n = len < (1U << 30) ? len : 1U << 30;
			zs.next_in = (uint8_t *)data;
			zs.avail_in = n;
			data += n;
			len -= n;
		}
		flush = len ? Z_NO_FLUSH : Z_FINISH;
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zr = deflate(&zs, flush);
		n = sizeof(chunk) - zs.avail_out;
		if (zr == Z_STREAM_ERROR || fwrite(chunk, 1, n, f) != n) {
			err = -EIO;
			break;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&zs);
	return err;
}

int report__pprof(FILE *f, const struct snapshot *s, const struct pprof_opts *o)
{
	struct pprof pp = { .capstr = 256 };
	int err = -ENOMEM;

	pp.strings = htab__new(2 * sizeof(uint64_t), sizeof(uint32_t));
	pp.functions_ix = htab__new(sizeof(struct function), sizeof(uint64_t));
	pp.mappings_ix = htab__new(2 * sizeof(uint32_t), sizeof(uint64_t));
	pp.locations_ix = htab__new(sizeof(struct loc_key), sizeof(uint64_t));
	pp.strtab = malloc(pp.capstr * sizeof(*pp.strtab));
	if (!pp.strings || !pp.functions_ix || !pp.mappings_ix || !pp.locations_ix || !pp.strtab)
		goto cleanup;
	pp.strtab[pp.nstr++] = ""; /* index 0, by the format's rule */
	encode(&pp, s, o);
	if (pp.oom || pp.out.oom || pp.msg.oom || pp.sub.oom || pp.samples.oom)
		goto cleanup;
	err = gzip_write(f, pp.out.p, pp.out.len);
	if (!err && (fflush(f) || ferror(f)))
		err = -EIO;
cleanup:
	htab__free(pp.strings);
	htab__free(pp.functions_ix);
	htab__free(pp.mappings_ix);
	htab__free(pp.locations_ix);
	free(pp.strtab);
	free(pp.functions);
	free(pp.mappings);
	for (size_t i = 0; i < pp.nowned; i++)
		free(pp.owned[i]);
	free(pp.owned);
	free(pp.locations);
	free(pp.out.p);
	free(pp.msg.p);
	free(pp.sub.p);
	free(pp.samples.p);
	return err;
}
