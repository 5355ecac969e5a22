#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak's CPU benchmarks: runs the suites, prints the table, writes the results.

Usage: bench.py [--smoke] [--only SUITE[,SUITE]] [--reps N] [--old GPULEAK] [--json FILE] [-q]

Suites: overhead (C load), python (Python load), throughput, books, memory, attach,
tensors (bench/tensor_bench.py: PyTorch's allocator probes, per mode), programs (each
driver-level BPF program's ns per run and per alloc+free pair, from the kernel's run-time
statistics; with --old, another build's beside this one's, interleaved, and their ratio;
the tensors suite then runs --old's full mode beside this build's too).
--smoke runs a few seconds' worth of the harness (every figure from tiny runs: they
prove the harness works, not how fast gpuleak is). Progress goes to stderr, the table
to stdout, the full results as JSON to --json (default $OUTPUT/bench/results.json).
Needs root (BPF), ./gpuleak and `make bench-progs`.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import subprocess  # noqa: E402

import capacity  # noqa: E402
import driver_cost  # noqa: E402
import hooks  # noqa: E402
import overhead  # noqa: E402
import tensor_bench  # noqa: E402
from benchlib import BENCH_OUT, GPULEAK, BenchError, Stats, machine  # noqa: E402

SUITES = ("overhead", "python", "throughput", "books", "memory", "peak", "attach", "tensors",
          "hooks", "programs")

FULL = {
    "overhead": {"pairs": 20000, "reps": 9},
    "python": {"pairs": 10000, "reps": 7},
    "throughput": {"rates": [10000, 20000, 40000, 80000, 0], "threads": [1, 2],
                   "seconds": 1.5, "ringbufs": [1 << 20, 32 << 20]},
    "books": {"pairs": 1000000, "reps": 5},
    "memory": {"keep": 1000000, "stacks_keep": 65536, "sites": 16384},
    # issue "Lighter"'s loads: one process; 10,000 stacks; 100,000 allocations from 10,000
    "peak": {"loads": [(1000, 1), (10000, 10000), (100000, 10000)], "reps": 5},
    "attach": {"procs": 50, "reps": 7},
    "tensors": {"reps": 9, "args": []},
    "hooks": {"ops": 50000, "reps": 11},
    "programs": {"pairs": 20000, "reps": 9},
}

SMOKE = {
    "overhead": {"pairs": 300, "reps": 1, "modes": ("untraced", "floor", "gpuleak fp")},
    "books": {"pairs": 5000, "reps": 1},
    "peak": {"loads": [(2000, 100)], "reps": 1},
    "tensors": {"reps": 1, "args": ["--smoke", "--only", "pair",
                                    "--modes", "untraced,full,sampled"]},
    "hooks": {"ops": 2000, "reps": 1},
    "programs": {"pairs": 2000, "reps": 1},
}


def programs(pairs, reps, old, log):
    """driver_cost's figures per program: this build's, --old's beside it, and the
    do-nothing programs' (the floor, driver_cost.FLOOR) with each build's work above it."""
    binaries = [("gpuleak", GPULEAK)] + ([("old", old)] if old else [])
    try:
        samples = driver_cost.measure(binaries, pairs, reps, "none", log, floor=True)
    except RuntimeError as e:
        raise BenchError(f"programs: {e}")
    fields = ("call_enter_per_run", "call_exit_per_run", "call_enter", "call_exit", "bpf")
    floor = samples[driver_cost.FLOOR]
    res = {"pairs": pairs, "reps": reps,
           "ns": {n: {f: Stats([s[f] for s in samples[n]]).as_dict() for f in fields}
                  for n in samples},
           "above_floor": {n: Stats([s["bpf"] - f["bpf"] for s, f in zip(samples[n], floor)])
                           .as_dict() for n, _ in binaries}}
    if old:
        res["gpuleak_over_old"] = {
            f: Stats([a[f] / b[f] for a, b in zip(samples["gpuleak"], samples["old"])]).as_dict()
            for f in fields}
    return res


