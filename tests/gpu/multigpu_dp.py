#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""nn.DataParallel on devices 0 and 1 with output_device 0, whose gathered outputs are kept:
device 0 climbs, device 1 does not (no_grad: no graph keeps the replicas' activations).

It says "ready <pid>" before touching CUDA, waits for the file --go (a tracer attaches in
between, so that it sees every context made), runs --steps forwards, then writes PyTorch's
view per device (torch.cuda.memory_stats) and the marked line to --done as JSON and waits
for --exit before leaving.
"""
import argparse
import inspect
import json
import os
import sys
import time

import torch
from torch import nn


def wait_for(path, timeout=240):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"multigpu_dp: timed out waiting for {path}")
        time.sleep(0.02)


def stats(dev):
    s = torch.cuda.memory_stats(dev)
    return {"reserved": s.get("reserved_bytes.all.current", 0),
            "allocated": s.get("allocated_bytes.all.current", 0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--done", required=True)
    ap.add_argument("--exit", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=2048, help="rows of a step's output")
    args = ap.parse_args()
    print(f"ready {os.getpid()}", flush=True)
    wait_for(args.go)
    if torch.cuda.device_count() < 2:
        sys.exit("multigpu_dp: needs two GPUs")
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096)).cuda(0)
    dp = nn.DataParallel(model, device_ids=[0, 1], output_device=0)
    x = torch.randn(args.batch, 4096, device="cuda:0")
    kept = []
    start = [stats(d) for d in (0, 1)]
    with torch.no_grad():
        for _ in range(args.steps):
            mark = inspect.currentframe().f_lineno + 1
            kept.append(dp(x))  # GATHER-MARK: outputs gathered on device 0, kept
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
    out = {"pid": os.getpid(), "file": os.path.abspath(__file__), "mark_line": mark,
           "step_bytes": args.batch * 4096 * 4, "steps": args.steps,
           "start": start, "devices": [stats(d) for d in (0, 1)]}
    with open(args.done + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(args.done + ".tmp", args.done)
    wait_for(args.exit)


if __name__ == "__main__":
    main()
