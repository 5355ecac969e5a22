# SPDX-License-Identifier: BSD-2-Clause
"""A real PyTorch program (CPU) that keeps a tensor a step in a list, then asks the CUDA
stand-in for more device memory than it has: the out-of-memory failure reaches the
program. Each step's tensor is declared to the PyTorch allocator stand-in (faketorch's
pytorch:malloc) as a block at its storage's own address, so that gpuleak's books know
it and the census can join it with the line that made it.

Under --census-on-oom gpuleak holds the process as the failing call returns, reads its
heap and lets it go: the program measures how long the call took from its side.

Protocol: set up the stand-ins, say "ready PID", wait for a line, make --steps steps,
write the truth (--truth: the list's length, the tensors' addresses, the line), ask for
the memory, say "failed RC MS" (the call's status and its duration in ms), then wait on
stdin until it closes.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import torch

results = []


def step(lib, i):
    t = torch.full((4096,), float(i))
    lib.faketorch_malloc(ctypes.c_void_p(t.data_ptr()), 0, ctypes.c_uint64(4096 * 4), 0)
    results.append(t)  # the leaking line: outputs kept in a list


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--torch-lib", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--interval-ms", type=int, default=10)
    args = ap.parse_args()
    cuda = ctypes.CDLL(args.lib)
    lib = ctypes.CDLL(args.torch_lib)
    ctx = ctypes.c_void_p()
    if cuda.cuInit(0) or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) or \
            cuda.cuCtxSetCurrent(ctx):
        sys.exit("py_oom_census: the CUDA stand-in did not start")
    print(f"ready {os.getpid()}", flush=True)
    sys.stdin.readline()
    for i in range(args.steps):
        step(lib, i)
        time.sleep(args.interval_ms / 1000)
    with open(args.truth, "w") as f:
        json.dump({"length": len(results), "data": [t.data_ptr() for t in results]}, f)
    dptr = ctypes.c_uint64()
    t0 = time.monotonic()
    rc = cuda.cuMemAlloc_v2(ctypes.byref(dptr), ctypes.c_uint64(1 << 50))
    ms = (time.monotonic() - t0) * 1000
    print(f"failed {rc} {ms:.1f}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