def run_suites(names, cfg, reps, log, wall, old=None):
    """{suite: results}; wall gets each suite's seconds."""
    res = {}
    for name in names:
        c = cfg[name]
        r = reps or c.get("reps")
        t0 = time.monotonic()
        if name in ("overhead", "python"):
            res[name] = overhead.overhead("c" if name == "overhead" else "py", c["pairs"], r,
                                          log, modes=c.get("modes"))
        elif name == "throughput":
            res[name] = {}
            for threads in c["threads"]:
                res[name][str(threads)] = capacity.throughput(
                    c["rates"], threads, c["seconds"], c["ringbufs"], log)
        elif name == "books":
            res[name] = capacity.books(c["pairs"], r, log)
        elif name == "memory":
            res[name] = capacity.memory(c["keep"], c["stacks_keep"], c["sites"], log)
        elif name == "peak":
            res[name] = capacity.peak(c["loads"], r, old, log)
        elif name == "attach":
            res[name] = capacity.attach(c["procs"], r, log)
        elif name == "tensors":
            args = c["args"]
            if old:
                # --old's full mode beside this build's, as the programs suite does
                modes = next((args[i + 1] for i, x in enumerate(args) if x == "--modes"),
                             ",".join(tensor_bench.default_modes()))
                args = [x for i, x in enumerate(args)
                        if x != "--modes" and (i == 0 or args[i - 1] != "--modes")]
                args += ["--old", old, "--modes", modes + ",full@old"]
            res[name] = tensors(r, args, log)
        elif name == "hooks":
            res[name] = hooks.hooks(c["ops"], r, log)
        elif name == "programs":
            res[name] = programs(c["pairs"], r, old, log)
        wall[name] = round(time.monotonic() - t0, 1)
    return res


def tensors(reps, args, log):
    """bench/tensor_bench.py's results, and its table."""
    out = os.path.join(BENCH_OUT, "tensor.json")
    log("tensors: bench/tensor_bench.py")
    p = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "tensor_bench.py"),
                        "--reps", str(reps), "--json", out, *args], capture_output=True,
                       text=True)
    if p.returncode:
        raise BenchError(f"tensor_bench.py failed ({p.returncode}): {p.stderr[-2000:]}")
    with open(out) as f:
        res = json.load(f)
    res["table"] = p.stdout
    return res


def fmt_stat(s, digits=0, scale=1.0):
    return (f"{s['median'] * scale:.{digits}f} [{s['q1'] * scale:.{digits}f}-"
            f"{s['q3'] * scale:.{digits}f}]")


