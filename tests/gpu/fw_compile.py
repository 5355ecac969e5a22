#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""torch.compile(mode="reduce-overhead"): the compiled model runs through CUDA graph trees,
whose recordings allocate from one private memory pool. The model is first run a few times
at one shape (warm-up, then the recording: steady replays after that), then at a new batch
size each step with automatic dynamic shapes off, so that every step compiles and records
one more graph, kept for its replays (the real-world pattern: a graph per input shape).
gpuleak must put the pool's growth at run_new_shape, the caller's line (not in the code
Inductor generated), and agree with memory_reserved(). If Inductor cannot compile here, the cudagraphs backend (graph trees
without Inductor) stands in and the figures say so. Protocol: fw_common.py."""
import fw_common

fw_common.ready()

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

SHAPES, REPLAYS, INTERVAL = 14, 3, 0.15


def run_steady(compiled, x):
    return compiled(x)  # the first shape: warm-up, recording, then replays


def run_new_shape(compiled, x):
    return compiled(x)  # LEAK: one more recorded graph in the pool per new shape


def main():
    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.cache_size_limit = SHAPES + 4
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    backend, why = "inductor", None
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        x = torch.randn(64, 1024, device="cuda")
        try:
            run_steady(compiled, x)
        except Exception as e:  # no compiler for Inductor on this machine
            backend, why = "cudagraphs", f"{type(e).__name__}: {str(e)[:200]}"
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="cudagraphs")
        for _ in range(4):
            run_steady(compiled, x)
        # every input made before the reserve is read: their segments (one of 20 MiB
        # now and then, at this line) are not the pool's growth
        xs = [torch.randn(128 * (i + 2), 1024, device="cuda") for i in range(SHAPES)]
        torch.cuda.synchronize()
        reserved_steady = torch.cuda.memory_reserved()
        for i in fw_common.steps(SHAPES, INTERVAL):
            for _ in range(REPLAYS):
                run_new_shape(compiled, xs[i])
    torch.cuda.synchronize()
    fw_common.done({
        "framework": f"torch {torch.__version__}, torch.compile backend {backend}",
        "backend": backend,
        "inductor_error": why,
        "shapes": SHAPES,
        "reserved_after_first_shape": reserved_steady,
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "growth_bytes": torch.cuda.memory_reserved() - reserved_steady,
        "site": "run_new_shape",
    })


if __name__ == "__main__":
    main()
