// SPDX-License-Identifier: BSD-2-Clause
/*
 * torch.c - PyTorch's C++ objects behind a tensor, read from outside. The
 * wheels carry no debug information, so every offset is found or checked at
 * run time on the tensors at hand, and none is used unless every sample
 * agrees:
 *
 *  - THPVariable: PyObject header, then either c10::MaybeOwned<at::Tensor>
 *    (a bool saying "borrowed", then the TensorImpl pointer, in both cases: a
 *    Tensor's borrowed form is a Tensor that does not count its reference;
 *    PyTorch 1.x to early 2.x) or a plain at::Tensor (the TensorImpl pointer
 *    right after the header; later 2.x). Both are tried, MaybeOwned first.
 *    Checked: the TensorImpl points back at the Python object (its pyobj_,
 *    low bit a tag), at one offset for every tensor.
 *  - TensorImpl: vtable, refcounts, storage_ (the StorageImpl) at 24,
 *    autograd_meta_ at 32; sizes_and_strides_ (ndim, then 5 sizes and 5
 *    strides inline), storage_offset_, numel_, data_type_. Searched: the one
 *    offset where, for every tensor, numel_ is the product of the sizes.
 *  - StorageImpl: vtable, refcounts, DataPtr (data, context, deleter, device),
 *    size_bytes_. Checked: every tensor's extent fits its storage, and at
 *    least one contiguous tensor fills its storage exactly.
 *  - AutogradMeta: vtable, name_ (a std::string, empty: its data points at its
 *    own buffer), grad_, grad_fn_, ..., requires_grad_ (at 136 up to 2.1; at
 *    144 from 2.2, after post_acc_grad_hooks_). No meta: the tensor does not
 *    require grad; a grad_fn: it does; a leaf with a meta: its requires_grad_,
 *    at the one candidate offset where every meta holds 0 or 1, every
 *    non-leaf 0 (PyTorch keeps it false there), and some leaf 1; else unknown.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "census_int.h"

#define IMPL_WIN 512 /* bytes of a TensorImpl read */
#define MAX_SAMPLES 4096
#define INLINE_DIMS 5
#define SS_SIZES 8    /* sizes_and_strides_: after the ndim word */
#define SS_STRIDES 48 /* 8 + 5 * 8 */
#define SS_OFFSET 88  /* storage_offset_ after sizes_and_strides_ */
#define SS_NUMEL 96
#define SS_DTYPE 104
#define ST_READ 64
#define CDATA_MAYBE_OWNED 24 /* THPVariable's TensorImpl pointer after MaybeOwned's bool */
#define CDATA_PLAIN 16	     /* after the PyObject header */

/*
 * Where TensorImpl and StorageImpl keep their fields after the vtable: with
 * two reference counts (1.x to early 2.x) or with one word holding both (later
 * 2.x), which moves every later field 8 bytes down. Tried in order; a layout
 * is used only when the tensors at hand prove it (check_tensor()).
 */
static const struct impl_layout {
	bool one_refcount_word;
	int storage, autograd;		   /* in TensorImpl */
	int st_data, st_device, st_nbytes; /* in StorageImpl */
} layouts[] = {
	{ false, 24, 32, 24, 48, 56 },
	{ true, 16, 24, 16, 40, 48 },
};

static const struct {
	const char *name;
	int size;
} dtypes[] = {
	{ "uint8", 1 },	    { "int8", 1 },	{ "int16", 2 },	      { "int32", 4 },
	{ "int64", 8 },	    { "float16", 2 },	{ "float32", 4 },     { "float64", 8 },
	{ "complex32", 4 }, { "complex64", 8 }, { "complex128", 16 }, { "bool", 1 },
	{ "qint8", 1 },	    { "quint8", 1 },	{ "qint32", 4 },      { "bfloat16", 2 },
};

const char *census__dtype_name(int dtype)
{
	return dtype >= 0 && dtype < (int)(sizeof(dtypes) / sizeof(dtypes[0])) ?
		       dtypes[dtype].name :
		       NULL;
}

int census__dtype_size(int dtype)
{
	return census__dtype_name(dtype) ? dtypes[dtype].size : 0;
}

