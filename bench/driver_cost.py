#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The driver level's per-call cost, in the BPF programs themselves.

Usage (root, from the repository root, after `make gpuleak fakecuda` and
`make .output/bench/alloc_loop`):
    bench/driver_cost.py [--pairs N] [--reps R] [--stacks MODE] [NAME=GPULEAK ...]

Each NAME=GPULEAK is a gpuleak binary to compare (default: this tree's, as
"gpuleak"); the binaries run in a rotating order, rep after rep, under
`gpuleak run -q -i 0 --no-python --stacks MODE` (default none) on
bench/alloc_loop.c against a private copy of the stand-in. While the load
lingers after its loop, the kernel's BPF run-time statistics (BPF_ENABLE_STATS,
on while this script runs; read from gpuleak's JSON report, stats.programs, or
with bpftool from builds without them) give the nanoseconds spent in call_enter and
call_exit; divided by the pairs the load made (warm-up included), they are the
programs' cost per cuMemAlloc_v2 + cuMemFree_v2 pair: two entries and two
returns, with no uprobe trap and no waiting for a CPU in them, so much steadier
than the load's own clock (also printed: CPU ns per pair of the calling thread).
Every figure is median [first quartile - third quartile] over the reps.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (ALLOC_LOOP, GPULEAK, Stats, enable_bpf_stats,  # noqa: E402
                      private_lib, prog_times)

WARMUP = 1000
PROGS = ("call_enter", "call_exit")


def one_run(binary, lib, pairs, stacks, tmp):
    """{"cpu": CPU ns per pair of the load, PROG: BPF ns per pair, ...} of one run."""
    rep = os.path.join(tmp, "rep.json")
    load = [ALLOC_LOOP, "--lib", lib, "--pairs", str(pairs), "--warmup", str(WARMUP),
            "--linger"]
    p = subprocess.Popen([binary, "run", "-q", "-i", "0", "--no-python", "--stacks", stacks,
                          "--libcuda", lib, "--json", rep, "--", *load],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "cpu_ns_per_pair=" not in line:
        p.kill()
        raise RuntimeError(f"{binary}: the load printed {line!r}")
    fields = dict(kv.split("=", 1) for kv in line.split())
    try:
        times = prog_times(p.pid)
    except FileNotFoundError:
        times = {}  # no bpftool here: the report's figures below
    p.stdin.write("\n")
    p.stdin.close()
    p.stdout.read()
    if p.wait(120):
        raise RuntimeError(f"{binary} run failed with {p.returncode}")
    with open(rep) as f:
        report = json.load(f)
    if report["lost_events"] or report["processes"][0]["alloc_calls"] < pairs + WARMUP:
        raise RuntimeError(f"{binary} did not see every call")
    res = {"cpu": float(fields["cpu_ns_per_pair"])}
    # the report's own figures where it has them: read after the last call returned
    for prog, v in report["stats"].get("programs", {}).items():
        times[prog] = (v["run_ns"], v["runs"])
    for prog in PROGS:
        if prog not in times:
            raise RuntimeError(f"{binary}: no BPF program {prog} loaded")
        res[prog] = times[prog][0] / (pairs + WARMUP)
        res[prog + "_per_run"] = times[prog][0] / max(1, times[prog][1])
    res["bpf"] = res["call_enter"] + res["call_exit"]
    return res


def measure(binaries, pairs, reps, stacks="none", log=None):
    """{name: [one_run() result per rep]} of binaries ([(name, path)]), run in a rotating
    order rep after rep, with the kernel's BPF statistics on."""
    names = [n for n, _ in binaries]
    lib = private_lib()
    samples = {n: [] for n in names}
    stats_fd = enable_bpf_stats()
    try:
        with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
            for r in range(reps):
                k = r % len(binaries)
                for name, binary in binaries[k:] + binaries[:k]:
                    samples[name].append(one_run(binary, lib, pairs, stacks, tmp))
                    time.sleep(0.2)
                if log:
                    log(f"programs rep {r + 1}/{reps}: " + ", ".join(
                        f"{n} bpf {samples[n][-1]['bpf']:.0f}" for n in names))
    finally:
        os.close(stats_fd)
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--stacks", default="none")
    ap.add_argument("binaries", nargs="*", metavar="NAME=GPULEAK")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("driver_cost.py needs root (BPF)")
    binaries = [b.split("=", 1) for b in a.binaries] or [["gpuleak", GPULEAK]]
    names = [n for n, _ in binaries]
    samples = measure(binaries, a.pairs, a.reps, a.stacks,
                      lambda m: print(m, file=sys.stderr, flush=True))
    print(f"cuMemAlloc_v2 + cuMemFree_v2, --stacks {a.stacks}, {a.pairs} pairs + {WARMUP} "
          f"warm-up, {a.reps} interleaved reps; ns per pair, median [IQR]:")
    print(f"  {'binary':12} {'call_enter':>22} {'call_exit':>22} {'BPF total':>22} "
          f"{'load CPU':>24}")
    for n in names:
        cols = [Stats([s[f] for s in samples[n]]).fmt() for f in
                ("call_enter", "call_exit", "bpf", "cpu")]
        print(f"  {n:12} {cols[0]:>22} {cols[1]:>22} {cols[2]:>22} {cols[3]:>24}")
    base = names[0]
    for n in names[1:]:
        ratio = Stats([s["bpf"] / b["bpf"] for s, b in zip(samples[n], samples[base])])
        cpu = Stats([s["cpu"] / b["cpu"] for s, b in zip(samples[n], samples[base])])
        print(f"  {n} / {base}, per rep: BPF total {ratio.fmt(3)}, load CPU {cpu.fmt(3)}")


if __name__ == "__main__":
    main()
