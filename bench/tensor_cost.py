#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The tensor level's cost per pytorch:malloc and per pytorch:free, in the BPF programs.

Usage (root, from the repository root, after `make gpuleak fakecuda`):
    bench/tensor_cost.py [--steps N] [--reps R] [--mode ARGS ...] [--worker N]
                         [--torch PYTHON] [NAME=GPULEAK ...]

One bench/torch_train.py --fake process steps through the libc10_cuda stand-in
(400 malloc+free pairs a step, Python frames four deep and --depth more,
--worker of them on a native thread that runs no Python) for the whole run; with --torch, the real
training loop on the GPU instead. Rep after rep, each binary and mode in a
rotating order attaches to it with `attach -i 0 ARGS` (default --tensors
full), lets --settle steps pass (the stack cache fills), and while --steps
steps run the kernel's BPF
run-time statistics (BPF_ENABLE_STATS, on while this script runs) give the
nanoseconds spent in torch_malloc and torch_free, divided by their runs. No
uprobe trap and no waiting for a CPU is in them. Median [IQR] over the reps, and
each binary against the first, per rep; with each, from the attach's JSON report,
the share of the stack cache's lookups that found an entry under their key and
copied the stack all the same (a word the unwinding read differed), and the
ring-buffer bytes per stack record.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import OUTPUT, Stats, enable_bpf_stats, prog_times  # noqa: E402
import gpu_train  # noqa: E402

PROGS = ("torch_malloc", "torch_free")


def one_run(binary, args, trainer, steps, settle, tmp):
    report = os.path.join(tmp, "cost.json")
    t = gpu_train.Tracer([binary, "attach", "-i", "0", "--json", report, *args,
                          str(trainer.pid)], tmp)
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
    # over the whole attach: the stack cache's lookups that found an entry under their
    # key but copied the stack all the same (a checked word differed), and the ring
    # bytes per stack record user space read
    with open(report) as f:
        st = json.load(f).get("stats", {})
    hits, misses = st.get("stack_cache_hits", 0), st.get("stack_cache_misses", 0)
    records = st.get("stack_records", 0)
    res["missed"] = misses / (hits + misses) if hits + misses else 0.0
    res["ring_bytes"] = st.get("stack_record_ring_bytes", 0) / records if records else 0.0
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--settle", type=int, default=50,
                    help="steps after attach before measuring (the stack cache fills)")
    ap.add_argument("--mode", action="append", metavar="ARGS",
                    help="attach's options (default --tensors full); given more than once, "
                         "each mode is measured with each binary")
    ap.add_argument("--worker", type=int, default=0, metavar="N",
                    help="N of a step's 400 pairs on a native worker thread (no Python state)")
    ap.add_argument("--depth", type=int, default=0, metavar="N",
                    help="N more Python frames above the stand-in's pairs")
    ap.add_argument("--torch", default="", metavar="PYTHON",
                    help="a real bench/torch_train.py on the GPU under this Python, not the "
                         "stand-in")
    ap.add_argument("binaries", nargs="*", metavar="NAME=GPULEAK")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("tensor_cost.py needs root (BPF)")
    modes = a.mode or ["--tensors full"]
    binaries = [b.split("=", 1) for b in a.binaries] or [["gpuleak", gpu_train.GPULEAK]]
    configs = [(n if len(modes) == 1 else f"{n} {m}" if len(binaries) > 1 else m, b, m)
               for n, b in binaries for m in modes]
    names = [n for n, _, _ in configs]
    if a.torch:
        cfg = argparse.Namespace(python=a.torch, large=False, cpus="", fake="")
        load = "bench/torch_train.py"
    else:
        os.environ["FAKE_LIBCUDA"] = os.path.join(OUTPUT, "fakecuda", "libcuda.so.1")
        cfg = argparse.Namespace(python=sys.executable, large=False, cpus="",
                                 fake=os.path.join(OUTPUT, "faketorch", "libc10_cuda.so"),
                                 fake_worker=a.worker, fake_depth=a.depth)
        load = (f"400 stand-in pairs ({a.worker} on a worker thread, {4 + a.depth} Python "
                f"frames deep)")
    samples = {n: [] for n in names}
    stats_fd = enable_bpf_stats()
    try:
        with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
            trainer = gpu_train.Trainer(cfg, tmp)
            try:
                for r in range(a.reps):
                    k = r % len(configs)
                    for name, binary, mode in configs[k:] + configs[:k]:
                        samples[name].append(one_run(binary, mode.split(), trainer,
                                                     a.steps, a.settle, tmp))
                    print(f"rep {r + 1}/{a.reps}: " + ", ".join(
                        f"{n} " + " ".join(f"{samples[n][-1][p]:.0f}" for p in PROGS)
                        for n in names), file=sys.stderr, flush=True)
            finally:
                trainer.quit()
    finally:
        os.close(stats_fd)
    print(f"pytorch:malloc and pytorch:free, {a.steps} steps of {load}, {a.reps} interleaved "
          f"reps; BPF ns per run, median [IQR]:")
    width = max(12, *(len(n) for n in names))
    print(f"  {'configuration':{width}} {'torch_malloc':>22} {'torch_free':>22}")
    for n in names:
        print(f"  {n:{width}} " + " ".join(f"{Stats([s[p] for s in samples[n]]).fmt():>22}"
                                           for p in PROGS))
    base = names[0]
    for n in names[1:]:
        print(f"  {n} / {base}, per rep: " + ", ".join(
            f"{p} {Stats([s[p] / b[p] for s, b in zip(samples[n], samples[base])]).fmt(3)}"
            for p in PROGS))
    print("  stack cache, median: entries found that missed, ring bytes per stack record: "
          + ", ".join(f"{n} {100 * Stats([s['missed'] for s in samples[n]]).median:.1f} % "
                      f"{Stats([s['ring_bytes'] for s in samples[n]]).median:.0f} B"
                      for n in names))


if __name__ == "__main__":
    main()
