#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""JAX keeps one result a step at keep_result. Under JAX's defaults XLA preallocates 75 %
of the device in one block, so gpuleak sees one allocation and must say that growth inside
XLA's pool is invisible (and how to see it); with XLA_PYTHON_CLIENT_PREALLOCATE=false and
XLA_PYTHON_CLIENT_ALLOCATOR=platform (set by frameworks.sh for case jax_platform) every
result is its own driver allocation and the leak must be named at keep_result's line,
whichever thread XLA allocates on. With FW_PRE set (case jax_late) the job starts JAX and
keeps results before gpuleak attaches (its figures then go to $FW_PRE): gpuleak cannot
see that pool and must say so. Protocol: fw_common.py."""
import json
import os

import fw_common

LATE = bool(os.environ.get("FW_LATE"))
if LATE:
    print(f"ready {os.getpid()}", flush=True)
else:
    fw_common.ready()  # before JAX's backend exists: the preallocation happens after attach

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

STEPS, INTERVAL, N = 24, 0.15, 1 << 20  # 4 MiB of float32 a step


@jax.jit
def step(x, i):
    return x * i + 1.0


def keep_result(kept, x, i):
    kept.append(step(x, i).block_until_ready())  # LEAK: one result a step


def main():
    dev = jax.devices()[0]
    x = jnp.ones((N,), dtype=jnp.float32)
    kept = []
    if LATE:
        for i in range(4):
            keep_result(kept, x, float(i))
        with open(os.environ["FW_PRE"] + ".tmp", "w") as f:
            json.dump({"kept_before_attach": len(kept)}, f)
        os.rename(os.environ["FW_PRE"] + ".tmp", os.environ["FW_PRE"])
        fw_common.wait_for(os.environ["FW_GO"])
    for i in fw_common.steps(STEPS, INTERVAL):
        keep_result(kept, x, float(i))
    stats = dev.memory_stats() or {}
    fw_common.done({
        "framework": f"jax {jax.__version__} on {jax.default_backend()} ({dev.device_kind})",
        "allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default (bfc)"),
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true"),
        "kept": len(kept),
        "kept_bytes": sum(a.nbytes for a in kept),
        "bytes_in_use": stats.get("bytes_in_use"),
        "bytes_limit": stats.get("bytes_limit"),
        "pool_bytes": stats.get("pool_bytes"),
        "bytes_reserved": stats.get("bytes_reserved"),
        "site": "keep_result",
    })


if __name__ == "__main__":
    main()
