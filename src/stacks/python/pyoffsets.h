/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pyoffsets.h - where CPython keeps what gpuleak reads: thread states and
 * frames (for the BPF walk) and code, str and bytes objects (for names and
 * lines), per version. 3.10 to 3.12 come from a table made from CPython's
 * headers for x86-64 release builds; 3.13 and later publish theirs in
 * _Py_DebugOffsets at the start of _PyRuntime.
 */
#ifndef GL_PYOFFSETS_H
#define GL_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "gpuleak_abi.h"

struct py_layout {
	uint32_t hexversion;	/* PY_VERSION_HEX, e.g. 0x030c03f0 */
	int minor;		/* 3.minor */
	struct gl_py_proc walk; /* BPF walk; runtime and start time are the caller's */
	uint16_t ts_interp;	/* PyThreadState: interp (to check the offsets) */
	uint16_t ob_type;	/* PyObject: ob_type */
	uint16_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
	uint16_t co_size; /* bytes of a code object that hold the fields above */
	uint16_t str_state, str_length;
	uint16_t str_ascii_data;   /* where a compact ASCII string's characters start */
	uint16_t str_compact_data; /* where other compact strings' characters start */
	uint16_t bytes_size, bytes_data;
};

/* Bytes of _PyRuntime to read for pyoffsets__from_debug(). */
#define PY_DEBUG_OFFSETS_BYTES 1024

/*
 * The layout of CPython 3.minor for minor 10 to 12. Returns 0, or -ENOTSUP
 * for another version.
 */
int pyoffsets__table(int minor, uint32_t hexversion, struct py_layout *out);

/*
 * The layout from the _Py_DebugOffsets found at the start of _PyRuntime
 * (buf[0..len)), for 3.13 and later. Returns 0; -ENOENT if there is no
 * cookie; -ENOTSUP for a free-threaded build or a layout gpuleak does not
 * know; -EINVAL when the offsets are not plausible.
 */
int pyoffsets__from_debug(const void *buf, size_t len, struct py_layout *out);

#endif /* GL_PYOFFSETS_H */
