#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch process for checking gpuleak's accounting against PyTorch's own figures.

It initializes CUDA, says "ready <pid>", waits for the file --go to exist (the tracer
attaches in between), allocates and frees a mix of tensors, then writes PyTorch's view
(memory_reserved, memory_allocated, pinned bytes kept) to --done as JSON and waits for
--exit before leaving. The allocator is whatever PYTORCH_CUDA_ALLOC_CONF says.
"""
import argparse
import json
import os
import sys
import time

import torch


def wait_for(path, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"torch_core: timed out waiting for {path}")
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--done", required=True)
    ap.add_argument("--exit", required=True)
    ap.add_argument("--pinned", action="store_true", help="also keep pinned host buffers")
    args = ap.parse_args()

    torch.cuda.init()
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    wait_for(args.go)

    keep = []
    pinned = []
    for step in range(20):
        # a mix of small (<1 MiB: 2 MiB segments), medium and large blocks
        keep.append(torch.empty(256 * 1024, dtype=torch.uint8, device="cuda"))
        keep.append(torch.empty(3 * 1024 * 1024 + step * 4096, dtype=torch.uint8, device="cuda"))
        tmp = torch.empty(40 * 1024 * 1024, dtype=torch.uint8, device="cuda")
        del tmp
        if step % 5 == 4:
            torch.cuda.empty_cache()
        if args.pinned:
            pinned.append(torch.empty(1 << 20, dtype=torch.uint8).pin_memory())
    x = torch.randn(1024, 1024, device="cuda")
    y = x @ x  # cuBLAS: workspace from the caching allocator
    keep.append(y)
    torch.cuda.synchronize()
    info = {
        "pid": os.getpid(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "memory_allocated": torch.cuda.memory_allocated(),
        "pinned_buffers": len(pinned),
        "pinned_bytes": sum(p.numel() for p in pinned),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "torch": torch.__version__,
    }
    stats = torch.cuda.memory_stats()
    info["segments"] = stats.get("segment.all.current", -1)
    info["host_alloc_stats"] = {k: v for k, v in torch.cuda.host_memory_stats().items()
                                if "current" in k} if hasattr(torch.cuda, "host_memory_stats") else {}
    with open(args.done + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(args.done + ".tmp", args.done)
    wait_for(args.exit)


if __name__ == "__main__":
    main()
