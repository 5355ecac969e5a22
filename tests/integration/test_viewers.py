# SPDX-License-Identifier: BSD-2-Clause
"""The files gpuleak writes for the viewers people already open: PyTorch's memory_viz
snapshot, read back by Debian's real PyTorch (1.13, CPU), against the books and the
workload's own truth; the Perfetto trace; the HTML report, opened in headless Chromium."""
import json
import os
import subprocess

import re
import urllib.error
import urllib.request

from browser import Browser
from harness import (GPULEAK, Agent, Tracer, Workload, attach_workload, check, check_eq,
                     free_port,
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
    "actions": [[e["action"], e["addr"], e["size"], [f["name"] for f in e["frames"]],
                 e["time_us"]] for t in snap["device_traces"] for e in t],
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
    PyTorch's stats() checks; device_traces has every block and segment event since
    attach, as the books count them, each alloc under its line, in time order; complete."""
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
    blocks = [st for st in p["stacks"] if st["memory"] == "torch_block"]
    acts = got["actions"]
    count = {a: sum(1 for e in acts if e[0] == a)
             for a in ("alloc", "free_completed", "segment_alloc", "segment_free")}
    check_eq(len(got["traces"]), 1, "one device")
    leak = [e for e in acts if e[0] == "alloc" and "torch_site_leak" in e[3]]
    scratch = [e for e in acts if e[0] == "alloc" and "torch_site_scratch" in e[3]]
    check_eq(len(leak), sum(st["allocs"] for st in blocks
                            if any(f.get("function") == "torch_site_leak"
                                   for f in st["frames"])),
             "an alloc per block the leaking line booked")
    check_eq(len(leak) + len(scratch), count["alloc"], "every alloc under its line")
    check_eq(count["free_completed"], len(scratch), "the scratch blocks, each given back")
    check_eq(count["alloc"] - count["free_completed"], truth["torch_blocks"],
             "what the trace leaves allocated is what the workload holds")
    segs = sum(st["allocs"] for st in p["stacks"] if st["memory"] == "device" and
               any(f.get("function") == "torch_site_segment" for f in st["frames"]))
    check(count["segment_alloc"] == segs and segs > 0 and count["segment_free"] == 0,
          f"the segments PyTorch's allocator took since attach: {count}, {segs}")
    check(all(("torch_site_leak" in e[3]) or ("torch_site_scratch" in e[3])
              for e in acts if e[0] == "alloc"), "each alloc under its line")
    check(all(e[3] == [] for e in acts if e[0] == "free_completed"), "frees have no frames")
    check_eq([e[4] for e in acts], sorted(e[4] for e in acts), "in time order")
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


def _drag(b, box, frac0, frac1):
    """Drags the mouse across an element's box from one fraction of its width to another."""
    y = box[1] + box[3] / 2
    b.mouse("mouseMoved", box[0] + box[2] * frac0, y)
    b.call("Input.dispatchMouseEvent", type="mousePressed", x=box[0] + box[2] * frac0, y=y,
           button="left", clickCount=1)
    b.mouse("mouseMoved", box[0] + box[2] * (frac0 + frac1) / 2, y)
    b.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0] + box[2] * frac1, y=y,
           button="left", buttons=1)
    b.call("Input.dispatchMouseEvent", type="mouseReleased", x=box[0] + box[2] * frac1, y=y,
           button="left", clickCount=1)


