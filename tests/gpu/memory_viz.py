#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A check on a GPU machine, as root, from the repository root (gpuleak built with
'make STATIC=1' and copied along): a real PyTorch job that leaks (each step's output kept on
the GPU) is attached by gpuleak without a restart (--tensors full --memory-viz). At one
moment the job takes its own torch.cuda.memory._snapshot() and waits while gpuleak stops and
writes its snapshot; the two are compared (segments by address, the active blocks in each)
and both are rendered with PyTorch's trace_plot and segment_plot.

Usage: tests/gpu/memory_viz.py OUTDIR [GPULEAK]   (PYTHON: an interpreter with torch)
OUTDIR gets job.pickle, gpuleak.pickle, gpuleak.trace.json (--perfetto), compare.json
(with the end of gpuleak's stderr), the HTML of gpuleak's snapshot (trace_plot, segment_plot: the job's own can
be rendered into the same page) and, when the installed torch has it, MemoryViz.js (the
pages load it from a CDN): seven files."""
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time

JOB = r"""
import os, pickle, sys, time, torch
out, flag = sys.argv[1], sys.argv[2]
torch.cuda.memory._record_memory_history(max_entries=20000)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters())
kept = []  # the leak: each step's output stays on the GPU
print("ready", os.getpid(), flush=True)
while True:
    x = torch.randn(256, 1024, device="cuda")
    y = model(x)
    loss = y.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(y.detach())
    if os.path.exists(flag + ".take"):
        torch.cuda.synchronize()
        with open(out, "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f)
        print("snapshot", len(kept), flush=True)
        while not os.path.exists(flag + ".resume"):
            time.sleep(0.05)
        break
    time.sleep(0.01)
"""


def blocks_of(snap):
    """{segment address: (total_size, {block address: (size, requested_size)})} of the
    active blocks."""
    segs = {}
    for s in snap["segments"]:
        addr, blocks = s["address"], {}
        for b in s["blocks"]:
            a = b.get("address", addr)
            if b["state"] == "active_allocated":
                blocks[a] = (b["size"], b.get("requested_size", b["size"]))
            addr = a + b["size"]
        segs[s["address"]] = (s["total_size"], blocks)
    return segs


def compare(job, gl):
    j, g = blocks_of(job), blocks_of(gl)
    common = sorted(set(j) & set(g))
    res = {"job_segments": len(j), "gpuleak_segments": len(g), "common_segments": len(common),
           "segments_only_in_gpuleak": sorted(set(g) - set(j)),
           "job_segments_before_attach": len(set(j) - set(g)),
           "job_bytes_in_those": sum(j[a][0] for a in set(j) - set(g)),
           "same_total_size": sum(j[a][0] == g[a][0] for a in common),
           "blocks_job": sum(len(j[a][1]) for a in common),
           "blocks_gpuleak": sum(len(g[a][1]) for a in common),
           "blocks_same_address": 0, "blocks_same_size": 0, "blocks_same_requested": 0,
           "examples_differing": []}
    for a in common:
        jb, gb = j[a][1], g[a][1]
        for addr, (size, req) in gb.items():
            if addr in jb:
                res["blocks_same_address"] += 1
                res["blocks_same_size"] += jb[addr][0] == size
                res["blocks_same_requested"] += jb[addr][1] == size
                if jb[addr][1] != size and len(res["examples_differing"]) < 5:
                    res["examples_differing"].append([addr, jb[addr], size])
    res["bytes_job_active_common"] = sum(s for a in common for s, _ in j[a][1].values())
    res["bytes_gpuleak_active_common"] = sum(s for a in common for s, _ in g[a][1].values())
    # device_traces: gpuleak's events since attach against the job's own recorder's, as
    # (action, address, size) multisets per action (gpuleak's sizes are the requested ones)
    import collections
    ev = lambda snap: [(e["action"], e["addr"], e["size"]) for t in snap["device_traces"]
                       for e in t]
    ge, je = ev(gl), ev(job)
    req = {}
    for s in job["segments"]:
        for b in s["blocks"]:
            req[b.get("address")] = b.get("requested_size")
    res["traces"] = {}
    for action in ("alloc", "free_completed", "segment_alloc", "segment_free"):
        g_c = collections.Counter((a, s) for x, a, s in ge if x == action)
        j_c = collections.Counter((a, s) for x, a, s in je if x == action)
        j_addr = collections.Counter(a for x, a, s in je if x == action)
        g_addr = collections.Counter(a for x, a, s in ge if x == action)
        res["traces"][action] = {"gpuleak": sum(g_c.values()), "job": sum(j_c.values()),
                                 "same_addr_size": sum((g_c & j_c).values()),
                                 "same_addr": sum((g_addr & j_addr).values())}
    res["trace_examples"] = {"gpuleak": gl["device_traces"][0][:3] if gl["device_traces"]
                             else [], "job": [{k: v for k, v in e.items() if k != "frames"}
                                              for e in job["device_traces"][0][-3:]]}
    return res


def main():
    out = os.path.abspath(sys.argv[1])
    gpuleak = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "gpuleak")
    py = os.environ.get("PYTHON", sys.executable)
    os.makedirs(out, exist_ok=True)
    flag = os.path.join(out, "flag")
    job = subprocess.Popen([py, "-c", JOB, os.path.join(out, "job.pickle"), flag],
                           stdout=subprocess.PIPE, text=True)
    pid = int(job.stdout.readline().split()[1])
    time.sleep(2)  # some segments before attach, as in a job that has run a while
    gl = subprocess.Popen([gpuleak, "attach", str(pid), "-i", "0", "--tensors", "full",
                           "--memory-viz", os.path.join(out, "gpuleak.pickle"),
                           "--perfetto", os.path.join(out, "gpuleak.trace.json"),
                           "--json", "/tmp/gpuleak-memory-viz-report.json"],
                          stderr=open("/tmp/gpuleak-memory-viz.err", "w"))
    deadline = time.time() + 60
    while "attached to PID" not in open("/tmp/gpuleak-memory-viz.err").read():
        if time.time() > deadline or gl.poll() is not None:
            raise SystemExit("gpuleak did not attach: "
                             + open("/tmp/gpuleak-memory-viz.err").read()[-2000:])
        time.sleep(0.1)
    time.sleep(8)
    open(flag + ".take", "w").close()
    line = job.stdout.readline()
    t0 = time.time()
    gl.send_signal(signal.SIGINT)
    rc = gl.wait(120)
    stop_s = time.time() - t0
    open(flag + ".resume", "w").close()
    job.wait(60)
    with open(os.path.join(out, "job.pickle"), "rb") as f:
        job_snap = pickle.load(f)
    with open(os.path.join(out, "gpuleak.pickle"), "rb") as f:
        gl_snap = pickle.load(f)
    res = compare(job_snap, gl_snap)
    res.update({"job_said": line.strip(), "gpuleak_exit": rc, "gpuleak_stop_s": stop_s,
                "gpuleak_entry": gl_snap.get("gpuleak"),
                "gpuleak_stderr": open("/tmp/gpuleak-memory-viz.err").read()[-3000:]})
    from torch.cuda import _memory_viz as mv
    for name, snap, kinds in (("gpuleak", gl_snap, ("trace", "segments")),):
        for kind, fn in (("trace", mv.trace_plot), ("segments", mv.segment_plot)):
            if kind not in kinds:
                continue
            try:
                with open(os.path.join(out, f"{name}_{kind}.html"), "w") as f:
                    f.write(fn(snap))
                res[f"{name}_{kind}_plot"] = "written"
            except Exception as e:  # noqa: BLE001 - said in compare.json
                res[f"{name}_{kind}_plot"] = f"failed: {e!r}"
    viz = os.path.join(os.path.dirname(mv.__file__), "..", "utils", "viz", "MemoryViz.js")
    if os.path.exists(viz):
        shutil.copy(viz, os.path.join(out, "MemoryViz.js"))
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
