#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""make_py_seeds.py DIR - writes the Python fuzz target's seed corpus (fuzz_python.c) into DIR:
the memory of a code object (qualname and filename str objects, line table bytes object) laid
out as CPython 3.10, 3.12 and 3.13 (its _Py_DebugOffsets block at the start of memory), with
and without type checks, and broken variants."""
import os
import struct
import sys

MEM_BASE = 0x10000
CODE = 1024  # the code object's offset in memory: after the debug-offsets block
TABLE_310 = bytes([4, 1, 12, 1, 8, 1, 10, 1, 2, 2, 2, 1, 2, 1, 2, 255, 6, 255, 2, 3, 0, 127,
                   172, 48, 16, 1])
TABLE_312 = bytes([128, 0, 216, 12, 13, 128, 69, 220, 13, 18, 144, 49, 139, 88, 242, 0, 6, 5,
                   19, 136, 1, 240, 94, 9, 0, 9, 106, 2, 248, 244, 95, 9, 0, 12, 29, 250])
# (word, value) of _Py_DebugOffsets of CPython 3.13.0, x86-64 release (tests/unit/test_python.c)
DEBUG_313 = [(1, 0x030d00f0), (2, 0), (3, 1200), (5, 632), (6, 8000), (8, 7264), (9, 7344),
             (19, 4000), (21, 8), (22, 16), (23, 72), (24, 152), (25, 160), (28, 80), (29, 8),
             (30, 0), (31, 56), (33, 70), (34, 208), (35, 112), (36, 120), (37, 128),
             (38, 136), (39, 68), (43, 200), (64, 40), (65, 16), (66, 32), (67, 64), (68, 32),
             (69, 16), (70, 40)]
# code object: filename, name, qualname, linetable, firstlineno, size;
# str: state, length, ascii data, compact data; bytes: size, data
LAYOUTS = {
    10: dict(co=(104, 112, 112, 120, 40, 128), str=(32, 16, 48, 72), bytes=(16, 32)),
    12: dict(co=(112, 120, 128, 136, 68, 144), str=(32, 16, 40, 56), bytes=(16, 32)),
}
LAYOUTS[13] = LAYOUTS[12]


def put(mem, off, fmt, *v):
    struct.pack_into(fmt, mem, off, *v)


def string(mem, off, lay, text, kind=1):
    state_off, len_off, ascii_data, compact_data = lay["str"]
    ascii = kind == 1 and all(ord(c) < 128 for c in text)
    put(mem, off + 8, "<Q", MEM_BASE)
    put(mem, off + len_off, "<Q", len(text))
    put(mem, off + state_off, "<I", kind << 2 | 1 << 5 | ascii << 6)
    data = off + (ascii_data if ascii else compact_data)
    enc = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
    mem[data:data + len(text) * kind] = text.encode(enc)
    return data + len(text) * kind


def memory(minor, table, qualname="Model.forward", filename="/app/train.py", kind=1):
    lay = LAYOUTS[minor]
    mem = bytearray(2048)
    if minor >= 13:
        mem[0:8] = b"xdebugpy"
        for word, v in DEBUG_313:
            put(mem, 8 * word, "<Q", v)
    fn_off, _, qn_off, lt_off, first_off, _ = lay["co"]
    put(mem, CODE + 8, "<Q", MEM_BASE)
    put(mem, CODE + first_off, "<i", 2)
    put(mem, CODE + qn_off, "<Q", MEM_BASE + 1300)
    put(mem, CODE + fn_off, "<Q", MEM_BASE + 1500)
    put(mem, CODE + lt_off, "<Q", MEM_BASE + 1700)
    string(mem, 1300, lay, qualname, kind)
    string(mem, 1500, lay, filename, kind)
    size_off, data_off = lay["bytes"]
    put(mem, 1700 + 8, "<Q", MEM_BASE)
    put(mem, 1700 + size_off, "<Q", len(table))
    mem[1700 + data_off:1700 + data_off + len(table)] = table
    return mem


def seed(dirname, name, mode, mem, lasti=5):
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(struct.pack("<BHI", mode, CODE, lasti) + bytes(mem))


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    typed = 8
    seed(d, "py310", typed | 0 << 1, memory(10, TABLE_310))
    seed(d, "py312", typed | 2 << 1, memory(12, TABLE_312))
    seed(d, "py312-untyped", 2 << 1, memory(12, TABLE_312))
    seed(d, "py312-ucs2-names", typed | 2 << 1, memory(12, TABLE_312, "f\u00e9\u4e2d", kind=2))
    seed(d, "py312-ucs4-names", typed | 2 << 1, memory(12, TABLE_312, "g\U0001f600", kind=4))
    seed(d, "py313-debug-offsets", typed | 1, memory(13, TABLE_312))
    seed(d, "py313-cut-in-code", typed | 1, memory(13, TABLE_312)[:CODE + 100])
    seed(d, "py313-cut-in-table", typed | 1, memory(13, TABLE_312)[:1700 + 40])
    bad = memory(12, TABLE_312)
    put(bad, 1300 + 16, "<Q", 1 << 40)  # a str length no string has
    seed(d, "py312-huge-str", typed | 2 << 1, bad)
    bad = memory(13, TABLE_312)
    put(bad, 8 * 67, "<Q", 1000)  # a str object of 1000 bytes, its length field at 128
    put(bad, 8 * 69, "<Q", 128)
    seed(d, "py313-odd-str-length-offset", typed | 1, bad)


if __name__ == "__main__":
    main()
