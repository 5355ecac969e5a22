#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A 2-rank DDP job (torchrun --nproc_per_node 2, NCCL), rank r on GPU LOCAL_RANK; rank 1
keeps a 16 MiB tensor per step at the marked line, rank 0 keeps nothing.

Each rank measures what creating its NCCL communicator cost (nvidia-smi's figure for the
process before and after init_process_group and a first all_reduce, less PyTorch's own
growth in between), runs --steps DDP steps, writes its figures (torch.cuda.memory_stats,
the NCCL delta, the marked line) to DIR/rankR.json and waits for --exit. NVLink
multicast must be off in the environment (run-multigpu.sh sets it).
"""
import argparse
import inspect
import json
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch import nn


def smi_used(pid):
    """nvidia-smi's used memory of pid, bytes, over every GPU (None: not listed)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = [int(f.split(",")[1]) << 20 for f in out.splitlines()
            if f.split(",")[0].strip() == str(pid)]
    return sum(used) if used else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--exit", required=True)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)  # the context
    torch.cuda.synchronize()
    time.sleep(0.5)
    before, res0 = smi_used(os.getpid()), torch.cuda.memory_reserved(dev)
    dist.init_process_group("nccl", device_id=dev)
    t = torch.ones(1, device=dev)
    dist.all_reduce(t)  # the communicator exists after the first collective
    torch.cuda.synchronize()
    time.sleep(0.5)
    after, res1 = smi_used(os.getpid()), torch.cuda.memory_reserved(dev)
    model = nn.parallel.DistributedDataParallel(nn.Linear(2048, 2048).to(dev),
                                                device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    leak = []
    mark = None
    for _ in range(args.steps):
        loss = model(torch.randn(256, 2048, device=dev)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == 1:
            mark = inspect.currentframe().f_lineno + 1
            leak.append(torch.empty(16 << 20, dtype=torch.uint8, device=dev))  # LEAK-MARK
    torch.cuda.synchronize()
    s = torch.cuda.memory_stats(dev)
    out = {"rank": rank, "local_rank": local, "pid": os.getpid(), "ppid": os.getppid(),
           "file": os.path.abspath(__file__), "mark_line": mark, "leak_bytes": len(leak) << 24,
           "reserved": s.get("reserved_bytes.all.current", 0),
           "allocated": s.get("allocated_bytes.all.current", 0),
           "smi_before": before, "smi_after": after, "torch_growth": res1 - res0,
           "nccl_smi_delta": None if before is None or after is None
           else after - before - (res1 - res0)}
    path = os.path.join(args.dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(path + ".tmp", path)
    while not os.path.exists(args.exit):
        time.sleep(0.05)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
