# SPDX-License-Identifier: BSD-2-Clause
"""Capacity: the record rate user space sustains without losing any, the pure
decode+aggregate rate of one core, the tracer's memory per outstanding allocation and
per distinct stack, its peak resident memory under loads of many stacks, and the time
from start to attached for -a with many processes.
"""
import json
import os
import signal
import tempfile
import time

from benchlib import (ALLOC_LOOP, BOOKS_BENCH, GPULEAK, BenchError, Proc, Stats,
                      bpf_maps_memlock, kv, private_lib, rss_kib, run, scan_lib)


def _gpuleak_run(lib, tmp, opts, load, timeout=300):
    json_path = os.path.join(tmp, f"gl.{time.monotonic_ns()}.json")
    out = run([GPULEAK, "run", "-q", "-i", "0", "--libcuda", lib, "--json", json_path,
               *opts, "--", *load], timeout)
    with open(json_path) as f:
        return out, json.load(f)


def throughput_point(lib, tmp, threads, rate, seconds, ringbuf):
    """One run of threads producers at rate pairs/s in total (0: as fast as they can)."""
    per_thread = max(200, int((rate or 40000) * seconds / threads))
    load = [ALLOC_LOOP, "--lib", lib, "--threads", str(threads), "--pairs", str(per_thread),
            "--warmup", "0", "--rate", str(rate)]
    out, rep = _gpuleak_run(lib, tmp, ["--stacks", "fp", "--ringbuf-size", str(ringbuf)],
                            load)
    wl = kv(out, ("pairs_per_s",))
    calls = sum(p["alloc_calls"] + p["free_calls"] for p in rep["processes"])
    allocs = sum(p["alloc_calls"] for p in rep["processes"])
    records = calls + allocs  # a call record per call, a stack record per allocation
    return {"threads": threads, "target_pairs_per_s": rate, "ringbuf_bytes": ringbuf,
            "pairs_per_s": wl["pairs_per_s"], "records_per_s": records / wl["seconds"],
            "lost_events": rep["lost_events"], "complete": rep["complete"]}


def throughput(rates, threads, seconds, ringbufs, log):
    """Sweeps the producers' rate; returns every point and the sustained/dropping rates."""
    lib = private_lib()
    points = []
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        for ringbuf in ringbufs:
            for rate in rates:
                p = throughput_point(lib, tmp, threads, rate, seconds, ringbuf)
                points.append(p)
                log(f"throughput: ring {ringbuf >> 10} KiB, target {rate or 'max'} pairs/s: "
                    f"{p['records_per_s']:.0f} records/s, lost {p['lost_events']}")
    result = {"threads": threads, "seconds": seconds, "points": points, "summary": {}}
    for ringbuf in ringbufs:
        pts = [p for p in points if p["ringbuf_bytes"] == ringbuf]
        ok = [p["records_per_s"] for p in pts if p["lost_events"] == 0]
        lossy = [p["records_per_s"] for p in pts if p["lost_events"] > 0]
        result["summary"][str(ringbuf)] = {
            "max_lossless_records_per_s": max(ok) if ok else None,
            "min_lossy_records_per_s": min(lossy) if lossy else None}
    return result


def books(pairs, reps, log):
    """Records/s through books__apply on one core, with and without stack records."""
    out = {}
    for name, extra in (("fp stacks, 64 distinct, 24 frames", []),
                        ("call records only", ["--no-stacks"])):
        vals = [kv(run([BOOKS_BENCH, "--pairs", str(pairs), *extra], 120),
                   ("records_per_s",))["records_per_s"] for _ in range(reps)]
        out[name] = Stats(vals).as_dict()
        log(f"books: {name}: {Stats(vals).fmt()} records/s")
    return out


