#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""PyTorch programs that run out of GPU memory for a known reason, or hold memory outside
PyTorch, for `gpuleak attach` and its breakdown and out-of-memory causes.

    explain_cases.py --case NAME --go FILE --result FILE

It initializes CUDA, says "ready <pid>", waits for the file --go (the tracer attaches in
between), runs the case, writes its own figures (torch.cuda.memory_stats, the steps done,
the error) as JSON to --result, says "done" and sleeps until killed. Cases:
  leak         2 GiB kept per step (10 steps/s) in a list until the device is full [leak]
  frag         1200 MiB segments, each split into two 600 MiB tensors of which one is freed
               (the next step's 600 MiB reuses that half): when the device is full, a
               1200 MiB request fails although the reserve has 1200 MiB free in two split
               halves [fragmentation]; with expandable segments nothing stays stranded
  libraries    cuBLAS (a matmul) and CuPy (256 MiB through its pool) beside PyTorch [no OOM;
               memory outside PyTorch by library]
Run frag with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to see it avoided.
"""
import argparse
import json
import os
import sys
import time

import torch

MIB = 1 << 20


def stats():
    s = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {"reserved": s.get("reserved_bytes.all.current", 0),
            "allocated": s.get("allocated_bytes.all.current", 0),
            "segments": s.get("segment.all.current", 0),
            "num_ooms": s.get("num_ooms", 0),
            "device_free": free, "device_total": total}


def oom_error():
    return getattr(torch.cuda, "OutOfMemoryError", RuntimeError)


def leak(res):
    kept = []
    try:
        while True:
            kept.append(torch.empty(2048 * MIB, dtype=torch.uint8, device="cuda"))
            res["steps"] = len(kept)
            time.sleep(0.1)  # steps a verdict can be drawn from
    except oom_error() as e:
        res["error"] = str(e).splitlines()[0]
    res["at_oom"] = stats()
    res["kept_bytes"] = sum(t.numel() for t in kept)
    return kept


def frag(res):
    kept = []
    try:
        while True:
            a = torch.empty(1200 * MIB, dtype=torch.uint8, device="cuda")
            del a
            b1 = torch.empty(600 * MIB, dtype=torch.uint8, device="cuda")
            b2 = torch.empty(600 * MIB, dtype=torch.uint8, device="cuda")
            kept.append(b2)
            del b1
            res["steps"] = len(kept)
    except oom_error() as e:
        res["error"] = str(e).splitlines()[0]
    res["at_oom"] = stats()
    res["kept_bytes"] = sum(t.numel() for t in kept)
    return kept


def libraries(res):
    a = torch.randn(4096, 4096, device="cuda")
    b = a @ a  # cuBLAS: its handle and workspace
    torch.cuda.synchronize()
    res["matmul"] = float(b[0, 0])
    try:
        import cupy
    except ImportError as e:
        res["cupy"] = f"not importable: {e}"
        return [a, b]
    x = cupy.zeros(256 * MIB, dtype=cupy.uint8)
    pool = cupy.get_default_memory_pool()
    res["cupy_pool_used"] = pool.used_bytes()
    res["cupy_pool_total"] = pool.total_bytes()
    return [a, b, x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=("leak", "frag", "libraries"))
    ap.add_argument("--go", required=True)
    ap.add_argument("--result", required=True)
    a = ap.parse_args()
    torch.zeros(1, device="cuda")
    res = {"pid": os.getpid(), "case": a.case,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "before": stats()}
    print(f"ready {os.getpid()}", flush=True)
    while not os.path.exists(a.go):
        time.sleep(0.02)
    keep = globals()[a.case](res)
    res["after"] = stats()
    with open(a.result, "w") as f:
        json.dump(res, f)
    print("done", flush=True)
    while keep is not None:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
