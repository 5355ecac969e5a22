#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""CuPy keeps memory three ways, one a step each: an array through CuPy's default memory
pool (keep_pool), raw device memory through cupy.cuda.runtime.malloc (keep_raw), and
pinned host memory through CuPy's pinned memory pool (keep_pinned). gpuleak must name each
leak at its line; the figures beside it are CuPy's own pool counters. Protocol:
fw_common.py."""
import fw_common

fw_common.ready()

import cupy  # noqa: E402

STEPS, INTERVAL = 24, 0.15
POOL_N, RAW_BYTES, PINNED_BYTES = 1 << 20, 3 << 20, 2 << 20  # 4 MiB, 3 MiB, 2 MiB


def keep_pool(kept, i):
    kept.append(cupy.full((POOL_N,), i, dtype=cupy.float32))  # LEAK: pool array


def keep_raw(kept):
    kept.append(cupy.cuda.runtime.malloc(RAW_BYTES))  # LEAK: raw cudaMalloc


def keep_pinned(kept):
    kept.append(cupy.cuda.alloc_pinned_memory(PINNED_BYTES))  # LEAK: pinned pool


def main():
    cupy.cuda.Device(0).use()
    pool, pinned = [], []
    raw = []
    for i in fw_common.steps(STEPS, INTERVAL):
        keep_pool(pool, i)
        keep_raw(raw)
        keep_pinned(pinned)
    cupy.cuda.Device(0).synchronize()
    mp = cupy.get_default_memory_pool()
    fw_common.done({
        "framework": "cupy " + cupy.__version__,
        "pool_used_bytes": mp.used_bytes(),
        "pool_total_bytes": mp.total_bytes(),
        "pool_kept_bytes": sum(a.nbytes for a in pool),
        "raw_kept_bytes": len(raw) * RAW_BYTES,
        "pinned_kept_bytes": len(pinned) * PINNED_BYTES,
        "pinned_free_blocks": cupy.get_default_pinned_memory_pool().n_free_blocks(),
        "sites": {"keep_pool": sum(a.nbytes for a in pool), "keep_raw": len(raw) * RAW_BYTES,
                  "keep_pinned": len(pinned) * PINNED_BYTES},
    })


if __name__ == "__main__":
    main()
