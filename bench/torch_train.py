#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A small transformer training loop on one GPU, timed per step: the load for the
step-time slowdown that gpuleak (attached from outside) and PyTorch's own
torch.cuda.memory._record_memory_history() cause. Run by bench/gpu.py.

    torch_train.py [--steps N] [--warmup N] [--record-history] [--go FILE]

--go FILE: print "ready PID" after building the model and wait until FILE exists
(the tracer attaches in between). Step time is wall time with a synchronize at the end
of each step. Prints one line to stdout:
    steps=N median_step_ms=X mean_step_ms=Y p90_step_ms=Z
"""
import argparse
import os
import statistics
import sys
import time

import torch


def build(d_model=1024, layers=8, heads=16):
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, batch_first=True,
                                             dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model, opt, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--record-history", action="store_true")
    ap.add_argument("--history-stacks", default="all", choices=("all", "python"),
                    help="the stacks _record_memory_history() records")
    ap.add_argument("--go", default="")
    a = ap.parse_args()

    torch.manual_seed(0)
    model, opt = build()
    x = torch.randn(a.batch, a.seq, 1024, device="cuda")
    if a.go:
        print(f"ready {os.getpid()}", flush=True)
        while not os.path.exists(a.go):
            time.sleep(0.01)
    if a.record_history:
        torch.cuda.memory._record_memory_history(max_entries=100000, stacks=a.history_stacks)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        train_step(model, opt, x)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    if a.record_history:
        torch.cuda.memory._record_memory_history(enabled=None)
    times.sort()
    print(f"steps={len(times)} median_step_ms={statistics.median(times) * 1e3:.3f} "
          f"mean_step_ms={statistics.mean(times) * 1e3:.3f} "
          f"p90_step_ms={times[int(len(times) * 0.9)] * 1e3:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
