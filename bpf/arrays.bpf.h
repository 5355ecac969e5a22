/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * arrays.bpf.h - the bytes of a CUDA array, 3D array or mipmapped array, read
 * from its descriptor in user memory.
 */
#ifndef GPULEAK_ARRAYS_BPF_H
#define GPULEAK_ARRAYS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

static __always_inline __u64 array_elem_size(__u32 format)
{
	switch (format) {
	case 0x01:
	case 0x08: return 1; /* (un)signed int8 */
	case 0x02:
	case 0x09:
	case 0x10: return 2; /* int16, half */
	case 0x03:
	case 0x0a:
	case 0x20: return 4; /* int32, float */
	default: return 4;
	}
}

struct array3d_desc {
	__u64 width, height, depth;
	__u32 format, channels, flags;
};

struct mip_walk {
	__u64 width, height, depth, elem, total;
};

/* One mip level: add its bytes, halve the extents for the next. */
static long mip_level(__u32 i, void *data)
{
	struct mip_walk *m = data;

	m->total += m->width * (m->height ? m->height : 1) * (m->depth ? m->depth : 1) * m->elem;
	m->width = m->width > 1 ? m->width / 2 : 1;
	m->height = m->height > 1 ? m->height / 2 : m->height;
	m->depth = m->depth > 1 ? m->depth / 2 : m->depth;
	return 0;
}

/*
 * Bytes of a CUDA array: width x height x depth x element size, summed over mip levels
 * (at most 16). The levels are a bpf_loop callback, verified once: an unrolled loop of
 * branchy halvings made this function most of the verifier's work at attach.
 */
static __noinline __u64 array_bytes(__u64 desc_ptr, bool is3d, __u32 levels)
{
	struct array3d_desc d = {};
	struct mip_walk m = {};

	if (is3d) {
		if (bpf_probe_read_user(&d, sizeof(d), (void *)desc_ptr))
			return 0;
	} else {
		struct {
			__u64 width, height;
			__u32 format, channels;
		} d2;

		if (bpf_probe_read_user(&d2, sizeof(d2), (void *)desc_ptr))
			return 0;
		d.width = d2.width;
		d.height = d2.height;
		d.format = d2.format;
		d.channels = d2.channels;
	}
	m.width = d.width;
	m.height = d.height;
	m.depth = d.depth;
	m.elem = array_elem_size(d.format) * d.channels;
	bpf_loop(levels < 16 ? levels : 16, mip_level, &m, 0);
	return m.total;
}

#endif /* GPULEAK_ARRAYS_BPF_H */