def test_html_report_shows_the_leak_over_time_and_a_range_flame_graph(tmp):
    """--html: one page, no network, no console error in Chromium. It leads with the leak
    in words; its timeline has the leaking site's band in red; the whole run's flame graph
    holds every byte the books hold outstanding; a range dragged across the first part of
    the timeline holds what was allocated then and is still held: whole steps of the leak,
    fewer than all of them."""
    page = os.path.join(tmp, "report.html")
    size = 1 << 20
    wl = Workload("wl_leak", "--iters", "24", "--interval-ms", "50", "--size", str(size),
                  tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--resolution", "50ms", "--html", page, str(wl.pid)],
                tmp)
    tr.wait_attached()
    wl.go()
    wl.truth()
    tr.stop()
    wl.release()
    wl.wait()
    p = process(tr.report(), wl.pid)
    leak = [st for st in p["stacks"] if st["verdict"] == "leak"]
    check_eq(len(leak), 1, "one leaking stack")
    held = sum(st["outstanding_bytes"] for st in p["stacks"]
               if st["memory"] in ("device", "host_pinned", "managed", "torch_block"))
    with open(page, encoding="utf-8") as f:
        text = f.read()
    check(not re.search(r"(src|href)=[\"']?(https?:)?//", text),
          "nothing is loaded from the network")
    with Browser(width=1400, height=1200) as b:
        b.open(page)
        check_eq(b.errors(), [], "no error in the console")
        head = b.eval("document.querySelector('#answer .head').textContent")
        check(re.match(r"\+[\d.]+ MiB/s at leak_site_staircase \(wl_leak\.c:\d+, wl_leak\), "
                       rf"PID {wl.pid} wl_leak: ", head), f"the answer first: {head!r}")
        bands = b.eval("Array.prototype.map.call(document.querySelectorAll('#chart path.band'),"
                       " function (e) { return [e.getAttribute('class'), "
                       "e.getAttribute('data-site'), e.getAttribute('fill')]; })")
        red = [x for x in bands if "leak" in x[0].split()]
        check(len(red) == 1 and red[0][1].startswith("leak_site_staircase (wl_leak.c:") and
              red[0][2] == "#d62728", f"the leaking site's band, red: {bands}")
        box = b.eval("(function(){var r=document.querySelector('#chart path.band.leak')"
                     ".getBBox(); return [r.x, r.y, r.width, r.height];})()")
        check(box[3] > 20, f"the band rises: {box}")
        whole = b.eval("window.gpuleakReport.flameBytes")
        check_eq(whole, held, "the whole run's flame graph: every byte held")
        frame = b.eval("(function(){var g=document.querySelector("
                       "'#flame g.frame[data-name^=\"leak_site_staircase\"]');"
                       " return g ? [g.getAttribute('data-bytes'), g.getAttribute('class')] "
                       ": null;})()")
        check(frame and int(frame[0]) == leak[0]["outstanding_bytes"] and "leak" in frame[1],
              f"the leaking frame, all its bytes, red: {frame}")
        chart = b.eval("(function(){var r=document.getElementById('chart')"
                       ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height];})()")
        # the plot starts 70 px in: drag over its first half
        _drag(b, [chart[0] + 70, chart[1], chart[2] - 80, chart[3]], 0.0, 0.5)
        st = b.eval("[window.gpuleakReport.state.t0, window.gpuleakReport.state.t1, "
                    "window.gpuleakReport.flameBytes]")
        check(st[0] < 0.05 and st[1] > 0.2, f"the range dragged: {st}")
        part = b.eval("(function(){var g=document.querySelector("
                      "'#flame g.frame[data-name^=\"leak_site_staircase\"]');"
                      " return g ? +g.getAttribute('data-bytes') : 0;})()")
        check(0 < part < leak[0]["outstanding_bytes"] and part % size == 0,
              f"the range's leak: whole steps, some not all: {part} of "
              f"{leak[0]['outstanding_bytes']}")
        title = b.eval("document.getElementById('flame-title').textContent")
        check(title.startswith("Allocated in ") and "still held" in title, title)
        check_eq(b.errors(), [], "no error after the drag")
        b.screenshot(os.path.join(tmp, "report.png"))


def test_serve_gives_a_process_report_as_html(tmp):
    """serve's /report?pid=N: the HTML report of one traced process; 404 for a PID it does
    not trace, 400 without one."""
    port = free_port()
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}"])
    wl = None
    try:
        agent.wait_serving()
        wl = Workload("wl_leak", "--iters", "5", "--interval-ms", "20", tmp=tmp, wait=False,
                      hold=True)
        wl.truth()
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/report?pid={wl.pid}", timeout=20) as r:
            check_eq(r.headers.get_content_type(), "text/html", "an HTML page")
            page = r.read().decode()
        data = json.loads(re.search(r'<script id="gl-data" type="application/json">\n(.*?)'
                                    r'</script>', page, re.S).group(1))
        check_eq([q["pid"] for q in data["processes"]], [wl.pid], "that process alone")
        check(any(st["site"].startswith("leak_site_staircase")
                  for st in data["processes"][0]["stacks"]), "its stacks")
        for path, code in ((f"/report?pid={os.getpid()}", 404), ("/report", 400)):
            try:
                urllib.request.urlopen(f"{base}{path}", timeout=10)
                check(False, f"{path} is refused")
            except urllib.error.HTTPError as e:
                check_eq(e.code, code, path)
    finally:
        if wl:
            wl.release()
            wl.wait()
        check(agent.stop() != "hung", "serve stops")


