#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch job whose leak the CUDA driver never sees: a warm-up allocates and frees as
many small tensors as the leak will keep, so the caching allocator's small pool (2 MiB
segments) holds room for them; then each step keeps one 256 KiB tensor, carved from
those cached segments. Only the allocator's USDT probes (pytorch:malloc/free) show it.

Says "ready <pid>" after CUDA is initialized (before any allocation), waits for --go,
runs --steps steps, writes PyTorch's own figures to --done and waits for --exit."""
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
            sys.exit(f"torch_blocks: timed out waiting for {path}")
        time.sleep(0.02)


def keep_for_later(kept, x):
    kept.append(x * 2)  # LEAK: one 256 KiB tensor per step, inside a cached segment


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--done", required=True)
    ap.add_argument("--exit", required=True)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()

    torch.cuda.init()
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    wait_for(args.go)

    x = torch.ones(64 * 1024, device="cuda")  # 256 KiB of float32
    warm = [torch.empty_like(x) for _ in range(args.steps + 8)]
    del warm  # their 2 MiB segments stay cached: the leak below fits in them
    reserved_after_warmup = torch.cuda.memory_reserved()
    kept = []
    for _ in range(args.steps):
        keep_for_later(kept, x)
        time.sleep(0.05)
    torch.cuda.synchronize()
    info = {
        "pid": os.getpid(),
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "reserved_after_warmup": reserved_after_warmup,
        "kept": len(kept),
        "kept_bytes": sum(t.numel() * t.element_size() for t in kept),
    }
    with open(args.done + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(args.done + ".tmp", args.done)
    wait_for(args.exit)


if __name__ == "__main__":
    main()
