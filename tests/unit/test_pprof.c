// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_pprof.c - report/pprof.c: the gzipped profile.proto is gunzipped and
 * decoded here by a minimal protobuf reader (independent of the writer), and
 * its sample types, totals, labels, string table, functions, locations and
 * mappings are checked against the fixture.
 */
#include <zlib.h>
#include "outputs_fixture.h"

#define MAX 512

struct pb {
	const uint8_t *p, *end;
};

struct field {
	uint32_t num, wire;
	uint64_t v;	     /* varint */
	const uint8_t *data; /* length-delimited */
	size_t len;
};

static uint64_t rd_varint(struct pb *b)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		assert_true(b->p < b->end);
		v |= (uint64_t)(*b->p & 0x7f) << shift;
		if (!(*b->p++ & 0x80))
			return v;
	}
	fail_msg("varint longer than 10 bytes");
	return 0;
}

static bool next_field(struct pb *b, struct field *f)
{
	uint64_t key;

	if (b->p >= b->end)
		return false;
	key = rd_varint(b);
	f->num = key >> 3;
	f->wire = key & 7;
	if (f->wire == 0) {
		f->v = rd_varint(b);
	} else if (f->wire == 2) {
		f->len = rd_varint(b);
		assert_true(f->len <= (size_t)(b->end - b->p));
		f->data = b->p;
		b->p += f->len;
	} else {
		fail_msg("unexpected wire type %u in field %u", f->wire, f->num);
	}
	return true;
}

static struct pb sub(const struct field *f)
{
	assert_int_equal(f->wire, 2);
	return (struct pb){ f->data, f->data + f->len };
}

/* A repeated integer field, packed or not: appends to out. */
static void ints(const struct field *f, uint64_t *out, size_t *n)
{
	struct pb b;

	if (f->wire == 0) {
		out[(*n)++] = f->v;
		return;
	}
	b = sub(f);
	while (b.p < b.end) {
		assert_true(*n < MAX);
		out[(*n)++] = rd_varint(&b);
	}
}

/* The fields of a small message by number (0 when absent). */
static void scalars(const struct field *f, uint64_t *out, int n)
{
	struct pb b = sub(f);
	struct field g;

	memset(out, 0, n * sizeof(*out));
	while (next_field(&b, &g))
		if (g.wire == 0 && g.num < (uint32_t)n)
			out[g.num] = g.v;
}

struct label {
	uint64_t sample, key, str, num;
};

struct profile {
	char *str[MAX];
	size_t nstr;
	uint64_t type[8][3], ntypes;
	uint64_t total[8], nsamples, leaf[MAX];
	struct label labels[MAX];
	size_t nlabels;
	/* by field number; loc[4] and loc[5] hold its Line's function and line */
	uint64_t map[MAX][10], loc[MAX][6], fn[MAX][6];
	size_t nmaps, nlocs, nfns;
	uint64_t top[16]; /* scalar fields of Profile */
	uint64_t comments[8], ncomments, period_type[3];
};

static void read_sample(struct profile *pr, const struct field *f)
{
	struct pb b = sub(f);
	uint64_t vals[8], locs[MAX], l[5];
	size_t nv = 0, nl = 0;
	struct field g;

	while (next_field(&b, &g)) {
		if (g.num == 1) {
			ints(&g, locs, &nl);
		} else if (g.num == 2) {
			ints(&g, vals, &nv);
		} else if (g.num == 3) {
			scalars(&g, l, 5);
			assert_true(pr->nlabels < MAX);
			pr->labels[pr->nlabels++] =
				(struct label){ pr->nsamples, l[1], l[2], l[3] };
		}
	}
	assert_int_equal(nv, pr->ntypes);
	for (size_t i = 0; i < nv; i++)
		pr->total[i] += vals[i];
	pr->leaf[pr->nsamples++] = nl ? locs[0] : 0;
}