const char *census__device_name(int dev_type)
{
	static const char *const names[] = { "cpu",    "cuda",	"mkldnn", "opengl", "opencl",
					     "ideep",  "hip",	"fpga",	  "ort",    "xla",
					     "vulkan", "metal", "xpu",	  "mps",    "meta",
					     "hpu",    "ve",	"lazy",	  "ipu",    "mtia" };

	return dev_type >= 0 && dev_type < (int)(sizeof(names) / sizeof(names[0])) ?
		       names[dev_type] :
		       "unknown";
}

struct sample {
	uint64_t obj, impl;
	bool borrowed, ok;
	uint8_t win[IMPL_WIN];
};

/*
 * THPVariable's TensorImpl, its cdata at off (CDATA_MAYBE_OWNED: a bool at 16,
 * the pointer at 24; CDATA_PLAIN: the pointer at 16), and its first IMPL_WIN
 * bytes.
 */
static int read_impl(struct census_walk *w, uint64_t obj, int off, struct sample *s)
{
	uint8_t b[32];

	s->obj = obj;
	s->ok = false;
	if (census__rd(w, obj, b, sizeof(b)) || (off == CDATA_MAYBE_OWNED && b[16] > 1))
		return -EFAULT;
	s->borrowed = off == CDATA_MAYBE_OWNED && b[16];
	/* a borrowed Tensor is stored as a Tensor too (MaybeOwnedTraits) */
	s->impl = w64(b, off);
	if (!s->impl || (s->impl & 7) || census__rd(w, s->impl, s->win, IMPL_WIN))
		return -EFAULT;
	s->ok = true;
	return 0;
}

/* Sizes at win + s plausible and numel their product; returns ndim, or -1. */
static int shape_at(const uint8_t *win, int s, int64_t *numel)
{
	uint64_t ndim = w64(win, s), prod = 1;
	int64_t off = (int64_t)w64(win, s + SS_OFFSET);
	uint64_t dt = w64(win, s + SS_DTYPE) & 0xffff;

	*numel = (int64_t)w64(win, s + SS_NUMEL);
	if (ndim > INLINE_DIMS || off < 0 || off > (1LL << 50) || dt >= 64)
		return -1;
	for (uint64_t k = 0; k < ndim; k++) {
		uint64_t d = w64(win, s + SS_SIZES + 8 * k);

		if (d > (1ULL << 40))
			return -1;
		prod = d && prod > UINT64_MAX / d ? UINT64_MAX : prod * d;
	}
	return (uint64_t)*numel == prod ? (int)ndim : -1;
}

/* The one offset of sizes_and_strides_ every sample agrees on; -1 if none or many. */
static int find_sizes(const struct sample *s, size_t n, int pyobj, int autograd)
{
	int found = -1;

	for (int o = autograd + 8; o + SS_DTYPE + 8 <= IMPL_WIN; o += 8) {
		bool all = true, evidence = false;

		if (o <= pyobj && pyobj < o + SS_DTYPE + 8)
			continue;
		for (size_t i = 0; i < n && all; i++) {
			int64_t numel;
			int nd;

			if (!s[i].ok)
				continue;
			nd = shape_at(s[i].win, o, &numel);
			if (nd < 0 && w64(s[i].win, o) <= INLINE_DIMS)
				all = false;
			if (nd < 0 && w64(s[i].win, o) > 64)
				all = false;
			if (nd >= 1 && numel >= 2)
				evidence = true;
		}
		if (!all || !evidence)
			continue;
		if (found >= 0)
			return -2;
		found = o;
	}
	return found;
}

/* Bytes a tensor spans in its storage from its sizes and strides; 0 if empty. */
static uint64_t span_bytes(const uint8_t *win, int s, int ndim, int itemsize)
{
	uint64_t extent = 1;
	int64_t numel = (int64_t)w64(win, s + SS_NUMEL);

	if (numel == 0)
		return 0;
	for (int k = 0; k < ndim; k++) {
		int64_t size = (int64_t)w64(win, s + SS_SIZES + 8 * k);
		int64_t stride = (int64_t)w64(win, s + SS_STRIDES + 8 * k);

		if (stride < 0 || stride > (1LL << 48))
			return UINT64_MAX;
		extent += (uint64_t)(size - 1) * stride;
	}
	return (extent + w64(win, s + SS_OFFSET)) * itemsize;
}

