#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The Python load of gpuleak's benchmarks: cuMemAlloc_v2 + cuMemFree_v2 pairs
through ctypes, a few Python frames deep (as a training script's allocation is).

    alloc_loop.py [--lib PATH] [--pairs N] [--size BYTES] [--warmup N]

Prints one line to stdout, like bench/alloc_loop.c:
    pairs=N threads=1 seconds=S ns_per_pair=X cpu_ns_per_pair=C pairs_per_s=Y
"""
import argparse
import ctypes
import sys
import time


def load(path):
    cu = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    ctx, dev = ctypes.c_void_p(), ctypes.c_int(0)
    check(cu.cuInit(0), "cuInit")
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return cu


def check(rc, call):
    if rc:
        sys.exit(f"alloc_loop.py: {call} failed: CUDA error {rc}")


class Block:
    """Device memory held by a Python object, as a framework's tensor storage is."""

    def __init__(self, cu, size):
        self.cu = cu
        self.ptr = ctypes.c_uint64()
        check(cu.cuMemAlloc_v2(ctypes.byref(self.ptr), size), "cuMemAlloc_v2")

    def release(self):
        check(self.cu.cuMemFree_v2(self.ptr.value), "cuMemFree_v2")


def layer(cu, size):
    Block(cu, size).release()


def step(cu, size, n):
    for _ in range(n):
        layer(cu, size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="libcuda.so.1")
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--size", type=int, default=2 << 20)
    ap.add_argument("--warmup", type=int, default=500)
    a = ap.parse_args()
    cu = load(a.lib)
    step(cu, a.size, a.warmup)
    cpu0, t0 = time.thread_time(), time.perf_counter()
    step(cu, a.size, a.pairs)
    dt, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    print(f"pairs={a.pairs} threads=1 seconds={dt:.6f} ns_per_pair={dt * 1e9 / a.pairs:.1f} "
          f"cpu_ns_per_pair={cpu * 1e9 / a.pairs:.1f} pairs_per_s={a.pairs / dt:.0f}",
          flush=True)


if __name__ == "__main__":
    main()