static void decode(struct profile *pr, const uint8_t *data, size_t len)
{
	struct pb b = { data, data + len };
	struct field f;

	memset(pr, 0, sizeof(*pr));
	while (next_field(&b, &f)) {
		switch (f.num) {
		case 1:
			scalars(&f, pr->type[pr->ntypes++], 3);
			break;
		case 2:
			read_sample(pr, &f);
			break;
		case 3:
			scalars(&f, pr->map[pr->nmaps++], 10);
			break;
		case 4: {
			struct pb lb = sub(&f);
			uint64_t *loc = pr->loc[pr->nlocs++], line[3];
			struct field g;

			scalars(&f, loc, 4); /* id, mapping, address */
			while (next_field(&lb, &g)) {
				if (g.num != 4)
					continue;
				scalars(&g, line, 3);
				loc[4] = line[1]; /* function */
				loc[5] = line[2]; /* line */
			}
			break;
		}
		case 5:
			scalars(&f, pr->fn[pr->nfns++], 6);
			break;
		case 6:
			pr->str[pr->nstr++] = strndup((const char *)f.data, f.len);
			break;
		case 11:
			scalars(&f, pr->period_type, 3);
			break;
		case 13:
			pr->comments[pr->ncomments++] = f.v;
			break;
		default:
			assert_int_equal(f.wire, 0);
			assert_true(f.num < 16);
			pr->top[f.num] = f.v;
		}
		assert_true(pr->nmaps < MAX && pr->nlocs < MAX && pr->nfns < MAX && pr->nstr < MAX);
	}
}

static uint8_t *gunzip(const char *gz, size_t len, size_t *out_len)
{
	size_t cap = 4 << 20;
	uint8_t *out = malloc(cap);
	z_stream zs = { 0 };

	assert_non_null(out);
	assert_true(len > 2 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b);
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (uint8_t *)gz;
	zs.avail_in = len;
	zs.next_out = out;
	zs.avail_out = cap;
	assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
	assert_int_equal(zs.avail_in, 0);
	*out_len = zs.total_out;
	inflateEnd(&zs);
	return out;
}

static void load(struct profile *pr, const struct snapshot *s, const struct pprof_opts *o)
{
	size_t gzlen, len;
	char *gz = CAPTURE(report__pprof(f, s, o), &gzlen);
	uint8_t *raw = gunzip(gz, gzlen, &len);

	decode(pr, raw, len);
	free(raw);
	free(gz);
}

static void unload(struct profile *pr)
{
	for (size_t i = 0; i < pr->nstr; i++)
		free(pr->str[i]);
}

static const char *S(const struct profile *pr, uint64_t i)
{
	assert_true(i < pr->nstr);
	return pr->str[i];
}

static const uint64_t *loc_of_function(const struct profile *pr, const char *name)
{
	for (size_t i = 0; i < pr->nlocs; i++) {
		uint64_t fn = pr->loc[i][4];

		if (fn && !strcmp(S(pr, pr->fn[fn - 1][2]), name))
			return pr->loc[i];
	}
	fail_msg("no location in function %s", name);
	return NULL;
}

static const uint64_t *mapping_named(const struct profile *pr, const char *file)
{
	for (size_t i = 0; i < pr->nmaps; i++)
		if (!strcmp(S(pr, pr->map[i][5]), file))
			return pr->map[i];
	fail_msg("no mapping for %s", file);
	return NULL;
}

