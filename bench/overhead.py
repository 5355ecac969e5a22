# SPDX-License-Identifier: BSD-2-Clause
"""Per-call overhead: a tight cuMemAlloc_v2 + cuMemFree_v2 loop (C, and Python through
ctypes) untraced, under the do-nothing floor programs, under gpuleak in each stack mode,
and under the bpftrace script a user would write today (bench/leak.bt).

The configurations run interleaved, in a rotating order, rep after rep, so that each
rep's figures were measured side by side; ratios are computed per rep and summarized
by their median.
"""
import json
import os
import shutil
import tempfile

from benchlib import (ALLOC_LOOP, ALLOC_LOOP_PY, GPULEAK, ROOT, BenchError, Stats, kv,
                      private_lib, python_exe, run)

BPFTRACE_SCRIPT = os.path.join(ROOT, "bench", "leak.bt")
WARMUP = 1000


def load_argv(kind, lib, pairs):
    """The load: "c" (alloc_loop.c), "py" (ctypes) or "torch" (PyTorch without caching)."""
    if kind == "c":
        return [ALLOC_LOOP, "--lib", lib, "--pairs", str(pairs), "--warmup", str(WARMUP)]
    extra = ["--torch"] if kind == "torch" else []
    return [python_exe(), ALLOC_LOOP_PY, "--lib", lib, "--pairs", str(pairs),
            "--warmup", str(WARMUP), *extra]


def gpuleak_argv(opts, lib, tmp, load):
    json_path = os.path.join(tmp, "gpuleak.json")
    return [GPULEAK, "run", "-q", "-i", "0", "--libcuda", lib, "--json", json_path,
            *opts, "--", *load], json_path


def bpftrace_script(lib, tmp):
    with open(BPFTRACE_SCRIPT) as f:
        text = f.read().replace("@LIB@", lib)
    path = os.path.join(tmp, "leak.bt")
    with open(path, "w") as f:
        f.write(text)
    return path


class Config:
    def __init__(self, name, opts=None, tracer="gpuleak"):
        self.name = name
        self.opts = opts
        self.tracer = tracer  # None (untraced), "gpuleak" or "bpftrace"

    def measure(self, kind, lib, pairs, tmp):
        """ns per pair of one run; checks that a gpuleak run saw every call."""
        load = load_argv(kind, lib, pairs)
        if self.tracer is None:
            return kv(run(load, 120), ("cpu_ns_per_pair",))["cpu_ns_per_pair"]
        if self.tracer == "bpftrace":
            out = run(["bpftrace", "-c", " ".join(load), bpftrace_script(lib, tmp)], 180)
            return kv(out, ("cpu_ns_per_pair",))["cpu_ns_per_pair"]
        argv, json_path = gpuleak_argv(self.opts, lib, tmp, load)
        ns = kv(run(argv, 180), ("cpu_ns_per_pair",))["cpu_ns_per_pair"]
        with open(json_path) as f:
            report = json.load(f)
        if "--bench-floor" in self.opts:
            check_floor(report)
        else:
            check_books(report, pairs + WARMUP)
        return ns


def check_floor(report):
    """The floor's programs count nothing: what shows that the load ran under them is
    that they were attached to its library."""
    if not report.get("probes"):
        raise BenchError(f"the floor attached no probe: {report.get('probes')}")


def check_books(report, calls):
    procs = report["processes"]
    if report["lost_events"] or not procs or procs[0]["alloc_calls"] < calls:
        raise BenchError(f"gpuleak did not see every call: lost {report['lost_events']}, "
                         f"calls {[p['alloc_calls'] for p in procs]}, want {calls}")


def bpftrace_status(lib, tmp):
    """None when bpftrace attaches here, else why not."""
    if not shutil.which("bpftrace"):
        return "bpftrace is not installed (bench/run installs the Debian package)"
    try:
        out = run(["bpftrace", "-c", " ".join(load_argv("c", lib, 10)),
                   bpftrace_script(lib, tmp)], 120)
    except BenchError as e:
        return f"bpftrace failed: {str(e)[-600:]}"
    if "ns_per_pair=" not in out or "@outstanding" not in out:
        return f"bpftrace ran but printed no books:\n{out[-600:]}"
    return None


NATIVE = [
    Config("untraced", tracer=None),
    Config("floor", ["--bench-floor"]),
    Config("gpuleak none", ["--stacks", "none"]),
    Config("gpuleak fp", ["--stacks", "fp"]),
    Config("gpuleak dwarf", ["--stacks", "dwarf"]),
    Config("bpftrace", tracer="bpftrace"),
]

PYTHON = [
    Config("untraced", tracer=None),
    Config("floor", ["--bench-floor"]),
    Config("gpuleak fp, no Python", ["--stacks", "fp", "--no-python"]),
    Config("gpuleak fp+Python", ["--stacks", "fp"]),
    Config("gpuleak dwarf+Python", ["--stacks", "dwarf"]),
]


def measure_suite(kind, configs, pairs, reps, log, lib):
    """{config: [ns per pair, one per rep]}, measured interleaved."""
    samples = {c.name: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        for r in range(reps):
            k = r % len(configs)
            for c in configs[k:] + configs[:k]:
                samples[c.name].append(c.measure(kind, lib, pairs, tmp))
            log(f"{kind} rep {r + 1}/{reps}: " +
                ", ".join(f"{c.name} {samples[c.name][-1]:.0f}" for c in configs))
    return samples


def added_ratio(samples, num, den, base="untraced"):
    """Per rep (num - base) / (den - base), summarized."""
    vals = []
    for n, d, b in zip(samples[num], samples[den], samples[base]):
        if d - b > 0:
            vals.append((n - b) / (d - b))
    return Stats(vals) if vals else None


LOADS = {"c": "bench/alloc_loop.c", "py": "bench/alloc_loop.py",
         "torch": "bench/alloc_loop.py --torch (PyTorch, no caching)"}


def overhead(kind, pairs, reps, log, with_bpftrace=True, modes=None, lib=None):
    """Runs the suite of a load (see load_argv) against lib (default: a private copy
    of the stand-in); returns its results as a dict."""
    configs = NATIVE if kind == "c" else PYTHON
    if modes is not None:
        configs = [c for c in configs if c.name in modes]
    lib = lib or private_lib()
    result = {"load": LOADS[kind], "lib": lib, "pairs": pairs, "reps": reps}
    if kind == "c" and any(c.tracer == "bpftrace" for c in configs):
        with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
            why = bpftrace_status(lib, tmp) if with_bpftrace else "not run"
        if why:
            result["bpftrace_unavailable"] = why
            configs = [c for c in configs if c.tracer != "bpftrace"]
    samples = measure_suite(kind, configs, pairs, reps, log, lib)
    result["cpu_ns_per_pair"] = {k: Stats(v).as_dict() for k, v in samples.items()}
    ratios = {}
    for c in configs:
        if c.tracer == "gpuleak" and c.name != "floor":
            s = added_ratio(samples, c.name, "floor")
            if s:
                ratios[f"({c.name} - untraced) / (floor - untraced)"] = s.as_dict()
    if "bpftrace" in samples:
        for name in ("gpuleak fp", "gpuleak none"):
            s = added_ratio(samples, name, "bpftrace") if name in samples else None
            if s:
                ratios[f"({name} - untraced) / (bpftrace - untraced)"] = s.as_dict()
    result["ratios"] = ratios
    return result
