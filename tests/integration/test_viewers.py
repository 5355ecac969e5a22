# SPDX-License-Identifier: BSD-2-Clause
"""The files gpuleak writes for the viewers people already open: PyTorch's memory_viz
snapshot, read back by Debian's real PyTorch (1.13, CPU), against the books and the
workload's own truth."""
import json
import os
import subprocess

from harness import (GPULEAK, Tracer, Workload, attach_workload, check, check_eq,
                     finish_attached, process)

PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch

# Loads a snapshot the way PyTorch's memory_viz does and prints what it read: 1.13's
# segments(), memory() and stats() take the list of segments (stats() asserts that each
# segment's blocks add up to it).
_READ = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
segs = snap["segments"]
keep = lambda text: text
out = {
    "stats": {k: getattr(v, "value", v) for k, v in mv.stats(segs).items()},
    "segments_folded": mv.segments(segs, format_flamegraph=keep),
    "memory_folded": mv.memory(segs, format_flamegraph=keep),
    "blocks": [[b["state"], b["size"], [f["name"] for f in b["frames"]]]
               for s in segs for b in s["blocks"]],
    "nsegs": len(segs), "total": sum(s["total_size"] for s in segs),
    "traces": [len(t) for t in snap["device_traces"]],
    "gpuleak": snap["gpuleak"],
}
print(json.dumps(out))
"""


def _read(path):
    p = subprocess.run([PYTHON, "-c", _READ, path], capture_output=True, text=True,
                       timeout=120)
    check_eq(p.returncode, 0, f"Debian's PyTorch reads the snapshot ({p.stderr[-2000:]})")
    return json.loads(p.stdout)


def test_memory_viz_snapshot_loads_in_pytorch_and_equals_the_books(tmp):
    """--tensors full: every block since attach is seen. The snapshot's active blocks are
    the books' (count and bytes, the truth's too), under their stacks (the leaking line's
    blocks name it); each segment is tiled by its blocks and free spans ("inactive"), as
    PyTorch's stats() checks; device_traces is there, empty; complete."""
    path = os.path.join(tmp, "snapshot.pickle")
    wl, tr = attach_workload(tmp, "wl_torch", tracer_args=("--tensors", "full",
                                                           "--memory-viz", path), go=False)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    got = _read(path)
    active = [b for b in got["blocks"] if b[0] == "active_allocated"]
    check_eq(len(active), p["torch_blocks"], "active blocks, as the books count them")
    check_eq(len(active), truth["torch_blocks"], "active blocks, as the workload counts them")
    check_eq(got["stats"]["active_allocated"], truth["torch_block_bytes"], "active bytes")
    check_eq(got["stats"]["total_size"], p["torch_reserved_bytes"], "the segments' bytes")
    check_eq(got["nsegs"] * 20 << 20, p["torch_reserved_bytes"], "20 MiB segments")
    check_eq(got["stats"]["inactive"], got["total"] - truth["torch_block_bytes"],
             "the rest of the segments is free in the cache")
    check(all("torch_site_leak" in b[2] for b in active),
          f"each block under the leaking line: {active[:2]}")
    check("wl_torch.c:84:torch_site_leak" in got["memory_folded"],
          "memory() draws the leaking line (file:line:function)")
    check(got["segments_folded"].count("stream_0;seg_") >= got["nsegs"],
          "segments() draws each segment")
    check_eq(got["traces"], [0], "device_traces: one device, no events")
    check(got["gpuleak"]["complete"] is True and got["gpuleak"]["pid"] == wl.pid,
          f"the gpuleak entry: {got['gpuleak']}")


def test_memory_viz_snapshot_says_what_gpuleak_did_not_see(tmp):
    """--tensors off: the segments are seen, their blocks are not. Each segment is one span
    "unseen", not "inactive" (gpuleak cannot tell whether it is free), and the snapshot
    says it is not complete."""
    path = os.path.join(tmp, "snapshot.pickle")
    wl, tr = attach_workload(tmp, "wl_torch", tracer_args=("--tensors", "off",
                                                           "--memory-viz", path), go=False)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    got = _read(path)
    check_eq(got["total"], process(rep, wl.pid)["torch_reserved_bytes"], "the segments' bytes")
    check_eq(sorted({b[0] for b in got["blocks"]}), ["unseen"], "every span unseen")
    check_eq(got["stats"].get("unseen"), got["total"], "all of it")
    check(got["gpuleak"]["complete"] is False and got["gpuleak"]["blocks_complete"] is False,
          f"not complete: {got['gpuleak']}")


