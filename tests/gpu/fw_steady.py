#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Steady services, which must draw no leak verdict: an inference loop with a preallocated
cache (a 256 MiB buffer kept for the whole run) and requests of random batch sizes, then a
small transformer trained on batches of random length (16 to 256 tokens). Memory goes up
and down and the caching allocator's reserve follows the largest request; nothing is kept
step after step. Protocol: fw_common.py."""
import random

import fw_common

fw_common.ready()

import torch  # noqa: E402

REQUESTS, TRAIN_STEPS, INTERVAL = 40, 30, 0.05


def serve(model, cache, rng):
    b = rng.randint(1, 64)
    x = torch.randn(b, 1024, device="cuda")
    with torch.no_grad():
        y = model(x)
    cache[: y.numel()].copy_(y.flatten())  # the answer goes through the cache
    return float(y[0, 0])


def train_step(layer, head, opt, rng):
    length = rng.randint(16, 256)
    x = torch.randn(16, length, 256, device="cuda")
    loss = head(layer(x)).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def main():
    rng = random.Random(7)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(),
                                torch.nn.Linear(2048, 1024)).cuda()
    cache = torch.empty(64 << 20, device="cuda")  # 256 MiB of float32, preallocated
    for _ in fw_common.steps(REQUESTS, INTERVAL):
        serve(model, cache, rng)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).cuda()
    head = torch.nn.Linear(256, 1).cuda()
    opt = torch.optim.AdamW(list(layer.parameters()) + list(head.parameters()), lr=1e-4)
    peak = 0
    for _ in fw_common.steps(TRAIN_STEPS, INTERVAL):
        train_step(layer, head, opt, rng)
        peak = max(peak, torch.cuda.memory_allocated())
    torch.cuda.synchronize()
    fw_common.done({
        "framework": "torch " + torch.__version__,
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "peak_allocated_in_training": peak,
        "cache_bytes": cache.numel() * cache.element_size(),
    })


if __name__ == "__main__":
    main()
