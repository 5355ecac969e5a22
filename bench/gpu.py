#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak's benchmarks against the real CUDA driver, on a GPU machine (bench/gpu.sh
sets it up and runs it).

    gpu.py --lib LIBCUDA [--quick]

1. Added CPU time per cuMemAlloc_v2 + cuMemFree_v2 pair of bench/alloc_loop.c and of
   PyTorch without its caching allocator, untraced, under the floor programs and under
   gpuleak in each stack mode (interleaved runs, medians).
2. Step time of a transformer training loop (bench/torch_train.py): untraced, with
   gpuleak attached (default options, --torch-stacks python, --no-torch), with PyTorch's
   own _record_memory_history() (all stacks, and Python stacks only); interleaved runs.
3. Time from starting `gpuleak attach PID` to "attached", for a process that has
   initialized the driver, and for the training process.
Prints the table to stdout, progress to stderr.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import overhead  # noqa: E402
from benchlib import (ALLOC_LOOP, GPULEAK, ROOT, BenchError, Proc, Stats, kv,  # noqa: E402
                      machine, python_exe)

TRAIN = os.path.join(ROOT, "bench", "torch_train.py")
C_MODES = ("untraced", "floor", "gpuleak none", "gpuleak fp", "gpuleak dwarf")
TORCH_MODES = ("untraced", "floor", "gpuleak fp, no Python", "gpuleak fp+Python",
               "gpuleak dwarf+Python")
TRAIN_MODES = {
    "untraced": None,
    "gpuleak (default)": [],
    "gpuleak --torch-stacks python": ["--torch-stacks", "python"],
    "gpuleak --no-torch": ["--no-torch"],
    "_record_memory_history": "history",
    "_record_memory_history(stacks=python)": "history-python",
}
# --breakdown: where the default mode's cost goes (PyTorch's probes with each stack mode)
BREAKDOWN_MODES = {
    "untraced": None,
    "gpuleak (default)": [],
    "gpuleak --torch-stacks python": ["--torch-stacks", "python"],
    "gpuleak --stacks fp": ["--stacks", "fp"],
    "gpuleak --stacks none": ["--stacks", "none"],
    "gpuleak --no-torch": ["--no-torch"],
    "_record_memory_history": "history",
    "_record_memory_history(stacks=python)": "history-python",
}


def log(msg):
    print(f"gpu: {msg}", file=sys.stderr, flush=True)


def train_once(mode, opts, steps, tmp):
    """(median step ms, seconds from gpuleak's start to attached or None)."""
    go = os.path.join(tmp, f"go.{time.monotonic_ns()}")
    argv = [python_exe(), TRAIN, "--steps", str(steps), "--go", go]
    if opts in ("history", "history-python"):
        argv += ["--record-history", "--history-stacks",
                 "python" if opts == "history-python" else "all"]
    wl = Proc(argv, tmp, "train")
    gl, attach_s = None, None
    try:
        wl.wait_for(r"ready \d+", 180, stream="stdout")
        report = os.path.join(tmp, f"report.{time.monotonic_ns()}.json")
        if isinstance(opts, list):
            gl = Proc([GPULEAK, "attach", "-i", "0", "--json", report, *opts, str(wl.pid)], tmp,
                      "gpuleak")
            attach_s = gl.wait_for(r"attached to PID", 60)
        open(go, "w").close()
        deadline = time.monotonic() + 600
        while wl.p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if wl.stop(None, 10) != 0:
            raise BenchError(f"torch_train.py failed ({mode}):\n{wl.stderr()[-1500:]}")
        step_ms = kv(wl.stdout(), ("median_step_ms",))["median_step_ms"]
        if gl and gl.stop(timeout=60) != 0:
            raise BenchError(f"gpuleak failed ({mode}):\n{gl.stderr()[-1500:]}")
        if gl and os.path.exists(report):
            with open(report) as f:
                calls = json.load(f)["stats"].get("calls", {})
            per_step = {k: round(v / steps, 1) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])}
            log(f"{mode}: traced calls per step: {per_step}")
    finally:
        wl.kill()
        if gl:
            gl.kill()
    return step_ms, attach_s