def _check_trace_format(trace):
    """The JSON Trace Event Format as Perfetto and chrome://tracing read it: an object
    with traceEvents; each event's phase one of those written here, with a name, integer
    pid and tid, a time in microseconds; counters' arguments numbers; complete events a
    duration; instant events a scope."""
    check(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list),
          "an object with a traceEvents list")
    check_eq(trace.get("displayTimeUnit"), "ms", "displayTimeUnit")
    for e in trace["traceEvents"]:
        check(e.get("ph") in ("M", "C", "X", "i"), f"a known phase: {e}")
        check(isinstance(e.get("name"), str) and e["name"], f"a name: {e}")
        check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), f"pid, tid: {e}")
        check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"a time: {e}")
        if e["ph"] == "C":
            check(e["args"] and all(isinstance(v, int) and v >= 0 for v in e["args"].values()),
                  f"a counter's values: {e}")
        if e["ph"] == "X":
            check(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"a duration: {e}")
        if e["ph"] == "i":
            check(e.get("s") in ("g", "p", "t"), f"an instant's scope: {e}")
        if e["ph"] == "M":
            check(e["name"] in ("process_name", "thread_name") and e["args"].get("name"),
                  f"a name for a process or thread: {e}")


def _tracks(trace, pid):
    """{counter name: [(ts, bytes)]} of a process, in file order."""
    tracks = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "C" and e["pid"] == pid:
            tracks.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes"]))
    return tracks


def _check_trace_equals_books(trace, pid, p, truth):
    tracks = _tracks(trace, pid)
    check({"device memory", "PyTorch tensor blocks"} <= set(tracks),
          f"the process's class tracks: {sorted(tracks)}")
    for name, pts in tracks.items():
        ts = [t for t, _ in pts]
        check(ts == sorted(ts), f"{name}: times never go back")
    check_eq(tracks["device memory"][-1][1], p["device_bytes"], "device memory, last")
    check_eq(tracks["PyTorch tensor blocks"][-1][1], truth["torch_block_bytes"],
             "tensor blocks, last")
    check_eq(max(b for _, b in tracks["device memory"]), p["peak_device_bytes"],
             "device memory, its peak")
    leak = [n for n in tracks if "torch_site_leak" in n]
    check(leak, f"a track for the leaking line's stack: {sorted(tracks)}")
    check_eq(tracks[leak[0]][-1][1], truth["torch_block_bytes"], "the leaking stack, last")
    check_eq(tracks[leak[0]][0][1], 0, "the leaking stack starts at nothing")
    names = [e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["pid"] == pid and e["name"] == "process_name"]
    check_eq(names, [f"wl_torch (PID {pid})"], "the process is named")


def test_perfetto_trace_is_the_books_over_time(tmp):
    """--perfetto from an attach, then from a recording of the same workload (report): the
    file is the Trace Event Format; per process a counter track for each memory class that
    ever held bytes, its last value the books' (device memory's peak too), and a track for
    each top stack (the leaking line's ends at the bytes it leaked)."""
    path = os.path.join(tmp, "trace.json")
    wl, tr = attach_workload(tmp, "wl_torch", tracer_args=("--tensors", "full",
                                                           "--perfetto", path), go=False)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    with open(path) as f:
        trace = json.load(f)
    _check_trace_format(trace)
    _check_trace_equals_books(trace, wl.pid, process(rep, wl.pid), truth)
    check(trace["otherData"]["timeline_resolution_ns"] >= 1000000, "the resolution is said")

    rec = os.path.join(tmp, "job.glr")
    wl = Workload("wl_torch", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["record", "-o", rec, "--tensors", "full", str(wl.pid)], tmp,
                json_report=False)
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    check_eq(tr.stop(), 0, f"record's exit status:\n{tr.stderr()}")
    wl.release()
    wl.wait()
    out = os.path.join(tmp, "from-recording.json")
    p = subprocess.run([GPULEAK, "report", rec, "--perfetto", out, "--json",
                        os.path.join(tmp, "r.json")], capture_output=True, text=True,
                       timeout=120)
    check_eq(p.returncode, 0, f"report's exit status ({p.stderr[-1500:]})")
    with open(out) as f:
        trace = json.load(f)
    with open(os.path.join(tmp, "r.json")) as f:
        rep = json.load(f)
    _check_trace_format(trace)
    _check_trace_equals_books(trace, wl.pid, process(rep, wl.pid), truth)