struct storage_fig {
	uint64_t data, nbytes;
	int dev_type, dev_index;
};

static int read_storage(struct census_walk *w, uint64_t st, struct storage_fig *f)
{
	const struct census *c = w->out;
	uint8_t b[ST_READ];
	uint64_t refs;

	if (!st || (st & 7) || census__rd(w, st, b, sizeof(b)))
		return -EFAULT;
	refs = w64(b, 8);
	if (c->one_refcount_word)
		refs &= 0xffffffffULL; /* the strong count; the weak one above it */
	f->data = w64(b, c->off_st_data);
	f->dev_type = (int8_t)b[c->off_st_device];
	f->dev_index = (int8_t)b[c->off_st_device + 1];
	f->nbytes = w64(b, c->off_st_nbytes);
	if (refs == 0 || refs > (1ULL << 32) || f->dev_type < 0 || f->dev_type > 20 ||
	    f->dev_index < -1 || f->dev_index > 63 || f->nbytes > (1ULL << 50) ||
	    (f->nbytes && !f->data))
		return -EINVAL;
	return 0;
}

/*
 * Checks one tensor against the layout and fills its figures. Returns 0; 1
 * when it also proves the layout (contiguous and filling its storage);
 * -EINVAL when it contradicts the layout.
 */
static int check_tensor(struct census_walk *w, const struct sample *s, struct census_tensor *t)
{
	const struct census *c = w->out;
	int so = c->off_sizes, ndim, itemsize, dt;
	struct storage_fig f;
	int64_t numel;
	uint64_t span;

	if ((w64(s->win, c->off_pyobj) & ~1ULL) != s->obj)
		return -EINVAL;
	ndim = shape_at(s->win, so, &numel);
	dt = w64(s->win, so + SS_DTYPE) & 0xffff;
	itemsize = census__dtype_size(dt);
	t->storage = w64(s->win, c->off_storage);
	if (read_storage(w, t->storage, &f))
		return -EINVAL;
	t->impl = s->impl;
	t->cpp_owned = s->borrowed;
	t->data = f.data;
	t->nbytes = f.nbytes;
	t->dev_type = f.dev_type;
	t->dev_index = f.dev_index;
	t->dtype = itemsize ? dt : -1;
	if (ndim < 0)
		return 0; /* more than 5 dimensions: kept out of line, not read */
	t->ndim = ndim;
	for (int k = 0; k < ndim; k++)
		t->sizes[k] = (int64_t)w64(s->win, so + SS_SIZES + 8 * k);
	t->numel = numel;
	t->storage_offset = (int64_t)w64(s->win, so + SS_OFFSET);
	if (!itemsize)
		return 0;
	span = span_bytes(s->win, so, ndim, itemsize);
	if (span > f.nbytes)
		return -EINVAL;
	return numel >= 2 && span == f.nbytes && !t->storage_offset;
}

/* AutogradMeta::requires_grad_'s candidate offsets, and what a tensor's meta holds there. */
static const int rg_offs[] = { 136, 144 };
#define NR_RG (sizeof(rg_offs) / sizeof(rg_offs[0]))
#define META_BYTES 152

enum { META_NONE = 0, META_LEAF, META_NONLEAF };

struct leaf_meta {
	uint8_t kind;
	uint8_t at[NR_RG];
};

/*
 * requires_grad from autograd_meta_ (*lm: what a leaf's or non-leaf's meta holds at the
 * candidates); returns 1 when the meta's layout was seen to hold.
 */
static int grad_of(struct census_walk *w, const struct sample *s, struct census_tensor *t,
		   struct leaf_meta *lm)
{
	uint64_t meta = w64(s->win, w->out->off_autograd), m[META_BYTES / 8];