def training(reps, steps, train_modes=TRAIN_MODES):
    samples = {m: [] for m in train_modes}
    attach = []
    modes = list(train_modes)
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        for r in range(reps):
            for m in modes[r % len(modes):] + modes[:r % len(modes)]:
                ms, att = train_once(m, train_modes[m], steps, tmp)
                samples[m].append(ms)
                if att is not None:
                    attach.append(att)
            log(f"training rep {r + 1}/{reps}: " +
                ", ".join(f"{m} {samples[m][-1]:.2f} ms" for m in modes))
    slow = {}
    for m in modes[1:]:
        vals = [t / b - 1 for t, b in zip(samples[m], samples["untraced"])]
        slow[m] = Stats(vals)
    return samples, slow, Stats(attach) if attach else None


def attach_driver(lib, reps):
    """Seconds from starting `gpuleak attach PID` to attached, the driver initialized."""
    times = []
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        wl = Proc([ALLOC_LOOP, "--lib", lib, "--wait", "--pairs", "1"], tmp, "wait",
                  stdin=True)
        try:
            wl.wait_for(r"ready \d+", 60, stream="stdout")
            for _ in range(reps):
                gl = Proc([GPULEAK, "attach", "-i", "0", str(wl.pid)], tmp, "gpuleak")
                try:
                    times.append(gl.wait_for(r"attached to PID", 60))
                    gl.stop()
                finally:
                    gl.kill()
        finally:
            wl.kill()
    return Stats(times)


def us(s):
    return f"{s['median'] / 1e3:.2f} [{s['q1'] / 1e3:.2f}-{s['q3'] / 1e3:.2f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer runs (about 2 minutes)")
    ap.add_argument("--breakdown", action="store_true",
                    help="only the training loop, with each stack mode (about 3 minutes)")
    ap.add_argument("--attach", action="store_true",
                    help="only the time to attach to a process that uses the driver")
    ap.add_argument("--reps", type=int, default=0, help="repetitions (default 3, --quick 3, else 5)")
    a = ap.parse_args()
    if a.attach:
        att = attach_driver(a.lib, a.reps or 7)
        print(f"attach PID, start to attached: driver initialized {att.fmt(3)} s")
        return 0
    if a.breakdown:
        samples, slow, _ = training(a.reps or 3, 100, BREAKDOWN_MODES)
        print("transformer training step (bench/torch_train.py), ms per step")
        for m, vals in samples.items():
            extra = f"   slowdown {slow[m].median * 100:+.2f}%" if m in slow else ""
            print(f"  {m:<24} {Stats(vals).fmt(2)}{extra}")
        return 0
    reps = a.reps or (3 if a.quick else 5)
    info = machine()
    out = [f"gpuleak GPU benchmarks, {info['date']}: {info['cpu']} x{info['cpus']}, Linux "
           f"{info['kernel']}, driver {a.lib}",
           "figures: median [interquartile range] over interleaved runs"]
    try:
        for kind, modes, pairs, n in (("c", C_MODES, 5000, reps),
                                      ("torch", TORCH_MODES, 2000, max(2, reps - 2))):
            r = overhead.overhead(kind, pairs, n, log, modes=modes, lib=a.lib)
            base = r["cpu_ns_per_pair"]["untraced"]["median"]
            out.append(f"\n{r['load']}: CPU us per cuMemAlloc_v2+cuMemFree_v2 pair "
                       f"({pairs} pairs, {n} runs)")
            for cfg, s in r["cpu_ns_per_pair"].items():
                out.append(f"  {cfg:<24} {us(s):>22}   added {(s['median'] - base) / 1e3:.2f} us")
            for k, s in r["ratios"].items():
                out.append(f"  {k:<60} {s['median']:.2f}")
        samples, slow, att_train = training(max(2, reps - 2), 100 if a.quick else 200)
        out.append("\ntransformer training step (bench/torch_train.py), ms per step")
        for m, vals in samples.items():
            s = Stats(vals)
            extra = f"   slowdown {slow[m].median * 100:+.2f}%" if m in slow else ""
            out.append(f"  {m:<24} {s.fmt(2)}{extra}")
        att = attach_driver(a.lib, reps)
        out.append(f"\nattach PID, start to attached: driver initialized {att.fmt(3)} s" +
                   (f"; training process {att_train.fmt(3)} s" if att_train else ""))
    except BenchError as e:
        print("\n".join(out), flush=True)
        print(f"gpu: {e}", file=sys.stderr)
        return 1
    print("\n".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
