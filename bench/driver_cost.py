#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The driver level's per-call cost, in the BPF programs themselves.

Usage (root, from the repository root, after `make gpuleak fakecuda` and
`make .output/bench/alloc_loop`):
    bench/driver_cost.py [--pairs N] [--reps R] [--stacks MODE] [--floor] [NAME=GPULEAK ...]

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
With --floor, each rep also runs the first binary with --bench-floor (programs
that do nothing, on the same probes): their run time is the price, on this
machine, of calling a program and of the statistics' own clock reads around it,
the floor under any program; "above floor" is a binary's BPF total less the
floor's, rep by rep: the work its programs do.
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
FLOOR = "floor"  # the name of the do-nothing programs' runs (--floor)


def one_run(binary, lib, pairs, stacks, tmp, floor=False):
    """{"cpu": CPU ns per pair of the load, PROG: BPF ns per pair, ...} of one run; with
    floor, of the do-nothing programs, under PROGS' names."""
    rep = os.path.join(tmp, "rep.json")
    load = [ALLOC_LOOP, "--lib", lib, "--pairs", str(pairs), "--warmup", str(WARMUP),
            "--linger"]
    p = subprocess.Popen([binary, "run", "-q", "-i", "0", "--no-python", "--stacks", stacks,
                          *(["--bench-floor"] if floor else []),
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
    if not floor and (report["lost_events"] or
                      report["processes"][0]["alloc_calls"] < pairs + WARMUP):
        raise RuntimeError(f"{binary} did not see every call")
    res = {"cpu": float(fields["cpu_ns_per_pair"])}
    # the report's own figures where it has them: read after the last call returned
    for prog, v in report["stats"].get("programs", {}).items():
        times[prog] = (v["run_ns"], v["runs"])
    if floor:
        times = {p: times.get("floor_" + p.split("_")[1], (0, 0)) for p in PROGS}
        if not all(runs >= 2 * (pairs + WARMUP) for _, runs in times.values()):
            raise RuntimeError(f"{binary} --bench-floor: the programs ran {times}")
    for prog in PROGS:
        if prog not in times:
            raise RuntimeError(f"{binary}: no BPF program {prog} loaded")
        res[prog] = times[prog][0] / (pairs + WARMUP)
        res[prog + "_per_run"] = times[prog][0] / max(1, times[prog][1])
    res["bpf"] = res["call_enter"] + res["call_exit"]
    return res


def measure(binaries, pairs, reps, stacks="none", log=None, floor=False):
    """{name: [one_run() result per rep]} of binaries ([(name, path)]), run in a rotating
    order rep after rep, with the kernel's BPF statistics on; with floor, FLOOR's too
    (the first binary's do-nothing programs)."""
    runs = [(n, b, False) for n, b in binaries] + ([(FLOOR, binaries[0][1], True)]
                                                   if floor else [])
    names = [n for n, _, _ in runs]
    lib = private_lib()
    samples = {n: [] for n in names}
    stats_fd = enable_bpf_stats()
    try:
        with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
            for r in range(reps):
                k = r % len(runs)
                for name, binary, fl in runs[k:] + runs[:k]:
                    samples[name].append(one_run(binary, lib, pairs, stacks, tmp, fl))
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
    ap.add_argument("--floor", action="store_true",
                    help="also the do-nothing programs, and each binary's work above them")
    ap.add_argument("binaries", nargs="*", metavar="NAME=GPULEAK")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("driver_cost.py needs root (BPF)")
    binaries = [b.split("=", 1) for b in a.binaries] or [["gpuleak", GPULEAK]]
    if FLOOR in (n for n, _ in binaries):
        sys.exit(f"driver_cost.py: {FLOOR} names the do-nothing programs (--floor)")
    samples = measure(binaries, a.pairs, a.reps, a.stacks,
                      lambda m: print(m, file=sys.stderr, flush=True), a.floor)
    names = list(samples)
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
        if n == FLOOR:
            continue
        ratio = Stats([s["bpf"] / b["bpf"] for s, b in zip(samples[n], samples[base])])
        cpu = Stats([s["cpu"] / b["cpu"] for s, b in zip(samples[n], samples[base])])
        print(f"  {n} / {base}, per rep: BPF total {ratio.fmt(3)}, load CPU {cpu.fmt(3)}")
    if a.floor:
        for n in names:
            if n != FLOOR:
                above = Stats([s["bpf"] - f["bpf"] for s, f in zip(samples[n], samples[FLOOR])])
                print(f"  {n} above floor, per rep: {above.fmt()} ns per pair")


if __name__ == "__main__":
    main()
