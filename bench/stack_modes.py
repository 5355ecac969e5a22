#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What stacks cost: --stacks none, fp and dwarf on the CUDA driver stand-in.

Usage (root, from the repository root, after `make gpuleak fakecuda`):
    bench/stack_modes.py [--pairs N] [--depth D] [--reps R]

1. User space (bench/unwind_bench.c, built here against .output/default): the
   first DWARF record of a process, a stack not seen before (libdwfl + the
   dependency analysis), a stack seen before (the cache).
2. BPF side: wl_nofp (code without frame pointers, --depth extra frames of 560
   bytes), linked to a private copy of the stand-in, runs a tight
   cuMemAlloc_v2/cuMemFree_v2 loop untraced and under gpuleak run with each
   --stacks mode; the loop's own clock gives ns per pair in the traced process
   (uprobe traps, BPF programs, the stack copy, the ring buffer), and the
   tracer's CPU time per pair (its whole user-space path: ring buffer,
   unwinding, books) is its rusage less the workload's, less a run of 0 pairs.
   The time spent in the BPF programs themselves (per pair: two entries, one
   with a stack, and two returns) comes from the kernel's BPF run-time
   statistics (BPF_ENABLE_STATS, on while the benchmark runs).
User-space figures are medians of --reps runs; the loop figures come from --reps
rounds that run every mode in turn: the minimum is the least disturbed run.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import enable_bpf_stats, prog_times  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, ".output")
GPULEAK = os.path.join(ROOT, "gpuleak")


def build_unwind_bench(path):
    objs = [o for o in glob.glob(os.path.join(OUT, "default", "src", "*", "*.o"))
            if not o.endswith("/cmd/main.o")]
    cmd = ["cc", "-g", "-O2", "-fomit-frame-pointer", "-std=gnu11", "-D_GNU_SOURCE",
           "-I" + OUT, "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "src"),
           os.path.join(ROOT, "bench", "unwind_bench.c"), *objs,
           "-lbpf", "-ldw", "-lelf", "-lz", "-lstdc++", "-lpthread", "-o", path]
    subprocess.run(cmd, check=True)


def user_space(reps, depth):
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "unwind_bench")
        build_unwind_bench(exe)
        runs = []
        for _ in range(reps):
            out = subprocess.run([exe, str(depth), "32"], check=True, capture_output=True,
                                 text=True).stdout
            figures = {}
            for line in out.splitlines():
                parts = line.split()
                if parts[0] in ("first", "build", "miss", "hit", "libdwfl", "analysis"):
                    figures[parts[0]] = float(parts[1])
                elif parts[0] == "checks":
                    figures["checks"], figures["frames"] = int(parts[1]), int(parts[3])
            runs.append(figures)
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def build_private(tmp):
    """wl_nofp and its libraries linked to a copy of the stand-in named libnofpcuda.so.1:
    a tracer attached to every libcuda on the machine (-a) does not see it."""
    wl_src = os.path.join(ROOT, "tests", "workloads")
    fc_src = os.path.join(ROOT, "tests", "fakecuda")
    lib = os.path.join(tmp, "libnofpcuda.so.1")
    cc = ["cc", "-O2", "-g", "-fomit-frame-pointer", "-fno-optimize-sibling-calls",
          "-fno-ipa-icf", "-pthread", "-I" + fc_src, "-I" + wl_src, "-Wl,-rpath," + tmp]
    objs = glob.glob(os.path.join(OUT, "fakecuda", "fc_*.o"))
    steps = [
        ["cc", "-shared", "-pthread", "-Wl,-soname,libnofpcuda.so.1", "-Wl,-Bsymbolic",
         "-o", lib, *objs],
        [*cc, "-fPIC", "-shared", "-o", os.path.join(tmp, "libnofp_inner.so"),
         os.path.join(wl_src, "libnofp_inner.c"), lib],
        [*cc, "-fPIC", "-shared", "-o", os.path.join(tmp, "libnofp_outer.so"),
         os.path.join(wl_src, "libnofp_outer.c"), os.path.join(tmp, "libnofp_inner.so")],
        [*cc, "-rdynamic", "-o", os.path.join(tmp, "wl_nofp"), os.path.join(wl_src, "wl_nofp.c"),
         os.path.join(wl_src, "wl.c"), os.path.join(tmp, "libnofp_outer.so"), lib, "-ldl"],
    ]
    for cmd in steps:
        subprocess.run(cmd, check=True)
    return lib, os.path.join(tmp, "wl_nofp")


