#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A check on a GPU machine, as root, from the repository root (gpuleak built with
'make STATIC=1' and copied along): `gpuleak serve --state-dir` runs; a real PyTorch job
keeps 1 GiB a step on the GPU until the device is full, PyTorch's retry after freeing its
cache fails too, and the job dies of its OutOfMemoryError. The job's own out-of-memory
observer takes torch.cuda.memory._snapshot() at that moment. The check compares the
incident bundle serve wrote with that snapshot: PyTorch's reserved and allocated bytes,
its blocks; serve runs with --census-on-oom, so the bundle's census names what held the
leaked tensors (and how long the job was held for it).

Usage: tests/gpu/incident_oom.py OUTFILE [GPULEAK]   (PYTHON: an interpreter with torch)
OUTFILE gets the comparison as JSON, with the bundle's incident.json and report.txt."""
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

JOB = r"""
import os, pickle, sys, time, torch
out = sys.argv[1]
def observer(device, alloc, device_alloc, device_free):
    with open(out, "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
torch._C._cuda_attach_out_of_memory_observer(observer)
x = torch.ones(1, device="cuda")
print("ready", os.getpid(), flush=True)
time.sleep(3)  # serve attaches its libcuda and PyTorch's probes
kept = []
while True:
    kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))  # the leak
    time.sleep(0.02)
"""


def main():
    out = os.path.abspath(sys.argv[1])
    gpuleak = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "gpuleak")
    py = os.environ.get("PYTHON", sys.executable)
    state = tempfile.mkdtemp(prefix="gpuleak-state-")
    port = 19467
    agent = subprocess.Popen([gpuleak, "serve", "--listen", f"127.0.0.1:{port}",
                              "--state-dir", state, "--tensors", "full", "--census-on-oom"],
                             stderr=open("/tmp/gpuleak-serve.err", "w"))
    time.sleep(3)
    snap_path = os.path.join(state, "..", "job-oom.pickle")
    t0 = time.time()
    job = subprocess.run([py, "-c", JOB, snap_path], capture_output=True, text=True,
                         timeout=300)
    res = {"job_exit": job.returncode, "job_s": time.time() - t0,
           "job_stderr_tail": job.stderr[-600:]}
    time.sleep(2)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/incidents", timeout=10) as r:
        listed = json.loads(r.read())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        res["incident_metrics"] = [ln for ln in r.read().decode().splitlines()
                                   if ln.startswith("gpuleak_incident")]
    agent.send_signal(signal.SIGTERM)
    agent.wait(60)
    res["listed"] = [i["name"] for i in listed["incidents"]]
    res["serve_stderr_tail"] = open("/tmp/gpuleak-serve.err").read()[-2500:]
    oom = [n for n in res["listed"] if n.endswith("-oom")]
    if oom:
        d = os.path.join(state, "incidents", oom[-1])
        with open(os.path.join(d, "incident.json")) as f:
            res["incident"] = json.load(f)
        with open(os.path.join(d, "report.txt")) as f:
            res["report_txt"] = f.read()[:6000]
        if os.path.exists(os.path.join(d, "census.json")):
            with open(os.path.join(d, "census.json")) as f:
                c = json.load(f)
            res["census"] = {"groups": c["groups"][:5], "leaks": c["join"]["leaks"][:3],
                             "tensors_found": c["tensors_found"],
                             "pause_ns": c.get("pause_ns"),
                             "no_holder": c["no_holder"]}
            with open(os.path.join(d, "census.txt")) as f:
                res["census_txt"] = f.read()[:3000]
        with open(os.path.join(d, "report.json")) as f:
            p = json.load(f)["processes"][0]
        res["bundle"] = {k: p.get(k) for k in ("torch_reserved_bytes", "torch_allocated_bytes",
                                                "torch_blocks", "device_bytes")}
        res["bundle"]["memory"] = {k: v for k, v in p.get("memory", {}).items()
                                   if not isinstance(v, (list, dict))}
        res["bundle"]["ooms"] = [{k: f.get(k) for k in ("bytes", "error", "torch_retry",
                                                        "is_torch_retry")}
                                 for f in p.get("failures_list", [])]
    if os.path.exists(snap_path):
        with open(snap_path, "rb") as f:
            snap = pickle.load(f)
        segs = snap["segments"]
        res["job_snapshot"] = {
            "segments": len(segs),
            "reserved": sum(s["total_size"] for s in segs),
            "allocated": sum(b["size"] for s in segs for b in s["blocks"]
                             if b["state"] == "active_allocated"),
            "requested": sum(b.get("requested_size", 0) for s in segs for b in s["blocks"]
                             if b["state"] == "active_allocated"),
            "active_blocks": sum(b["state"] == "active_allocated" for s in segs
                                 for b in s["blocks"]),
        }
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "report_txt"}, indent=1))
    shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
