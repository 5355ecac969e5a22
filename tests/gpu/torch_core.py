#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch process for checking gpuleak's accounting against PyTorch's own figures.

It initializes CUDA, says "ready <pid>", waits for the file --go to exist (the tracer
attaches in between), allocates and frees a mix of tensors, then writes PyTorch's view
(memory_reserved, memory_allocated, pinned bytes kept) to --done as JSON and waits for
--exit before leaving. The allocator is whatever PYTORCH_CUDA_ALLOC_CONF says. With
--devices N, the same mix runs on each of the first N devices, and the figures are
given per device too.
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
    ap.add_argument("--devices", type=int, default=1, help="run the mix on this many devices")
    args = ap.parse_args()
    if not 1 <= args.devices <= torch.cuda.device_count():
        sys.exit(f"torch_core: --devices {args.devices}: this machine has "
                 f"{torch.cuda.device_count()}")

    torch.cuda.init()
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    wait_for(args.go)

    keep = []
    pinned = []
    devices = [torch.device("cuda", d) for d in range(args.devices)]
    for step in range(20):
        for dev in devices:
            # a mix of small (<1 MiB: 2 MiB segments), medium and large blocks
            keep.append(torch.empty(256 * 1024, dtype=torch.uint8, device=dev))
            keep.append(torch.empty(3 * 1024 * 1024 + step * 4096, dtype=torch.uint8,
                                    device=dev))
            tmp = torch.empty(40 * 1024 * 1024, dtype=torch.uint8, device=dev)
            del tmp
            if step % 5 == 4:
                with torch.cuda.device(dev):
                    torch.cuda.empty_cache()
        if args.pinned:
            pinned.append(torch.empty(1 << 20, dtype=torch.uint8).pin_memory())
    for dev in devices:
        x = torch.randn(1024, 1024, device=dev)
        keep.append(x @ x)  # cuBLAS: a handle and its workspace per device
        torch.cuda.synchronize(dev)
    info = {
        "pid": os.getpid(),
        "memory_reserved": sum(torch.cuda.memory_reserved(d) for d in devices),
        "memory_allocated": sum(torch.cuda.memory_allocated(d) for d in devices),
        "per_device": [{"device": d.index, "memory_reserved": torch.cuda.memory_reserved(d),
                        "memory_allocated": torch.cuda.memory_allocated(d)} for d in devices],
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
