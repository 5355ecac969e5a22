#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""PyTorch and CuPy in one process, each keeping one buffer a step at its own line
(keep_torch, keep_cupy): one report must name both leaks, each at its line, with figures
beside PyTorch's memory_allocated() and CuPy's pool counters. Protocol: fw_common.py."""
import fw_common

fw_common.ready()

import cupy  # noqa: E402
import torch  # noqa: E402

STEPS, INTERVAL, N = 24, 0.15, 1 << 20  # 4 MiB of float32 each


def keep_torch(kept, i):
    kept.append(torch.full((N,), float(i), device="cuda"))  # LEAK: torch tensor


def keep_cupy(kept, i):
    kept.append(cupy.full((N,), i, dtype=cupy.float32))  # LEAK: CuPy array


def main():
    torch.cuda.init()
    ts, cs = [], []
    for i in fw_common.steps(STEPS, INTERVAL):
        keep_torch(ts, i)
        keep_cupy(cs, i)
    torch.cuda.synchronize()
    mp = cupy.get_default_memory_pool()
    fw_common.done({
        "framework": f"torch {torch.__version__} + cupy {cupy.__version__}",
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "cupy_used_bytes": mp.used_bytes(),
        "cupy_total_bytes": mp.total_bytes(),
        "sites": {"keep_torch": sum(t.numel() * t.element_size() for t in ts),
                  "keep_cupy": sum(a.nbytes for a in cs)},
    })


if __name__ == "__main__":
    main()