	t->requires_grad = CENSUS_RG_UNKNOWN;
	*lm = (struct leaf_meta){ .kind = META_NONE };
	if (!meta) {
		t->requires_grad = CENSUS_RG_NO;
		return 0;
	}
	if ((meta & 7) || census__rd(w, meta, m, sizeof(m)) || !m[0] || m[1] != meta + 24 ||
	    m[2] != 0)
		return 0; /* not an AutogradMeta with an empty name: say nothing */
	if (m[6]) {
		t->grad_fn = true;
		t->requires_grad = CENSUS_RG_YES;
	}
	lm->kind = m[6] ? META_NONLEAF : META_LEAF;
	for (size_t k = 0; k < NR_RG; k++)
		lm->at[k] = ((const uint8_t *)m)[rg_offs[k]];
	return 1;
}

/* The candidate the metas prove to be requires_grad_ (see the top), or -1. */
static int leaf_flag_offset(const struct leaf_meta *lm, size_t n)
{
	int found = -1;

	for (size_t k = 0; k < NR_RG; k++) {
		bool fits = true, proof = false;

		for (size_t i = 0; i < n && fits; i++) {
			if (lm[i].kind == META_NONE)
				continue;
			fits = lm[i].at[k] <= 1 && !(lm[i].kind == META_NONLEAF && lm[i].at[k]);
			proof |= lm[i].kind == META_LEAF && lm[i].at[k] == 1;
		}
		if (!fits || !proof)
			continue;
		if (found >= 0)
			return -1; /* two fit: neither is proved */
		found = (int)k;
	}
	return found;
}

/* Leaves with a meta: their requires_grad_, where its offset is proved. */
static void leaf_grads(struct census *c, const struct leaf_meta *lm)
{
	int k = leaf_flag_offset(lm, c->nr_tensors);

	c->off_requires_grad = k < 0 ? -1 : rg_offs[k];
	for (size_t i = 0; k >= 0 && i < c->nr_tensors; i++)
		if (lm[i].kind == META_LEAF)
			c->tensors[i].requires_grad = lm[i].at[k] ? CENSUS_RG_YES : CENSUS_RG_NO;
}

/* Forgets what was read of a tensor that contradicts the layout. */
static void clear_figures(struct census_tensor *t)
{
	t->impl = t->storage = t->data = t->nbytes = 0;
	t->dev_type = t->dev_index = 0;
	t->dtype = t->ndim = -1;
	t->numel = t->storage_offset = 0;
	t->requires_grad = CENSUS_RG_UNKNOWN;
	t->grad_fn = t->cpp_owned = false;
}

static int find_layout(struct census_walk *w, struct sample *s, size_t n, int off_cdata,
		       const struct impl_layout *l)
{
	struct census *c = w->out;
	size_t ok = 0;

	for (size_t i = 0; i < n; i++)
		ok += s[i].ok;
	if (w->stopped) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 "the read stopped at the cap on %s before the tensors were read",
			 c->truncated_by);
		return -E2BIG;
	}
	if (!ok) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 "no tensor's TensorImpl could be read (THPVariable's cdata at offset "
			 "%d)",
			 off_cdata);
		return -EINVAL;
	}
	c->off_cdata = off_cdata;
	c->off_pyobj = -1;
	for (int o = 8; o + 8 <= IMPL_WIN && c->off_pyobj < 0; o += 8) {
		bool all = true;

		for (size_t i = 0; i < n && all; i++)
			all = !s[i].ok || (w64(s[i].win, o) & ~1ULL) == s[i].obj;
		if (all)
			c->off_pyobj = o;
	}
	if (c->off_pyobj < 0) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 "no offset of TensorImpl points back at the Python object for all %zu "
			 "tensors read: this PyTorch's THPVariable or TensorImpl is laid out "
			 "otherwise",
			 ok);
		return -EINVAL;
	}
	c->off_sizes = find_sizes(s, n, c->off_pyobj, l->autograd);
	if (c->off_sizes < 0) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 c->off_sizes == -2 ?
				 "TensorImpl's sizes fit several offsets: the "
				 "tensors at hand cannot tell which is right" :
				 "no offset of TensorImpl holds sizes whose product "
				 "is numel for all %zu tensors (or none has 2 elements)",
			 ok);
		return -EINVAL;
	}
	c->one_refcount_word = l->one_refcount_word;
	c->off_storage = l->storage;
	c->off_autograd = l->autograd;
	c->off_st_data = l->st_data;
	c->off_st_device = l->st_device;
	c->off_st_nbytes = l->st_nbytes;
	return 0;
}

