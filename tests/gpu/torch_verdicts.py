#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""PyTorch processes for gpuleak's leak verdicts: five classic leaks and one healthy loop.

    torch_verdicts.py --case NAME --go FILE [--step-s S]

It initializes CUDA, says "ready <pid>", waits for the file --go to exist (the tracer
attaches in between), then runs its loop, one step every --step-s seconds, until killed.
Cases (the expected verdict of the process's most suspicious stack in brackets):
  outputs      a list that keeps every step's output on the GPU, graph and all [leak]
  loss         validation without torch.no_grad(): total_loss += loss keeps every step's
               graph and the activations it saved [leak]
  rnn          an RNN whose hidden state is never detached: backward(retain_graph=True)
               every step keeps the whole history [leak]
  activations  a module that stores its activations "for debugging" [leak]
  pinned       a pinned host buffer kept every step (host_pinned memory) [leak]
  healthy      a training loop with an optimizer and torch.cuda.empty_cache() every 25
               steps [anything but leak]
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

WIDTH = 2048
BATCH = 512  # a 2048-wide activation of 512 rows is 4 MiB


def mlp():
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH)).cuda()


def batch():
    return torch.randn(BATCH, WIDTH, device="cuda")


class Remembering(nn.Module):
    """Keeps what its forward pass sees, for a debugging session long over."""

    def __init__(self):
        super().__init__()
        self.net = mlp()
        self.seen = []

    def forward(self, x):
        y = self.net(x)
        self.seen.append(y)
        return y


def case_outputs():
    model, outputs = mlp(), []

    def step():
        outputs.append(model(batch()))
    return step


def case_loss():
    model, total = mlp(), {"loss": 0}

    def step():
        x = batch()
        loss = (model(x) - x).pow(2).mean()
        total["loss"] += loss  # should be loss.item(), under torch.no_grad()
    return step


def case_rnn():
    # no optimizer step: it would change weights the retained graph saved, and backward fails
    rnn = nn.GRU(512, 512, batch_first=True).cuda()
    state = {"h": torch.zeros(1, 64, 512, device="cuda")}

    def step():
        x = torch.randn(64, 8, 512, device="cuda")
        out, state["h"] = rnn(x, state["h"])  # should be state["h"].detach()
        loss = out.pow(2).mean()
        loss.backward(retain_graph=True)  # the error message said to add it
    return step


def case_activations():
    model = Remembering()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        x = batch()
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def case_pinned():
    kept = []

    def step():
        kept.append(torch.empty(4 << 20, dtype=torch.uint8).pin_memory())
    return step


def case_healthy():
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    n = {"step": 0}

    def step():
        x = batch()
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        n["step"] += 1
        if n["step"] % 25 == 0:
            torch.cuda.empty_cache()
    return step


CASES = {"outputs": case_outputs, "loss": case_loss, "rnn": case_rnn,
         "activations": case_activations, "pinned": case_pinned, "healthy": case_healthy}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--go", required=True)
    ap.add_argument("--step-s", type=float, default=0.1)
    args = ap.parse_args()

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(args.go):
        if time.monotonic() > deadline:
            sys.exit(f"torch_verdicts: timed out waiting for {args.go}")
        time.sleep(0.02)

    step = CASES[args.case]()
    next_t = time.monotonic()
    while True:
        step()
        torch.cuda.synchronize()
        next_t += args.step_s
        time.sleep(max(0.0, next_t - time.monotonic()))


if __name__ == "__main__":
    main()