def table(res, info):
    out = [f"gpuleak benchmarks, {info['date']}: {info['cpu']} x{info['cpus']}, Linux "
           f"{info['kernel']}, load {info['load_1min']}, other tracers running: "
           f"{info['other_tracers']}",
           "figures: median [interquartile range] over the runs; ratios per run, then median"]
    for name in ("overhead", "python"):
        if name not in res:
            continue
        r = res[name]
        out.append(f"\n{r['load']}: CPU ns per cuMemAlloc_v2+cuMemFree_v2 pair "
                   f"({r['pairs']} pairs, {r['reps']} runs, interleaved)")
        base = r["cpu_ns_per_pair"]["untraced"]["median"]
        for cfg, s in r["cpu_ns_per_pair"].items():
            out.append(f"  {cfg:<24} {fmt_stat(s):>26}   +{s['median'] - base:.0f} ns")
        for k, s in r["ratios"].items():
            out.append(f"  {k:<56} {fmt_stat(s, 2)}")
        if "bpftrace_unavailable" in r:
            out.append(f"  bpftrace: {r['bpftrace_unavailable']}")
    if "throughput" in res:
        out.append("\nthroughput: records/s reaching the books (stack + call records, fp)")
        for threads, r in res["throughput"].items():
            for ring, s in r["summary"].items():
                ok, bad = s["max_lossless_records_per_s"], s["min_lossy_records_per_s"]
                out.append(f"  {threads} producer(s), ring {int(ring) >> 10} KiB: lossless up "
                           f"to {ok or 0:.0f}/s; "
                           + (f"lost events from {bad:.0f}/s" if bad else "no loss seen"))
    if "books" in res:
        out.append("\ndecode+aggregate on one core (bench/books_bench.c), records/s")
        for k, s in res["books"].items():
            out.append(f"  {k:<36} {fmt_stat(s)}")
    if "memory" in res:
        m = res["memory"]
        out.append(f"\nmemory with {m['outstanding']} outstanding allocations: "
                   f"{m['rss_bytes_per_allocation']:.1f} B of tracer RSS and "
                   f"{m['bpf_allocs_map_bytes_per_allocation']:.1f} B of BPF map per "
                   f"allocation; {m['rss_bytes_per_stack']:.0f} B of RSS per distinct stack")
    if "peak" in res:
        out.append("\ngpuleak run's peak resident memory (VmHWM, MiB), DWARF stacks, a load "
                   "keeping N allocations over K stacks as fast as it goes: median [IQR], "
                   "records lost per run")
        for load, by in res["peak"].items():
            for b, f in by.items():
                if b == "gpuleak_over_old":
                    out.append(f"  {'':40} gpuleak / old per run {fmt_stat(f, 3)}")
                    continue
                out.append(f"  {load:<32} {b:<7} {fmt_stat(f['vm_hwm_mib'], 1):>22}   lost "
                           + " ".join(str(n) for n in f["lost_events"]))
    if "tensors" in res:
        out.append("\n" + res["tensors"]["table"].rstrip())
    if "programs" in res:
        p = res["programs"]
        out.append(f"\nBPF programs, --stacks none: ns per run and per cuMemAlloc_v2+cuMemFree_v2 "
                   f"pair (run_time_ns; {p['pairs']} pairs, {p['reps']} runs, interleaved)")
        out.append(f"  {'':10} {'call_enter/run':>20} {'call_exit/run':>20} "
                   f"{'enter/pair':>20} {'exit/pair':>20} {'BPF/pair':>20}")
        for n, f in p["ns"].items():
            out.append(f"  {n:10} " + " ".join(
                f"{fmt_stat(f[k]):>20}" for k in ("call_enter_per_run", "call_exit_per_run",
                                                  "call_enter", "call_exit", "bpf")))
        if "above_floor" in p:
            out.append("  BPF/pair above the floor (the do-nothing programs' runs), per run: " +
                       ", ".join(f"{n} {fmt_stat(v)}" for n, v in p["above_floor"].items()))
        if "gpuleak_over_old" in p:
            r = p["gpuleak_over_old"]
            out.append("  gpuleak / old per run: " + ", ".join(
                f"{k} {fmt_stat(r[k], 3)}" for k in ("call_enter", "call_exit", "bpf")))
    if "hooks" in res:
        h = res["hooks"]
        out.append(f"\nthe mmap-lock hook, to a process gpuleak does not trace: ns per "
                   f"operation pair ({h['ops']} pairs, {h['reps']} runs, interleaved)")
        for load, what in (("file_ns", "mmap+munmap of a file"),
                           ("anon_ns", "mmap+munmap anonymous"),
                           ("prot_ns", "mprotect twice")):
            base = h["ns_per_pair"]["untraced"][load]
            line = f"  {what:<24} untraced {fmt_stat(base)}"
            for m, added in h["added_ns"].items():
                line += f"; {m} {added[load]['median']:+.0f} [{added[load]['q1']:+.0f}.." \
                        f"{added[load]['q3']:+.0f}]"
            out.append(line)
    if "attach" in res:
        a = res["attach"]
        out.append(f"\nattach -a with {a['processes']} processes, start to attached: "
                   f"{fmt_stat(a['seconds'], 3)} s")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--json", default=os.path.join(BENCH_OUT, "results.json"))
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--old", default=None,
                    help="another gpuleak build, run beside this one's in the programs suite")
    a = ap.parse_args()
    cfg = SMOKE if a.smoke else FULL
    names = [n for n in (a.only.split(",") if a.only else SUITES) if n in cfg]
    unknown = [n for n in a.only.split(",") if n and n not in SUITES]
    if unknown or not names:
        ap.error(f"unknown suite(s) {unknown}; choose from {', '.join(SUITES)}")

    def log(msg):
        if not a.quiet:
            print(f"bench: {msg}", file=sys.stderr, flush=True)

    info = machine()
    info["suite_wall_s"] = {}
    t0 = time.monotonic()
    try:
        res = run_suites(names, cfg, a.reps, log, info["suite_wall_s"], a.old)
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    info["wall_s"] = round(time.monotonic() - t0, 1)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"machine": info, "config": {n: cfg[n] for n in names}, "results": res}, f,
                  indent=1, default=list)
    print(table(res, info), flush=True)
    log(f"done in {info['wall_s']} s; results in {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