def _settled_rss(pid, timeout=60, quiet_s=1.0):
    """RSS (KiB) of pid once it has not changed for quiet_s."""
    deadline = time.monotonic() + timeout
    last, since = rss_kib(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        cur = rss_kib(pid)
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return cur
    raise BenchError(f"the RSS of PID {pid} did not settle within {timeout} s")


def held(lib, tmp, keep, sites):
    """gpuleak's RSS and BPF map memory while the load holds keep allocations."""
    json_path = os.path.join(tmp, f"gl.{time.monotonic_ns()}.json")
    load = [ALLOC_LOOP, "--lib", lib, "--keep", str(keep), "--sites", str(sites),
            "--size", "512"]
    gl = Proc([GPULEAK, "run", "-q", "-i", "0", "--stacks", "fp", "--libcuda", lib,
               "--json", json_path, "--", *load], tmp, "gpuleak", stdin=True)
    try:
        gl.wait_for(r"kept=\d+", 300, stream="stdout")
        rss = _settled_rss(gl.pid)
        maps = bpf_maps_memlock(gl.pid)
        gl.send("exit")
        if gl.stop(None, 120) != 0:
            raise BenchError(f"gpuleak failed:\n{gl.stderr()[-1500:]}")
    finally:
        gl.kill()
    with open(json_path) as f:
        rep = json.load(f)
    outstanding = max(p["bpf"]["alloc_calls"] for p in rep["processes"])
    if rep["lost_events"] or outstanding < keep:
        raise BenchError(f"gpuleak saw {outstanding} of {keep} allocations "
                         f"(lost {rep['lost_events']})")
    return {"rss_kib": rss, "bpf_maps": maps}


def memory(keep, stacks_keep, sites, log):
    """Bytes of tracer RSS per outstanding allocation and per distinct stack."""
    lib = private_lib()
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        small = held(lib, tmp, 1000, 1)
        big = held(lib, tmp, keep, 1)
        one = held(lib, tmp, stacks_keep, 1)
        many = held(lib, tmp, stacks_keep, sites)
    per_alloc = (big["rss_kib"] - small["rss_kib"]) * 1024 / (keep - 1000)
    per_stack = (many["rss_kib"] - one["rss_kib"]) * 1024 / (sites - 1)
    kernel = big["bpf_maps"].get("allocs", 0) - small["bpf_maps"].get("allocs", 0)
    result = {
        "outstanding": keep,
        "rss_kib": {"1000 allocations": small["rss_kib"], f"{keep} allocations": big["rss_kib"]},
        "rss_bytes_per_allocation": per_alloc,
        "bpf_allocs_map_bytes_per_allocation": kernel / (keep - 1000),
        "bpf_maps_bytes": big["bpf_maps"],
        "distinct_stacks": sites,
        "rss_bytes_per_stack": per_stack,
    }
    log(f"memory: {per_alloc:.1f} B RSS per allocation, {kernel / (keep - 1000):.1f} B of "
        f"BPF map per allocation, {per_stack:.0f} B RSS per distinct stack")
    return result


def _vm_hwm_kib(pid):
    """The peak resident size (VmHWM, KiB) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_point(gpuleak, lib, tmp, keep, sites):
    """gpuleak run (DWARF stacks, the default) of a load that keeps keep allocations over
    sites distinct stacks, made as fast as it goes: gpuleak's peak resident size, read
    until it exits, and what its report says of losses."""
    json_path = os.path.join(tmp, f"gl.{time.monotonic_ns()}.json")
    load = [ALLOC_LOOP, "--lib", lib, "--keep", str(keep), "--sites", str(sites),
            "--size", "512"]
    gl = Proc([gpuleak, "run", "-q", "-i", "0", "--libcuda", lib, "--json", json_path,
               "--", *load], tmp, "gpuleak", stdin=True)
    peak = 0
    try:
        deadline = time.monotonic() + 300
        while "kept=" not in gl.stdout() and gl.p.poll() is None:
            if time.monotonic() > deadline:
                raise BenchError(f"the load kept nothing in 300 s:\n{gl.stderr()[-1500:]}")
            peak = _vm_hwm_kib(gl.pid) or peak
            time.sleep(0.02)
        gl.send("exit")
        while gl.p.poll() is None:
            peak = _vm_hwm_kib(gl.pid) or peak
            time.sleep(0.02)
        if gl.stop(None, 120) != 0:
            raise BenchError(f"gpuleak failed:\n{gl.stderr()[-1500:]}")
    finally:
        gl.kill()
    with open(json_path) as f:
        rep = json.load(f)
    return {"vm_hwm_kib": peak, "lost_events": rep["lost_events"],
            "complete": rep["complete"],
            "stack_cache_hits": rep["stats"].get("stack_cache_hits")}


def peak(loads, reps, old, log):
    """gpuleak's peak resident memory (VmHWM) under each load: this build's and --old's
    runs interleaved, in alternating order, rep after rep."""
    lib = private_lib()
    binaries = [("gpuleak", GPULEAK)] + ([("old", old)] if old else [])
    res = {}
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        for keep, sites in loads:
            name = f"{keep} outstanding, {sites} stacks"
            got = {b: [] for b, _ in binaries}
            for r in range(reps):
                for b, path in (binaries if r % 2 == 0 else binaries[::-1]):
                    got[b].append(peak_point(path, lib, tmp, keep, sites))
                log(f"peak: {name}, rep {r + 1}/{reps}: " + ", ".join(
                    f"{b} {got[b][-1]['vm_hwm_kib']} KiB, lost {got[b][-1]['lost_events']}"
                    for b, _ in binaries))
            res[name] = {b: {"vm_hwm_mib": Stats([p["vm_hwm_kib"] / 1024 for p in pts]).as_dict(),
                             "lost_events": [p["lost_events"] for p in pts],
                             "complete": [p["complete"] for p in pts]}
                         for b, pts in got.items()}
            if old:
                res[name]["gpuleak_over_old"] = Stats(
                    [a["vm_hwm_kib"] / o["vm_hwm_kib"]
                     for a, o in zip(got["gpuleak"], got["old"])]).as_dict()
    return res


def attach(nprocs, reps, log):
    """Seconds from starting `gpuleak attach -a` to its attached line, nprocs waiting."""
    lib = scan_lib()
    times, procs = [], []
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        try:
            for i in range(nprocs):
                procs.append(Proc([ALLOC_LOOP, "--lib", lib, "--wait", "--pairs", "1"],
                                  tmp, f"wait{i}", stdin=True))
            for p in procs:
                p.wait_for(r"ready \d+", 30, stream="stdout")
            for _ in range(reps):
                gl = Proc([GPULEAK, "attach", "-a", "-i", "0"], tmp, "gpuleak")
                try:
                    times.append(gl.wait_for(r"tracing every process", 60))
                    gl.stop()
                finally:
                    gl.kill()
        finally:
            for p in procs:
                p.kill()
    s = Stats(times)
    log(f"attach -a with {nprocs} processes: {s.fmt(3)} s")
    return {"processes": nprocs, "seconds": s.as_dict()}