def test_memory_viz_from_a_recording_has_the_history(tmp):
    """record, then report --memory-viz on another day: the job has exited, yet the
    snapshot holds its segments and blocks as they were at its end, and device_traces
    holds every event the recording saw: a block per step kept, one made and given back,
    the segments PyTorch's allocator took."""
    rec = os.path.join(tmp, "job.glr")
    path = os.path.join(tmp, "snapshot.pickle")
    wl = Workload("wl_torch", "--iters", "12", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["record", "-o", rec, "--tensors", "full", str(wl.pid)], tmp,
                json_report=False)
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    wl.release()
    wl.wait()
    check_eq(tr.stop(), 0, f"record's exit status:\n{tr.stderr()}")
    out = subprocess.run([GPULEAK, "report", rec, "--memory-viz", path], capture_output=True,
                         text=True, timeout=60)
    check_eq(out.returncode, 0, f"report's exit status ({out.stderr})")
    got = _read(path)
    active = [b for b in got["blocks"] if b[0] == "active_allocated"]
    check_eq(len(active), truth["torch_blocks"], "the blocks held at the end")
    acts = got["actions"]
    count = {a: sum(1 for e in acts if e[0] == a)
             for a in ("alloc", "free_completed", "segment_alloc")}
    check(count["alloc"] - count["free_completed"] == truth["torch_blocks"] and
          count["free_completed"] == 12 and count["segment_alloc"] >= 1,
          f"the recording's events: {count}")
    check(got["gpuleak"]["device_traces"].startswith(f"{len(acts)} events since attach"),
          got["gpuleak"]["device_traces"])


def test_pytorch_memory_is_not_counted_twice(tmp):
    """A PyTorch process (the stand-ins, --tensors full): its tensor blocks lie inside the
    segments its caching allocator took from the driver. The page, the flame graph, the
    folded stacks and the pprof profile draw the blocks and leave the segments out (the
    page says so): they hold the blocks' bytes and the memory outside PyTorch, not the
    segments on top of them; and the page's answer names a leaking line once."""
    from test_outputs import pprof_top, read_folded, svg_frames
    page = os.path.join(tmp, "torch.html")
    out = {k: os.path.join(tmp, "torch." + k) for k in ("svg", "folded", "pprof")}
    wl, tr = attach_workload(tmp, "wl_torch", "--iters", "24", "--interval-ms", "40",
                             "--size", str(4 << 20),
                             tracer_args=(
        "--tensors", "full", "--resolution", "50ms", "--html", page, "--svg", out["svg"], "--folded", out["folded"],
        "--pprof", out["pprof"]), go=False)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    outside = sum(st["outstanding_bytes"] for st in p["stacks"]
                  if st["memory"] == "device" and not any(
                      f.get("function") == "torch_site_segment" for f in st["frames"]))
    segments = [st for st in p["stacks"] if st["memory"] == "device" and any(
        f.get("function") == "torch_site_segment" for f in st["frames"])]
    check(segments and all(st["verdict"] == "leak" for st in segments),
          f"the segments grow with the leak: {segments}")
    drawn = truth["torch_block_bytes"] + outside
    check_eq(int(svg_frames(out["svg"])[0].get("data-v")), drawn,
             "the flame graph's whole: the blocks and what lies outside PyTorch")
    with open(out["svg"], encoding="utf-8") as f:
        svg = f.read()
    check("PyTorch's tensor blocks drawn, not its segments" in svg,
          "the flame graph says what it draws of PyTorch's memory")
    check_eq(sum(read_folded(out["folded"]).values()), drawn, "the folded stacks' sum")
    check_eq(pprof_top(out["pprof"], "inuse_space")[0], drawn, "pprof's inuse_space total")
    with Browser(width=1400, height=1000) as b:
        b.open(page)
        check_eq(b.errors(), [], "no error in the console")
        check_eq(b.eval("window.gpuleakReport.flameBytes"),
                 truth["torch_block_bytes"] + outside,
                 "the blocks and what lies outside PyTorch, the segments not again")
        note = b.eval("document.getElementById('flame-note').textContent")
        check("PyTorch's segments (" in note and "are not drawn" in note, note)
        heads = b.eval("Array.prototype.map.call(document.querySelectorAll('#answer .head'),"
                       " function (e) { return e.textContent; })")
        check(len(heads) == 1 and "torch_site_leak" in heads[0],
              f"the answer names the leaking blocks' line, not the segments they fill: {heads}")
