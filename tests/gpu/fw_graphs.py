#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""CUDA graphs: every step captures a graph (torch.cuda.graph, which gives each graph a
private memory pool) and keeps it with its output at capture_graph; before the loop, one
capture is abandoned (an exception inside torch.cuda.graph) and retried
(abandoned_then_retried). gpuleak must attribute the kept pools to the capture's line and
agree with torch.cuda.memory_allocated()/memory_reserved(). Protocol: fw_common.py."""
import fw_common

fw_common.ready()

import torch  # noqa: E402

STEPS, INTERVAL = 20, 0.15


def capture_graph(model, x, kept):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(x) * 2.0  # LEAK: the graph's private pool, kept with the graph
    g.replay()
    kept.append((g, out))


def abandoned_then_retried(model, x):
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            model(x)
            raise RuntimeError("capture abandoned")
    except RuntimeError:
        pass
    del g
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(x)  # the retried capture: kept until the end, not per step
    g.replay()
    return g, out


def main():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    x = torch.randn(512, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(x)  # warm-up off the capture stream, as PyTorch's docs ask
    torch.cuda.current_stream().wait_stream(side)
    kept = []
    with torch.no_grad():
        retried = abandoned_then_retried(model, x)
        for _ in fw_common.steps(STEPS, INTERVAL):
            capture_graph(model, x, kept)
    torch.cuda.synchronize()
    fw_common.done({
        "framework": "torch " + torch.__version__,
        "graphs_kept": len(kept),
        "retried_kept": retried is not None,
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "site": "capture_graph",
    })


if __name__ == "__main__":
    main()
