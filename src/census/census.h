/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * census.h - every live torch.Tensor of a CPython process and what holds it,
 * read from outside. The walk reads the interpreter's garbage-collector lists
 * (CPython 3.11 to 3.13) to find tensors and modules, walks from the modules'
 * globals and the running threads' frame locals breadth first to name each
 * tensor's holders (attributes, dict keys, list and tuple indices, closure
 * cells), and reads each tensor's TensorImpl and StorageImpl with offsets
 * found and checked at run time (PyTorch's wheels carry no debug
 * information). Memory comes through a reader callback, so that the walk can
 * run over a live process (process_vm_readv) or over a synthetic heap.
 * Nothing read is trusted: every count is capped, every pointer is read
 * through the callback, and the walk stops at the caps.
 */
#ifndef GL_CENSUS_H
#define GL_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CENSUS_MAX_DIMS 8
#define CENSUS_MAX_HOLDERS 4 /* paths kept per tensor */

/* Copies len bytes at addr into buf; returns the bytes copied or -errno. */
struct census_mem {
	ssize_t (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

struct census_caps {
	uint64_t max_objects;	 /* objects visited: GC-list entries and objects reached */
	uint64_t max_read_bytes; /* bytes read from the target */
	uint64_t max_ns;	 /* time spent reading */
};

/* What the walk needs to know of the interpreter (from stacks/python's layout). */
struct census_py {
	int minor;		     /* 3.minor, 11 to 13 */
	uint64_t interp;	     /* the main PyInterpreterState */
	uint64_t str_type, int_type; /* PyUnicode_Type, PyLong_Type; 0 if unknown */
	uint16_t is_threads_head, ts_next, ts_frame, ts_native_tid, cf_frame;
	bool cframe; /* ts_frame points at a _PyCFrame whose cf_frame is the frame */
	uint16_t fr_previous, fr_code, fr_owner;
	uint8_t owner_shim; /* frames owned by the C stack (3.12+), 0 if none */
	uint16_t co_name;
	uint16_t str_ascii_data; /* where a compact ASCII string's characters start */
};

enum census_rg { CENSUS_RG_NO = 0, CENSUS_RG_YES = 1, CENSUS_RG_UNKNOWN = 2 };

struct census_tensor {
	uint64_t obj;	  /* the Python object (THPVariable) */
	uint64_t impl;	  /* its TensorImpl */
	uint64_t storage; /* its StorageImpl: views of one storage share it */
	uint64_t data;	  /* the storage's data pointer */
	uint64_t nbytes;  /* the storage's size in bytes */
	int dev_type;	  /* c10::DeviceType: 0 CPU, 1 CUDA */
	int dev_index;
	int dtype; /* c10::ScalarType; -1 unknown */
	int ndim;  /* -1 when the shape was not read */
	int64_t sizes[CENSUS_MAX_DIMS];
	int64_t numel, storage_offset;
	enum census_rg requires_grad;
	bool grad_fn;	/* it has a grad_fn: the root of an autograd graph */
	bool cpp_owned; /* C++ owns the Python object (PyTorch's PyObject preservation) */
	char type[48];	/* tp_name of its type */
	int nr_holders;
	char *holders[CENSUS_MAX_HOLDERS]; /* paths from a root, shortest first */
	int group;			   /* index in census.groups, -1 for none */
};

/* Tensors held directly by one container or name. */
struct census_group {
	char *path;	  /* the container (or the name) */
	const char *kind; /* "list", "tuple", "dict", "attribute", "local", "cell" */
	uint64_t length;  /* items of the container, 0 for a name */
	int tensors, storages;
	uint64_t bytes; /* bytes of the distinct storages */
};

#define CENSUS_MAX_NOT_ENTERED 256

/* References the walk did not follow: to containers of a type it does not enter. */
struct census_not_entered {
	char type[48]; /* tp_name */
	uint64_t refs;
};

struct census {
	int minor;
	struct census_tensor *tensors;
	size_t nr_tensors;
	struct census_group *groups;
	size_t nr_groups;
	char **graphs; /* paths of Python-held tensors with a grad_fn, "...grad_fn" */
	size_t nr_graphs;
	size_t nr_storages;
	uint64_t bytes;		  /* bytes of the distinct storages */
	int orphan_tensors;	  /* tensors with no Python holder */
	uint64_t orphan_bytes;	  /* storages held by no Python-held tensor */
	uint64_t gc_objects;	  /* entries of the GC lists */
	uint64_t objects_visited; /* GC entries and objects reached from the roots */
	uint64_t bytes_read;
	uint64_t elapsed_ns;
	int threads;		  /* thread states whose frames were read */
	const char *truncated_by; /* NULL, or the cap that stopped the walk */
	bool torn;		  /* a GC list's links disagreed: the heap changed while read */
	bool layout_ok;		  /* the PyTorch layout was found and checked */
	char layout_error[256];	  /* why not, when tensors exist and it was not */
	/* the layout found (offsets into THPVariable, TensorImpl, StorageImpl) */
	int off_cdata, off_pyobj, off_sizes, off_storage, off_autograd;
	bool one_refcount_word; /* TensorImpl/StorageImpl keep both counts in one word */
	int off_st_data, off_st_device, off_st_nbytes;
	int off_requires_grad; /* AutogradMeta::requires_grad_, -1: not proved (leaves unknown) */
	/* containers reached but not entered (a set, a deque, a class with __slots__, an
	 * extension's type): a tensor only they hold shows with no Python holder */
	struct census_not_entered not_entered[CENSUS_MAX_NOT_ENTERED];
	int nr_not_entered;	    /* most referenced first */
	uint64_t not_entered_other; /* references to further types */
	int tensors_checked;	    /* tensors the layout was checked against */
	int tensors_failed;	    /* tensors that contradicted it (freed or changed while read) */
};

/*
 * Walks the heap of the interpreter py through m within caps. Returns 0 and
 * fills *out (census__free() frees it, also on error); -ENOTSUP when the
 * interpreter's collector is not one the walk knows (out->layout_error says
 * why); -EFAULT when the interpreter state cannot be read; -ENOMEM. Stopping
 * at a cap is not an error: out->truncated_by names the cap. An unverified
 * PyTorch layout is not an error either: out->layout_ok is false and no
 * tensor figure is filled.
 */
int census__walk(const struct census_mem *m, const struct census_py *py,
		 const struct census_caps *caps, struct census *out);
void census__free(struct census *c);

/* c10::ScalarType's name and item size; NULL and 0 for an unknown one. */
const char *census__dtype_name(int dtype);
int census__dtype_size(int dtype);
/* c10::DeviceType's name: "cpu", "cuda", ...; "unknown" otherwise. */
const char *census__device_name(int dev_type);

#endif /* GL_CENSUS_H */