static void test_pprof_profile(void **state)
{
	static const char *const types[4][2] = { { "inuse_space", "bytes" },
						 { "inuse_objects", "count" },
						 { "alloc_space", "bytes" },
						 { "alloc_objects", "count" } };
	const uint64_t totals[4] = { FX_INUSE_SPACE, FX_INUSE_OBJECTS, FX_ALLOC_SPACE,
				     FX_ALLOC_OBJECTS };
	struct pprof_opts o = { .time_ns = 1700000000000000000ULL };
	struct profile pr;
	const uint64_t *m, *l;
	int pid100 = 0, pid200 = 0;

	load(&pr, &fx_snap, &o);
	assert_string_equal(S(&pr, 0), "");
	assert_int_equal(pr.ntypes, 4);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(S(&pr, pr.type[i][1]), types[i][0]);
		assert_string_equal(S(&pr, pr.type[i][2]), types[i][1]);
		assert_int_equal(pr.total[i], totals[i]);
	}
	assert_string_equal(S(&pr, pr.top[14]), "inuse_space");
	assert_int_equal(pr.nsamples, FX_SAMPLES);
	assert_int_equal(pr.top[10], 2500000000ULL);
	assert_int_equal(pr.top[9], o.time_ns - 2500000000ULL);
	assert_true(pr.ncomments >= 1);
	assert_string_equal(S(&pr, pr.period_type[1]), "space");
	assert_string_equal(S(&pr, pr.period_type[2]), "bytes");

	/* every sample: a numeric pid and a string comm */
	for (size_t i = 0; i < pr.nlabels; i++) {
		const struct label *lb = &pr.labels[i];

		if (!strcmp(S(&pr, lb->key), "pid")) {
			assert_int_equal(lb->str, 0);
			pid100 += lb->num == 100;
			pid200 += lb->num == 200;
		} else if (!strcmp(S(&pr, lb->key), "comm")) {
			assert_string_equal(S(&pr, lb->str), lb->sample == FX_SAMPLES - 1 ?
								     "a<b>&\"c;d" : "python3");
		}
	}
	assert_int_equal(pid100, 4);
	assert_int_equal(pid200, 1);

	/* mappings with build ids; addresses are file offsets above the mapping's start */
	assert_int_equal(pr.nmaps, 3);
	m = mapping_named(&pr, LIBCUDA);
	assert_string_equal(S(&pr, m[6]), LIBCUDA_ID);
	assert_int_equal(m[7], 1); /* has_functions */
	l = loc_of_function(&pr, "cuMemAlloc_v2");
	assert_int_equal(l[2], m[1]);
	assert_int_equal(l[3] - m[2], 0x4000);
	assert_true(l[3] < m[3]);
	assert_int_equal(m[4], 0); /* file offset of the mapping's start */
	m = mapping_named(&pr, TORCH);
	assert_string_equal(S(&pr, m[6]), TORCH_ID);
	assert_int_equal(m[7], 0); /* a frame there has no function: pprof may symbolize it */

	/* Python frames: functions of their own, with file and line, no mapping */
	l = loc_of_function(&pr, "forward");
	assert_int_equal(l[2], 0);
	assert_int_equal(l[5], 42);
	assert_string_equal(S(&pr, pr.fn[l[4] - 1][4]), "/src/net/model.py");
	loc_of_function(&pr, "train;step");
	loc_of_function(&pr, NASTY_FN);
	/* "<module>" would be "<unknown>" in pprof (a C++ template to it): "train.<module>" */
	l = loc_of_function(&pr, "train.<module>");
	assert_int_equal(l[5], 1);
	for (size_t i = 0; i < pr.nfns; i++)
		assert_true(S(&pr, pr.fn[i][2])[0] != '<');
	/* the main binary (the first mapping) is the program's, never the CUDA driver */
	assert_int_equal(pr.map[0][1], 1);
	assert_string_equal(S(&pr, pr.map[0][5]), TORCH);

	/* ids are 1..n; references resolve; the leaf of every sample is the driver call */
	for (size_t i = 0; i < pr.nlocs; i++) {
		assert_int_equal(pr.loc[i][1], i + 1);
		assert_true(pr.loc[i][2] <= pr.nmaps && pr.loc[i][4] <= pr.nfns);
		if (pr.loc[i][3] == 0xdeadbeef)
			assert_true(!pr.loc[i][2] && !pr.loc[i][4]);
	}
	for (size_t i = 0; i < pr.nfns; i++)
		assert_int_equal(pr.fn[i][1], i + 1);
	for (size_t i = 0; i < pr.nsamples; i++) {
		uint64_t fn = pr.loc[pr.leaf[i] - 1][4];

		assert_true(fn && !strncmp(S(&pr, pr.fn[fn - 1][2]), "cuMemAlloc", 10));
	}
	unload(&pr);
}

static void test_pprof_options(void **state)
{
	struct pprof_opts o = { .leak_only = true, .default_sample = PPROF_ALLOC_OBJECTS };
	struct snapshot empty = { .complete = true };
	struct profile pr;

	load(&pr, &fx_snap, &o);
	assert_int_equal(pr.nsamples, 2);
	assert_int_equal(pr.total[0], (3 << 20) + 4096);
	assert_int_equal(pr.total[3], 5 + 1);
	assert_string_equal(S(&pr, pr.top[14]), "alloc_objects");
	assert_int_equal(pr.top[9], 0);
	unload(&pr);

	load(&pr, &empty, &(struct pprof_opts){ 0 });
	assert_int_equal(pr.nsamples, 0);
	assert_int_equal(pr.ntypes, 4);
	assert_int_equal(pr.nlocs + pr.nmaps + pr.nfns, 0);
	unload(&pr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_profile),
		cmocka_unit_test(test_pprof_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
