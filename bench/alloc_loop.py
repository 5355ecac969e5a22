#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The Python load of gpuleak's benchmarks: cuMemAlloc_v2 + cuMemFree_v2 pairs
through ctypes, a few Python frames deep (as a training script's allocation is).

    alloc_loop.py [--lib PATH] [--pairs N] [--size BYTES] [--warmup N] [--torch]

--torch allocates through PyTorch instead (torch.empty on the GPU, then del) with its
caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), so that every tensor is one
cudaMalloc -> cuMemAlloc_v2 and one cudaFree -> cuMemFree_v2 of the real driver.

Prints one line to stdout, like bench/alloc_loop.c:
    pairs=N threads=1 seconds=S ns_per_pair=X cpu_ns_per_pair=C pairs_per_s=Y
"""
import argparse
import ctypes
import os
import sys
import time


def check(rc, call):
    if rc:
        sys.exit(f"alloc_loop.py: {call} failed: CUDA error {rc}")


class Driver:
    """Device memory straight from the driver through ctypes."""

    def __init__(self, path):
        cu = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        ctx, dev = ctypes.c_void_p(), ctypes.c_int(0)
        check(cu.cuInit(0), "cuInit")
        check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.cu = cu

    def block(self, size):
        ptr = ctypes.c_uint64()
        check(self.cu.cuMemAlloc_v2(ctypes.byref(ptr), size), "cuMemAlloc_v2")
        return ptr

    def release(self, ptr):
        check(self.cu.cuMemFree_v2(ptr.value), "cuMemFree_v2")


class Torch:
    """Device memory as PyTorch tensors, one driver allocation each (no caching)."""

    def __init__(self):
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        import torch
        self.torch = torch
        torch.empty(1, device="cuda")

    def block(self, size):
        return self.torch.empty(size, dtype=self.torch.uint8, device="cuda")

    def release(self, t):
        del t


def layer(mem, size):
    mem.release(mem.block(size))


def step(mem, size, n):
    for _ in range(n):
        layer(mem, size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="libcuda.so.1")
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--size", type=int, default=2 << 20)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    mem = Torch() if a.torch else Driver(a.lib)
    step(mem, a.size, a.warmup)
    cpu0, t0 = time.thread_time(), time.perf_counter()
    step(mem, a.size, a.pairs)
    dt, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    print(f"pairs={a.pairs} threads=1 seconds={dt:.6f} ns_per_pair={dt * 1e9 / a.pairs:.1f} "
          f"cpu_ns_per_pair={cpu * 1e9 / a.pairs:.1f} pairs_per_s={a.pairs / dt:.0f}",
          flush=True)


if __name__ == "__main__":
    main()