/*
 * Checks every tensor against the layout find_layout() set; 0 when the
 * tensors prove it (one contiguous tensor fills its storage, at most one in
 * ten contradicts it), else -EINVAL with c->layout_error set and figures kept
 * only for the caller to clear.
 */
static int check_all(struct census_walk *w, struct sample *s, size_t n, int *grad_proofs,
		     struct leaf_meta *lm)
{
	struct census *c = w->out;
	int proofs = 0, bad = 0;

	c->tensors_checked = 0;
	*grad_proofs = 0;
	for (size_t i = 0; i < c->nr_tensors; i++) {
		struct sample one, *p = i < n ? &s[i] : &one;
		int r;

		if (i >= n && read_impl(w, c->tensors[i].obj, c->off_cdata, &one))
			continue;
		if (!p->ok)
			continue;
		r = check_tensor(w, p, &c->tensors[i]);
		if (r < 0) {
			bad++;
			clear_figures(&c->tensors[i]);
			continue;
		}
		proofs += r;
		c->tensors_checked++;
		*grad_proofs += grad_of(w, p, &c->tensors[i], &lm[i]);
	}
	c->tensors_failed = bad;
	if (!proofs) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 "no contiguous tensor fills its StorageImpl exactly (size_bytes_ at %d, "
			 "data_type_ after numel_): the storage's size cannot be verified",
			 c->off_st_nbytes);
		return -EINVAL;
	}
	if (bad * 10 > (int)c->tensors_checked + bad) {
		snprintf(c->layout_error, sizeof(c->layout_error),
			 "%d of %d tensors contradict the layout found (their extent exceeds "
			 "their storage, or their storage is implausible)",
			 bad, (int)c->tensors_checked + bad);
		return -EINVAL;
	}
	return 0;
}

int census__tensors(struct census_walk *w)
{
	static const int cdata_offs[] = { CDATA_MAYBE_OWNED, CDATA_PLAIN };
	struct census *c = w->out;
	size_t n = c->nr_tensors < MAX_SAMPLES ? c->nr_tensors : MAX_SAMPLES;
	int grad_proofs = 0, err = -EINVAL;
	struct leaf_meta *lm;
	struct sample *s;

	c->off_requires_grad = -1;
	if (!c->nr_tensors)
		return 0;
	s = calloc(n, sizeof(*s));
	lm = calloc(c->nr_tensors, sizeof(*lm));
	if (!s || !lm) {
		free(s);
		free(lm);
		return -ENOMEM;
	}
	/* each THPVariable form with each TensorImpl layout, until the tensors prove one */
	for (size_t k = 0; k < sizeof(cdata_offs) / sizeof(cdata_offs[0]) && err; k++) {
		for (size_t i = 0; i < n; i++)
			read_impl(w, c->tensors[i].obj, cdata_offs[k], &s[i]);
		for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]) && err; l++) {
			err = find_layout(w, s, n, cdata_offs[k], &layouts[l]);
			if (err == -E2BIG)
				goto cleanup;
			if (!err)
				err = check_all(w, s, n, &grad_proofs, lm);
			for (size_t i = 0; err && i < c->nr_tensors; i++)
				clear_figures(&c->tensors[i]);
		}
	}
	if (err)
		goto cleanup;
	/*
	 * requires_grad: only when some autograd meta was seen laid out as expected
	 * (else even "no meta, no grad" rests on an unchecked offset)
	 */
	for (size_t i = 0; !grad_proofs && i < c->nr_tensors; i++)
		c->tensors[i].requires_grad = CENSUS_RG_UNKNOWN;
	if (grad_proofs)
		leaf_grads(c, lm);
	c->layout_ok = true;
cleanup:
	for (size_t i = 0; !c->layout_ok && i < c->nr_tensors; i++)
		clear_figures(&c->tensors[i]);
	if (!c->layout_ok)
		c->tensors_checked = 0;
	free(s);
	free(lm);
	return 0;
}
