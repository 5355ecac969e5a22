// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_python.c - libFuzzer target: what gpuleak reads of a CPython
 * interpreter, on any memory. The input is
 *   byte 0:     bit 0: layout from _Py_DebugOffsets at the start of memory (else the
 *               3.10-3.12 table, minor from bits 1-2); bit 3: type addresses checked
 *   bytes 1-2:  offset of the code object in memory (little endian)
 *   bytes 3-6:  lasti of the frame
 *   the rest:   the target's memory, at MEM_BASE.
 * pyproc__read is replaced at link time (--wrap) by a reader of that memory.
 * The code object's line table, and the memory itself as a line table of
 * 3.10 and of 3.13, go through pyline__line.
 */
#include <errno.h>
#include <sys/types.h>
#include "fuzz.h"
#include "stacks/python/pycode.h"
#include "stacks/python/pyline.h"
#include "stacks/python/pyoffsets.h"

#define MEM_BASE 0x10000ULL
#define HDR 7

static const uint8_t *mem;
static size_t mem_len;

ssize_t __wrap_pyproc__read(int pid, uint64_t addr, void *buf, size_t len);

ssize_t __wrap_pyproc__read(int pid, uint64_t addr, void *buf, size_t len)
{
	uint64_t off = addr - MEM_BASE;

	if (addr < MEM_BASE || off >= mem_len)
		return -EFAULT;
	if (len > mem_len - off)
		len = mem_len - off;
	memcpy(buf, mem + off, len);
	return len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct py_target t = { 0 };
	struct py_layout l;
	struct py_code c;
	uint32_t lasti;
	uint16_t code_off;
	char *s;

	if (size < HDR)
		return 0;
	memcpy(&code_off, data + 1, 2);
	memcpy(&lasti, data + 3, 4);
	mem = data + HDR;
	mem_len = size - HDR;
	pyline__line(10, mem, mem_len, 1, lasti);
	pyline__line(13, mem, mem_len, 1, lasti);
	if (data[0] & 1) {
		if (pyoffsets__from_debug(mem, mem_len < PY_DEBUG_OFFSETS_BYTES ? mem_len :
						PY_DEBUG_OFFSETS_BYTES, &l))
			return 0;
	} else if (pyoffsets__table(10 + (data[0] >> 1) % 3, 0, &l)) {
		return 0;
	}
	if (data[0] & 8)
		t.code_type = t.str_type = t.bytes_type = MEM_BASE;
	s = pycode__read_str(1, &l, &t, MEM_BASE + code_off);
	free(s);
	if (pycode__read(1, &l, &t, MEM_BASE + code_off, &c))
		return 0;
	pyline__line(l.minor, c.table, c.len, c.firstlineno, lasti);
	pycode__clear(&c);
	return 0;
}
