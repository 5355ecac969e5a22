#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What the tensor level costs: pytorch:malloc/free pairs and a training-like step loop.

Usage (root, from the repository root, after `make gpuleak fakecuda`):
    bench/tensor_bench.py [--pairs N] [--steps N] [--reps N] [--json FILE] [--smoke]

The load is Python (ctypes, as PyTorch's allocator is reached from Python frames):
private copies of the CUDA driver stand-in (libbenchcuda.so.1) and of the
libc10_cuda.so stand-in with the same USDT probes and semaphores (libbenchc10.so,
probed through the hidden --bench-torch-lib), so that other tracers of this machine
(attach -a, serve) neither see nor slow the load. Two figures per mode:

1. pair: CPU ns of the calling thread per tensor-block pair (faketorch_malloc +
   faketorch_free, 4 Python frames deep), tight loop.
2. step: a step of 800 pairs (sizes cycling 4 KiB to 4 MiB), one leaked block,
   a driver allocation every 5 steps, and fixed Python work (~45 ms); CPU time of
   the training thread and wall time per step.

Modes run interleaved, in a rotating order, rep after rep; each traced figure is
divided by the untraced figure of the same rep, then summarized as median [IQR].
Modes: untraced; floor (--bench-floor: empty programs on the same USDT and driver
probes); full (--tensors full: every block, default stacks: DWARF + Python);
full-python (--tensors full --torch-stacks python); sampled (--tensors sampled,
1 MiB); none (--tensors full --stacks none: traps and books, no stacks); idle (the
default windowed mode between windows: the first window made short, 1 s, and the
load starts after it closed); default (no options: the first window, armed);
full-nocache (full with every native stack copied: --no-stack-cache). A mode named
MODE@old runs MODE under the gpuleak binary given with --old (another build, for a
before/after comparison interleaved with this build's runs). The load waits until the
probes' semaphore is raised (and, between windows, dropped again) before it measures.
Each traced run also reports the ring-buffer bytes per stack record and the stack
cache's hits (from the JSON report; absent from builds without them).
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import enable_bpf_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUTPUT", os.path.join(ROOT, ".output"))
GPULEAK = os.environ.get("GPULEAK", os.path.join(ROOT, "gpuleak"))
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
SIZES = (4096, 65536, 1 << 20, 4 << 20, 16384, 262144, 2 << 20, 8192)

MODES = {
    "untraced": None,
    "floor": ["--bench-floor", "--tensors", "full"],
    "full": ["--tensors", "full"],
    "full-python": ["--tensors", "full", "--torch-stacks", "python"],
    "sampled": ["--tensors", "sampled"],
    "none": ["--tensors", "full", "--stacks", "none"],
    "idle": ["--tensor-window", "1s"],
    "default": [],
    "full-nocache": ["--tensors", "full", "--no-stack-cache"],
}


def nest(depth, fn):
    return fn() if depth <= 1 else nest(depth - 1, fn)


def workload(a):
    """The traced program: waits (--delay), runs the pair loop or the steps, prints JSON."""
    cuda = ctypes.CDLL(a.lib)
    torch = ctypes.CDLL(a.torch)
    ctx = ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    malloc, free = torch.faketorch_malloc, torch.faketorch_free
    malloc.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
    free.argtypes = [ctypes.c_void_p]
    dalloc, dfree = cuda.cuMemAlloc_v2, cuda.cuMemFree_v2
    dalloc.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
    dfree.argtypes = [ctypes.c_ulonglong]
    dptr = ctypes.c_ulonglong()
    sem = ctypes.c_ushort.in_dll(torch, "pytorch_malloc_semaphore")
    fsem = ctypes.c_ushort.in_dll(torch, "pytorch_free_semaphore")
    # the tracer attaches to the library once it is loaded: wait for the state measured
    # (raised, or raised then dropped again between windows)
    # Each state must hold for 100 ms: finding a process, the tracer attaches its
    # library's probes once and detaches them (a blip of the semaphores) before the
    # window that is measured opens.
    def state(want):  # raised: malloc's; dropped: both (a window's tail keeps free's)
        return sem.value > 0 if want else sem.value == 0 and fsem.value == 0

    for want in [int(x) for x in a.sem.split(",") if x]:
        deadline, since = time.monotonic() + 30, None
        while since is None or time.monotonic() - since < 0.1:
            if time.monotonic() > deadline:
                sys.exit(f"tensor_bench: the semaphore never became {want}")
            if not state(want):
                since = None
            elif since is None:
                since = time.monotonic()
            time.sleep(0.005)
    time.sleep(a.delay)
    base = 1 << 40
    res = {"semaphore": sem.value + fsem.value}

    def pairs(n):
        t0 = time.thread_time_ns()
        for i in range(n):
            p = base + (i & 1023) * 4096
            malloc(p, 0, SIZES[i & 7], 0)
            free(p)
        return time.thread_time_ns() - t0

    def steps(n, work):
        cpu, wall, leak = [], [], base + (1 << 36)
        for s in range(n):
            t0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            pairs(800)
            malloc(leak + s * 4096, 0, 4096, 0)
            if s % 5 == 0:
                assert dalloc(ctypes.byref(dptr), 2 << 20) == 0
                assert dfree(dptr) == 0
            x = 0
            for j in range(work):
                x += j
            cpu.append(time.thread_time_ns() - t0)
            wall.append(time.perf_counter_ns() - w0)
        return cpu, wall

    if a.pairs:
        pairs(min(a.pairs, 1000))  # warm-up
        res["pair_ns"] = nest(4, lambda: pairs(a.pairs)) / a.pairs
    if a.steps:
        nest(4, lambda: steps(2, a.work))
        cpu, wall = nest(4, lambda: steps(a.steps, a.work))
        res["step_cpu_ns"] = statistics.median(cpu)
        res["step_wall_ns"] = statistics.median(wall)
    with open(a.out, "w") as f:
        json.dump(res, f)


def private_libs(tmp):
    lib = os.path.join(tmp, "libbenchcuda.so.1")
    torch = os.path.join(tmp, "libbenchc10.so")
    shutil.copy(os.path.join(OUT, "fakecuda", "libcuda.so.1"), lib)
    shutil.copy(os.path.join(OUT, "faketorch", "libc10_cuda.so"), torch)
    return lib, torch


def one_run(mode, a, lib, torch):
    """The workload's JSON result under mode."""
    base_mode, old = mode.split("@")[0], mode.endswith("@old")
    sem = "" if MODES[base_mode] is None else "1,0" if base_mode == "idle" else "1"
    out = os.path.join(a.tmp, "wl.json")
    wl = [PYTHON, os.path.abspath(__file__), "--workload", "--lib", lib, "--torch",
          torch, "--out", out, "--pairs", str(a.pairs if a.what == "pair" else 0), "--steps",
          str(a.steps if a.what == "step" else 0), "--work", str(a.work), "--delay", "0.2",
          "--sem", sem]
    if MODES[base_mode] is None:
        subprocess.run(wl, check=True)
        return json.load(open(out))
    if old and not a.old:
        sys.exit(f"tensor_bench: mode {mode} needs --old GPULEAK")
    cmd = [a.old if old else GPULEAK, "run", "-q", "-i", "0", "--libcuda", lib,
           "--bench-torch-lib", "libbenchc10.so", *MODES[base_mode], "--json",
           os.path.join(a.tmp, "rep.json"), "--", *wl]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"gpuleak {' '.join(MODES[mode])} failed ({p.returncode}): "
                           f"{p.stderr[-2000:]}")
    res = json.load(open(out))
    rep = json.load(open(os.path.join(a.tmp, "rep.json")))
    if rep["lost_events"]:
        raise RuntimeError(f"{mode}: {rep['lost_events']} records lost")
    res["tensor_level"] = rep["processes"][0].get("tensor_level") if rep["processes"] else None
    st = rep.get("stats", {})
    # the kernel's run time of the tensor probes' programs (BPF_ENABLE_STATS, held by
    # measure()): gpuleak's own work on the calling thread, the traps apart
    progs = st.get("programs", {})
    if a.what == "pair" and all(progs.get(p, {}).get("runs") for p in TORCH_PROGS):
        res["bpf_prog_ns"] = {p: progs[p]["run_ns"] / progs[p]["runs"] for p in TORCH_PROGS}
        res["bpf_pair_ns"] = sum(res["bpf_prog_ns"].values())
    if st.get("stack_records"):
        res["ring_bytes_per_stack"] = st["stack_record_ring_bytes"] / st["stack_records"]
        res["stack_cache_hits"] = st.get("stack_cache_hits", 0)
        res["stack_records"] = st["stack_records"]
    return res


TORCH_PROGS = ("torch_malloc", "torch_free")


def default_modes():
    return [m for m in MODES if m != "full-nocache"]


def stat(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"median": statistics.median(xs), "q1": q[0], "q3": q[2], "n": len(xs)}


def measure(a, what, modes, log):
    a.what = what
    key = "pair_ns" if what == "pair" else "step_cpu_ns"
    runs = {m: [] for m in modes}
    stats_fd = enable_bpf_stats()
    with tempfile.TemporaryDirectory() as tmp:
        a.tmp = tmp
        lib, torch = private_libs(tmp)
        for rep in range(a.reps):
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for m in order:
                runs[m].append(one_run(m, a, lib, torch))
            log(f"{what} rep {rep + 1}/{a.reps}: " + ", ".join(
                f"{m} {runs[m][-1][key] / (1 if what == 'pair' else 1e6):.1f}" for m in modes))
    os.close(stats_fd)
    res = {"abs": {}, "ratio": {}, "semaphore": {}, "ring_bytes_per_stack": {},
           "stack_cache_hit_share": {}, "bpf_pair_ns": {}, "bpf_prog_ns": {},
           "bpf_over_old": {}, "own": {}}
    for m in modes:
        if all("bpf_pair_ns" in r for r in runs[m]):
            res["bpf_pair_ns"][m] = stat([r["bpf_pair_ns"] for r in runs[m]])
            res["bpf_prog_ns"][m] = {p: stat([r["bpf_prog_ns"][p] for r in runs[m]])
                                     for p in TORCH_PROGS}
        # this build against another's in the same mode, rep by rep
        old = runs.get(m + "@old")
        if old and all("bpf_pair_ns" in r for r in runs[m] + old):
            res["bpf_over_old"][m] = {
                p: stat([r["bpf_prog_ns"][p] / o["bpf_prog_ns"][p] for r, o in zip(runs[m], old)])
                for p in TORCH_PROGS}
            res["bpf_over_old"][m]["pair"] = stat([r["bpf_pair_ns"] / o["bpf_pair_ns"]
                                                   for r, o in zip(runs[m], old)])
        # gpuleak's own work on the calling thread: the mode against the empty programs
        # on the same probes, run by run
        if what == "pair" and "floor" in runs and m not in ("untraced", "floor"):
            res["own"][m] = stat([r[key] - f[key] for r, f in zip(runs[m], runs["floor"])])
        res["abs"][m] = stat([r[key] for r in runs[m]])
        if all("ring_bytes_per_stack" in r for r in runs[m]):
            res["ring_bytes_per_stack"][m] = stat([r["ring_bytes_per_stack"] for r in runs[m]])
            res["stack_cache_hit_share"][m] = stat([r["stack_cache_hits"] / r["stack_records"]
                                                    for r in runs[m]])
        res["semaphore"][m] = max(r["semaphore"] for r in runs[m])
        if what == "step":
            res["abs"][m + " wall"] = stat([r["step_wall_ns"] for r in runs[m]])
        if m == "untraced":
            continue
        if what == "pair":
            res["ratio"][m] = stat([r[key] - u[key] for r, u in zip(runs[m], runs["untraced"])])
        else:
            res["ratio"][m] = stat([100 * (r[key] / u[key] - 1)
                                    for r, u in zip(runs[m], runs["untraced"])])
            res["ratio"][m + " wall"] = stat([100 * (r["step_wall_ns"] / u["step_wall_ns"] - 1)
                                              for r, u in zip(runs[m], runs["untraced"])])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", action="store_true")
    ap.add_argument("--lib")
    ap.add_argument("--torch")
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--out")
    ap.add_argument("--sem", default="", help="semaphore states to wait for, e.g. 1,0")
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--work", type=int, default=1500000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--only", default="pair,step")
    ap.add_argument("--modes", default=",".join(default_modes()))
    ap.add_argument("--old", help="another gpuleak binary, for the modes named MODE@old")
    ap.add_argument("--json", default=os.path.join(OUT, "bench", "tensor.json"))
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.workload:
        return workload(a)
    if a.smoke:
        a.pairs, a.steps, a.work, a.reps = 200, 2, 1000, 1
    modes = a.modes.split(",")

    def log(msg):
        print(f"tensor_bench: {msg}", file=sys.stderr, flush=True)

    res = {"config": {"pairs": a.pairs, "steps": a.steps, "work": a.work, "reps": a.reps,
                      "load_1min": os.getloadavg()[0]}}
    for what in a.only.split(","):
        res[what] = measure(a, what, modes, log)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    if "pair" in res:
        print(f"tensor-block pair (malloc + free), CPU ns of the calling thread, {a.pairs} "
              f"pairs x {a.reps} interleaved runs: median [IQR]")
        for m, s in res["pair"]["abs"].items():
            add = res["pair"]["ratio"].get(m)
            rb = res["pair"]["ring_bytes_per_stack"].get(m)
            hit = res["pair"]["stack_cache_hit_share"].get(m)
            print(f"  {m:<16} {s['median']:8.0f} [{s['q1']:.0f}-{s['q3']:.0f}]" +
                  (f"   added {add['median']:7.0f} [{add['q1']:.0f}-{add['q3']:.0f}]" if add
                   else "") +
                  (f"   {rb['median']:.0f} ring bytes/stack, {100 * hit['median']:.1f} % by id"
                   if rb else ""))
        if res["pair"]["own"] or res["pair"]["bpf_pair_ns"]:
            print("gpuleak's own work per pair, ns, median [IQR]: the calling thread's CPU less "
                  "the floor's (same rep), and the BPF programs' run time (torch_malloc + "
                  "torch_free, the kernel's statistics)")
        for m in modes:
            own = res["pair"]["own"].get(m)
            bpf = res["pair"]["bpf_pair_ns"].get(m)
            if own or bpf:
                print(f"  {m:<16}" +
                      (f" thread - floor {own['median']:7.0f} [{own['q1']:.0f}-{own['q3']:.0f}]"
                       if own else " " * 38) +
                      (f"   BPF {bpf['median']:6.0f} [{bpf['q1']:.0f}-{bpf['q3']:.0f}]"
                       if bpf else ""))
        progs = res["pair"]["bpf_prog_ns"]
        if any(m != "floor" for m in progs):
            print("BPF ns per program run, median [IQR]" +
                  (", and this build over --old's, per rep" if res["pair"]["bpf_over_old"]
                   else "") + ":")
        for m, per in progs.items():
            if m == "floor":
                continue
            print(f"  {m:<16}" + "".join(
                f"   {p} {per[p]['median']:6.0f} [{per[p]['q1']:.0f}-{per[p]['q3']:.0f}]"
                for p in TORCH_PROGS))
        for m, r in res["pair"]["bpf_over_old"].items():
            print(f"  {m + ' / ' + m + '@old':<16}" + "".join(
                f"   {p} {r[p]['median']:.3f} [{r[p]['q1']:.3f}-{r[p]['q3']:.3f}]"
                for p in TORCH_PROGS + ("pair",)))
    if "step" in res:
        print(f"step of 800 pairs + fixed work, {a.steps} steps x {a.reps} interleaved runs: "
              f"overhead % per run against the same rep's untraced, median [IQR]")
        for m, s in res["step"]["ratio"].items():
            print(f"  {m:<18} {s['median']:+7.2f} % [{s['q1']:+.2f} to {s['q3']:+.2f}]")
        u = res["step"]["abs"]["untraced"]
        print(f"  untraced step: {u['median'] / 1e6:.1f} ms CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