def one_run(mode, pairs, depth, tmp, lib, wl):
    """(ns per pair in the workload, CPU ns of the tracer alone, records lost,
    ns per pair in call_enter, ns per pair in call_exit)."""
    truth, rep = os.path.join(tmp, "truth.json"), os.path.join(tmp, "rep.json")
    wl_cmd = [wl, "--no-wait", "--truth", truth, "--iters", str(pairs), "--depth", str(depth)]
    if os.path.exists(truth):
        os.unlink(truth)
    if mode == "untraced":
        subprocess.run(wl_cmd, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(truth))["loop_ns"] / max(pairs, 1), 0.0, 0, 0.0, 0.0
    args = ["--stacks", "dwarf", "--stack-bytes", "32k"] if mode == "dwarf32k" else \
        ["--stacks", mode]
    p = subprocess.Popen([GPULEAK, "run", "-q", "-i", "0", "--no-python", "--libcuda", lib,
                          "--json", rep, *args, "--", *wl_cmd, "--hold"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    while not os.path.exists(truth):
        if p.poll() is not None:
            raise RuntimeError(f"gpuleak run --stacks {mode} exited with {p.returncode}")
        time.sleep(0.01)
    times = prog_times(p.pid)
    p.stdin.write(b"exit\n")
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    if status:
        raise RuntimeError(f"gpuleak run --stacks {mode} failed: {status}")
    t = json.load(open(truth))
    tracer_ns = (ru.ru_utime + ru.ru_stime) * 1e9 - t["cpu_ns"]
    n = max(pairs, 1)
    return (t["loop_ns"] / n, tracer_ns, json.load(open(rep))["lost_events"],
            times.get("call_enter", (0, 0))[0] / n, times.get("call_exit", (0, 0))[0] / n)


def bpf_side(pairs, depth, reps):
    """Modes in turn, reps rounds (interference from other work hits all modes alike):
    {mode: (min ns/pair, median ns/pair, tracer CPU ns/pair, records lost,
            median BPF entry ns/pair, median BPF return ns/pair)}."""
    modes = ["untraced", "none", "fp", "dwarf", "dwarf32k"]
    runs = {m: [] for m in modes}
    idle = {m: [] for m in modes}
    stats_fd = enable_bpf_stats()
    with tempfile.TemporaryDirectory() as tmp:
        lib, wl = build_private(tmp)
        for _ in range(reps):
            for mode in modes:
                runs[mode].append(one_run(mode, pairs, depth, tmp, lib, wl))
                idle[mode].append(one_run(mode, 0, depth, tmp, lib, wl)[1])
    os.close(stats_fd)
    res = {}
    for mode in modes:
        ns = [r[0] for r in runs[mode]]
        cpu = (statistics.median(r[1] for r in runs[mode]) - statistics.median(idle[mode])) / pairs
        res[mode] = (min(ns), statistics.median(ns), cpu, max(r[2] for r in runs[mode]),
                     statistics.median(r[3] for r in runs[mode]),
                     statistics.median(r[4] for r in runs[mode]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=50000)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stack_modes.py needs root (BPF)")

    u = user_space(a.reps, 40)
    print(f"user space, a {u['frames']:.0f}-frame stack without frame pointers "
          f"(median of {a.reps}):")
    print(f"  first record of a process   {u['first']:9.1f} us  (Dwfl built: {u['build']:.1f} us)")
    print(f"  new stack (miss)            {u['miss']:9.1f} us  (libdwfl {u['libdwfl']:.1f} us, "
          f"analysis {u['analysis']:.1f} us; {u['checks']:.0f} words checked)")
    print(f"  stack seen before (hit)     {u['hit'] / 1e3:9.3f} us")

    res = bpf_side(a.pairs, a.depth, a.reps)
    print(f"\nalloc+free pair on the stand-in, wl_nofp --depth {a.depth}, {a.pairs} pairs, "
          f"{a.reps} rounds:")
    print(f"  {'mode':10} {'min ns':>8} {'median ns':>10} {'BPF entry ns':>13} "
          f"{'BPF return ns':>14} {'tracer CPU ns':>14} {'lost':>5}")
    for mode, (lo, med, cpu, lost, enter, ret) in res.items():
        print(f"  {mode:10} {lo:8.0f} {med:10.0f} {enter:13.0f} {ret:14.0f} {cpu:14.0f} "
              f"{lost:5.0f}")


if __name__ == "__main__":
    main()
