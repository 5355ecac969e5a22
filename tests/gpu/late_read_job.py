#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""late_read.sh's job: each step's 512 MiB output kept on the GPU (the leak), a step each
20 ms, until the device is full. Touches READY once CUDA is up, waits for GO, touches OOM
at its out-of-memory error and waits there to be killed."""
import os
import time

import torch

kept = []


def train_step():
    out = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    kept.append(out)  # the leak: the output stays referenced


def main():
    torch.ones(1, device="cuda")
    open(os.environ["READY"], "w").close()
    while not os.path.exists(os.environ["GO"]):
        time.sleep(0.05)
    try:
        while True:
            train_step()
            time.sleep(0.02)
    except torch.OutOfMemoryError:
        open(os.environ["OOM"], "w").close()
        time.sleep(300)


main()
