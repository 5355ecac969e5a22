#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch training loop for the fleet-agent check: --leak keeps one tensor per step
(its memory climbs, with empty_cache() so the caching allocator gives the rest back);
without it, the step's tensors are freed. Runs --seconds, one step every --interval."""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--mib", type=int, default=16)
    a = ap.parse_args()
    dev = torch.device("cuda")
    model = torch.nn.Linear(1024, 1024).to(dev)
    kept = []
    end = time.time() + a.seconds
    while time.time() < end:
        x = torch.randn(256, 1024, device=dev)
        y = model(x).sum()
        y.backward()
        # a separate allocation per step: 16 MiB of activations "kept for logging"
        buf = torch.empty(a.mib << 18, dtype=torch.float32, device=dev)
        if a.leak:
            kept.append(buf)
        del buf, x, y
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        time.sleep(a.interval)


if __name__ == "__main__":
    main()
