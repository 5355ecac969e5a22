# SPDX-License-Identifier: BSD-2-Clause
"""A real PyTorch program (CPU) whose tensors gpuleak's books know: each step makes a
tensor and declares its storage to the PyTorch allocator stand-in (the libc10_cuda.so of
tests/fakecuda/faketorch.c) as a block at the storage's own address, through the
stand-in's pytorch:malloc probe, on the line after the tensor is made; then keeps it in
a list, a leak that grows every --interval-ms. The census joins each tensor's storage
with the block by its data pointer: the line that "allocated" it beside the holder.

The declaration goes through a helper module installed in a site-packages folder under
--libdir, as an allocation goes through torch.nn: the line named must be grow()'s call, the
program's own innermost frame, not the library's.

Also: `early`, declared before the tracer attached (its probe fired for no one), and
`plain`, never declared: neither is in the books.

Protocol: set up the CUDA stand-in, write the truth (--truth: the lines and addresses),
say "ready PID", wait for a line, then grow until --steps steps are made, say "grown",
then wait on stdin until it closes.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import torch

ALLOC_LINE = None
HISTORY = []


def declare(lib, t):
    lib.faketorch_malloc(ctypes.c_void_p(t.data_ptr()), 0,
                         ctypes.c_uint64(t.untyped_storage().nbytes()
                                         if hasattr(t, "untyped_storage")
                                         else t.storage().nbytes()), 0)


LIBRARY = """import ctypes


def declare(lib, t, nbytes):
    lib.faketorch_malloc(ctypes.c_void_p(t.data_ptr()), 0, ctypes.c_uint64(nbytes), 0)
"""


def install_library(libdir):
    """A module in DIR/site-packages (a library's file, as gpuleak tells them apart)."""
    d = os.path.join(libdir, "site-packages")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "blockdecl.py"), "w") as f:
        f.write(LIBRARY)
    sys.path.insert(0, d)
    import blockdecl
    return blockdecl


def grow(lib, decl, steps, interval):
    for i in range(steps):
        t = torch.full((4096,), float(i))
        decl.declare(lib, t, 4096 * 4)  # the allocating line
        HISTORY.append(t)
        time.sleep(interval)


def main():
    global ALLOC_LINE
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--torch-lib", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--interval-ms", type=int, default=50)
    args = ap.parse_args()
    decl = install_library(args.libdir)
    cuda = ctypes.CDLL(args.lib)
    lib = ctypes.CDLL(args.torch_lib)
    ctx = ctypes.c_void_p()
    if cuda.cuInit(0) or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) or \
            cuda.cuCtxSetCurrent(ctx):
        sys.exit("py_census_join: the CUDA stand-in did not start")
    g = globals()
    g["early"] = torch.ones(1000)
    declare(lib, g["early"])
    g["plain"] = torch.zeros(300)
    code = grow.__code__
    src = open(code.co_filename).read().splitlines()
    line = next(i for i in range(code.co_firstlineno, len(src) + 1)
                if "# the allocating line" in src[i - 1])
    with open(args.truth, "w") as f:
        json.dump({"alloc_site": f"grow ({code.co_filename}:{line})",
                   "early": g["early"].data_ptr(), "plain": g["plain"].data_ptr()}, f)
    print(f"ready {os.getpid()}", flush=True)
    sys.stdin.readline()
    grow(lib, decl, args.steps, args.interval_ms / 1000)
    print("grown", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
