#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The tensor level's cost per pytorch:malloc and per pytorch:free, in the BPF programs.

Usage (root, from the repository root, after `make gpuleak fakecuda`):
    bench/tensor_cost.py [--steps N] [--reps R] [--mode ARGS] [NAME=GPULEAK ...]

One bench/torch_train.py --fake process steps through the libc10_cuda stand-in
(400 malloc+free pairs a step, Python frames four deep) for the whole run; rep
after rep, each binary in a rotating order attaches to it with `attach -i 0
ARGS` (default --tensors full), lets --settle steps pass (the stack cache
fills), and while --steps steps run the kernel's BPF
run-time statistics (BPF_ENABLE_STATS, on while this script runs) give the
nanoseconds spent in torch_malloc and torch_free, divided by their runs. No
uprobe trap and no waiting for a CPU is in them. Median [IQR] over the reps, and
each binary against the first, per rep.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import OUTPUT, Stats, enable_bpf_stats, prog_times  # noqa: E402
import gpu_train  # noqa: E402

PROGS = ("torch_malloc", "torch_free")


def one_run(binary, args, trainer, steps, settle, tmp):
    t = gpu_train.Tracer([binary, "attach", "-i", "0", *args, str(trainer.pid)], tmp)
    try:
        t.wait_for("attached", 60)
        trainer.block("settling", settle, 0)
        before = prog_times(t.p.pid)
        trainer.block("measured", steps, 0)
        after = prog_times(t.p.pid)
    finally:
        t.stop()
    res = {}
    for prog in PROGS:
        runs = after[prog][1] - before[prog][1]
        if runs < steps:
            raise RuntimeError(f"{binary}: {prog} ran {runs} times in {steps} steps")
        res[prog] = (after[prog][0] - before[prog][0]) / runs
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--settle", type=int, default=50,
                    help="steps after attach before measuring (the stack cache fills)")
    ap.add_argument("--mode", default="--tensors full")
    ap.add_argument("binaries", nargs="*", metavar="NAME=GPULEAK")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("tensor_cost.py needs root (BPF)")
    binaries = [b.split("=", 1) for b in a.binaries] or [["gpuleak", gpu_train.GPULEAK]]
    names = [n for n, _ in binaries]
    os.environ["FAKE_LIBCUDA"] = os.path.join(OUTPUT, "fakecuda", "libcuda.so.1")
    cfg = argparse.Namespace(python=sys.executable, large=False, cpus="",
                             fake=os.path.join(OUTPUT, "faketorch", "libc10_cuda.so"))
    samples = {n: [] for n in names}
    stats_fd = enable_bpf_stats()
    try:
        with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
            trainer = gpu_train.Trainer(cfg, tmp)
            try:
                for r in range(a.reps):
                    k = r % len(binaries)
                    for name, binary in binaries[k:] + binaries[:k]:
                        samples[name].append(one_run(binary, a.mode.split(), trainer,
                                                     a.steps, a.settle, tmp))
                    print(f"rep {r + 1}/{a.reps}: " + ", ".join(
                        f"{n} " + " ".join(f"{samples[n][-1][p]:.0f}" for p in PROGS)
                        for n in names), file=sys.stderr, flush=True)
            finally:
                trainer.quit()
    finally:
        os.close(stats_fd)
    print(f"pytorch:malloc and pytorch:free, attach {a.mode}, {a.steps} steps of 400 pairs, "
          f"{a.reps} interleaved reps; BPF ns per run, median [IQR]:")
    print(f"  {'binary':12} {'torch_malloc':>22} {'torch_free':>22}")
    for n in names:
        print(f"  {n:12} " + " ".join(f"{Stats([s[p] for s in samples[n]]).fmt():>22}"
                                      for p in PROGS))
    base = names[0]
    for n in names[1:]:
        print(f"  {n} / {base}, per rep: " + ", ".join(
            f"{p} {Stats([s[p] / b[p] for s, b in zip(samples[n], samples[base])]).fmt(3)}"
            for p in PROGS))


if __name__ == "__main__":
    main()
