# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak record / gpuleak report: a recording rebuilds, with no access to the processes,
the very books a live attach keeps (to the byte, stacks named); it survives its processes,
its binaries (with --keep-modules), a killed recorder, cuts and damage (a partial report
that says what it lacks) and --max-size; it is never written through a symlink; and its
reader holds up under a short fuzzing run."""
import json
import os
import re
import shutil
import signal
import time
import zlib

from harness import (OUTPUT, WORKLOADS, Tracer, Workload, check, check_books, check_eq,
                     check_sites, process, run_gpuleak, site_bytes, wait_until)

NOT_A_RECORDING = 3


def report(tmp, rec, *args):
    """gpuleak report REC --json: (exit status, JSON or None, stdout, stderr)."""
    out = os.path.join(tmp, f"report.{time.monotonic_ns()}.json")
    rc, text, err = run_gpuleak(["report", rec, "--json", out, *args])
    rep = None
    if os.path.exists(out):
        with open(out) as f:
            rep = json.load(f)
    return rc, rep, text, err


def recorder(tmp, name, *args):
    rec = os.path.join(tmp, name)
    return rec, Tracer(["record", "-o", rec, *args], tmp, json_report=False)


def record_py_stacks(tmp, name, *wl_args):
    """py_stacks.py (test_python) recorded to tmp/name, then reported; returns the workload,
    its truth and the report's JSON and text, each exit status checked."""
    from test_python import PyWorkload
    wl = PyWorkload(tmp, *wl_args)
    try:
        wl.wait_ready()
        rec, tr = recorder(tmp, name, str(wl.pid))
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        check_eq(tr.stop(), 0, f"record's exit status:\n{tr.stderr()}")
    finally:
        check_eq(wl.finish(), 0, "workload exit status")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"report's exit status ({err})")
    return wl, truth, rep, text


def stop_and_report(tmp, wl, tr, rec):
    """Stops record's tracer tr, lets the held workload exit and reports the recording rec,
    each exit status checked; returns tr's own JSON report and the recording's JSON and
    text."""
    check_eq(tr.stop(), 0, f"record's exit status:\n{tr.stderr()}")
    wl.release()
    wl.wait()
    live = tr.report()
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"report's exit status ({err})")
    return live, rep, text


def stack_view(proc):
    """Stacks as comparable values: class, figures and every frame's name and place."""
    return sorted((s["memory"], s["outstanding_bytes"], s["outstanding_allocs"], s["allocs"],
                   s["frees"], tuple((f.get("function"), f.get("module"), f.get("offset"))
                                     for f in s["frames"])) for s in proc["stacks"])


FIGURES = ("device_bytes", "managed_bytes", "host_pinned_bytes", "address_space_bytes",
           "outstanding_allocs", "peak_device_bytes", "alloc_calls", "free_calls", "failures",
           "oom_failures", "failed_frees", "unmatched_frees", "context_dropped_bytes",
           "devices", "consistent", "bpf", "comm", "state")


def record_beside_attach(tmp, workload, *args):
    """Records a workload while a live attach watches it too; returns both reports and
    the truth."""
    wl = Workload(workload, *args, tmp=tmp, hold=True)
    wl.wait_ready()
    rec, rtr = recorder(tmp, "rec.glr", str(wl.pid))
    rtr.wait_attached()
    live = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    live.wait_attached()
    wl.go()
    truth = wl.truth()
    check_eq(live.stop(), 0, "attach's exit status")
    check_eq(rtr.stop(), 0, f"record's exit status:\n{rtr.stderr()}")
    wl.release()
    wl.wait()
    check("recorded" in rtr.stderr(), f"record says what it wrote: {rtr.stderr()!r}")
    check_eq(os.stat(rec).st_mode & 0o777, 0o600, "the recording's mode")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"report's exit status ({err})")
    return wl, truth, live.report(), rep, text


def check_same_books(wl, truth, live, rep):
    p, lp = process(rep, wl.pid), process(live, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    for key in FIGURES:
        check_eq(p[key], lp[key], f"{key} of the report against the live attach")
    check_eq(stack_view(p), stack_view(lp), "stacks and their frames")
    check(rep["complete"] and rep["recording"]["complete"], f"complete: {rep['recording']}")
    return p, lp


def test_report_equals_live_attach(tmp):
    wl, truth, live, rep, text = record_beside_attach(tmp, "wl_basic")
    p, _ = check_same_books(wl, truth, live, rep)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")
    check("basic_site_alloc_v2" in text, "the text report names the sites")
    check(text.startswith("recording "), f"the text says what recording it is: {text[:200]!r}")


def test_report_of_failures_equals_live_attach(tmp):
    wl, truth, live, rep, _ = record_beside_attach(tmp, "wl_oom")
    p, lp = check_same_books(wl, truth, live, rep)
    check_eq(p["oom_failures"], truth["oom_failures"], "oom_failures")
    strip = [{k: v for k, v in f.items() if k != "ts_ns"} for f in p["failures_list"]]
    lstrip = [{k: v for k, v in f.items() if k != "ts_ns"} for f in lp["failures_list"]]
    check_eq(strip, lstrip, "failures with their stacks and top holders")


def run_recorded(tmp, binary, *args, rec_args=()):
    """gpuleak record -- BINARY --no-wait ...: returns (recording, truth, tracer)."""
    truth_path = os.path.join(tmp, f"truth.{time.monotonic_ns()}.json")
    rec, tr = recorder(tmp, f"rec.{time.monotonic_ns()}.glr", *rec_args, "--", binary,
                       "--no-wait", "--truth", truth_path, *args)
    check_eq(tr.wait(), 0, f"record's exit status:\n{tr.stderr()}")
    with open(truth_path) as f:
        return rec, json.load(f), tr


def test_report_after_the_process_is_gone(tmp):
    rec, truth, _ = run_recorded(tmp, os.path.join(WORKLOADS, "wl_leak"), "--iters", "8",
                                 "--interval-ms", "20")
    check(not os.path.exists(f"/proc/{truth['pid']}"), "the process is gone")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"exit status ({err})")
    p = process(rep, truth["pid"])
    check_eq(p["state"], "exited", "state")
    check_books(rep, p, truth)
    check_sites(p, truth)
    check(p["consistent"], "the books at exit agree with BPF's")
    # the offline outputs come from a recording as from a live session
    folded, svg, pprof = (os.path.join(tmp, name) for name in ("r.folded", "r.svg", "r.pb.gz"))
    rc, rep, text, err = report(tmp, rec, "--folded", folded, "--svg", svg, "--pprof", pprof)
    check_eq(rc, 0, f"exit status with every output ({err})")
    lines = open(folded).read().splitlines()
    leak = truth["sites"]["leak_site_staircase"]
    check(any("leak_site_staircase" in line and line.endswith(f" {leak}") for line in lines),
          f"folded stacks: {lines}")
    check("leak_site_staircase" in open(svg).read(), "the flame graph names the site")
    check(open(pprof, "rb").read(2) == b"\x1f\x8b", "pprof is gzipped")


def test_keep_modules_symbolizes_moved_binaries(tmp):
    """The binary and its libcuda are moved away after recording: with the store kept by
    --keep-modules the frames are named; without it they are module+offset."""
    app = os.path.join(tmp, "app")
    os.makedirs(os.path.join(app, "workloads"))
    shutil.copytree(os.path.join(OUTPUT, "fakecuda"), os.path.join(app, "fakecuda"))
    shutil.copy2(os.path.join(WORKLOADS, "wl_leak"), os.path.join(app, "workloads"))
    store = os.path.join(tmp, "store")
    rec, truth, tr = run_recorded(tmp, os.path.join(app, "workloads", "wl_leak"), "--iters",
                                  "5", "--interval-ms", "10", rec_args=("--keep-modules", store))
    check("kept" in tr.stderr(), f"record says what it kept: {tr.stderr()!r}")
    os.rename(app, os.path.join(tmp, "moved"))

    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"exit status without the binaries ({err})")
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check_eq(site_bytes(p, "leak_site_staircase"), 0, "no frame is named without the binary")
    frames = [f for s in p["stacks"] for f in s["frames"]
              if f.get("module", "").endswith("/wl_leak")]
    check(frames and all(f["function"] is None and f["offset"] > 0 and f.get("build_id")
                         for f in frames), f"module+offset frames: {frames[:3]}")
    check("0x" in text and "(wl_leak)" in text, "the text shows module+offset")
    check(rep["recording"]["modules_missing"] >= 2, f"{rep['recording']}")

    rc, rep, text, err = report(tmp, rec, "--debug-dir", store)
    check_eq(rc, 0, f"exit status with the store ({err})")
    p = process(rep, truth["pid"])
    check_sites(p, truth)
    check(site_bytes(p, "leak_site_staircase") > 0, "named through the store")
    check("leak_site_staircase" in text, "the text names the site")


def test_killed_recorder_loses_at_most_a_second(tmp):
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    rec, tr = recorder(tmp, "rec.glr", str(wl.pid))
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    time.sleep(1.5)
    tr.stop(signal.SIGKILL)
    wl.release()
    wl.wait()
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"a recording without its end is read ({err})")
    p = process(rep, wl.pid)
    for cls in ("device", "managed", "host_pinned"):
        check_eq(p[f"{cls}_bytes"], truth[f"{cls}_bytes"], f"{cls}_bytes")
    check_sites(p, truth)
    check(not rep["recording"]["ended"] and not rep["complete"], f"{rep['recording']}")
    check("no end record" in err and "no end record" in text, f"said: {err!r}")


def test_cut_and_damaged_recordings(tmp):
    rec, truth, _ = run_recorded(tmp, os.path.join(WORKLOADS, "wl_leak"), "--iters", "40",
                                 "--interval-ms", "30")
    data = open(rec, "rb").read()
    check(len(data) > 200, f"a recording of {len(data)} bytes")
    for cut in (8, 31, 32, 100, len(data) // 2, len(data) - 1):
        path = os.path.join(tmp, f"cut{cut}.glr")
        with open(path, "wb") as f:
            f.write(data[:cut])
        rc, rep, text, err = report(tmp, path)
        if cut < 32:
            check_eq(rc, NOT_A_RECORDING, f"exit status of a {cut}-byte file ({err})")
            check("not a gpuleak recording" in err and err.count("\n") == 1, f"said: {err!r}")
            continue
        check_eq(rc, 0, f"exit status of a file cut at {cut} ({err})")
        check(not rep["complete"] and not rep["recording"]["complete"],
              f"cut at {cut}: incomplete: {rep['recording']}")
        check_eq(rep["recording"]["bytes"], cut, "bytes read or skipped")
        check("WARNING" in text, f"the text says so: {text[-300:]!r}")
    for where in (len(data) // 3, len(data) // 2, len(data) - 10):
        bad = bytearray(data)
        bad[where] ^= 0x55
        path = os.path.join(tmp, f"bad{where}.glr")
        with open(path, "wb") as f:
            f.write(bad)
        rc, rep, text, err = report(tmp, path)
        check_eq(rc, 0, f"exit status of a damaged file ({err})")
        r = rep["recording"]
        check(r["bad_chunks"] >= 1 and r["skipped_bytes"] > 0 and not rep["complete"], f"{r}")
        check("damaged recording" in err and "bytes skipped" in text, f"said: {err!r}")
        process(rep, truth["pid"])
    json_path = os.path.join(tmp, "report.json")
    with open(json_path, "w") as f:
        f.write('{"version": 1}\n')
    for path in (json_path, os.path.join(tmp, "missing.glr"), tmp):
        rc, rep, text, err = report(tmp, path)
        check_eq(rc, NOT_A_RECORDING, f"exit status for {path} ({err})")
        check(rep is None and text == "", "no report for what is not a recording")


def test_max_size_stops_and_says_so(tmp):
    wl = Workload("wl_threads", "--threads", "2", "--iters", "4000", tmp=tmp, hold=True)
    wl.wait_ready()
    rec, tr = recorder(tmp, "rec.glr", "--max-size", "16k", str(wl.pid))
    tr.wait_attached()
    wl.go()
    check_eq(tr.wait(timeout=30), 0, "record stops by itself at --max-size")
    wl.truth()
    wl.release()
    wl.wait()
    check("reached --max-size" in tr.stderr(), f"said on stderr: {tr.stderr()!r}")
    size = os.path.getsize(rec)
    check(4096 < size <= 16384, f"the recording holds to --max-size: {size} bytes")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"exit status ({err})")
    r = rep["recording"]
    check(r["truncated"] and r["ended"] and not r["complete"] and not rep["complete"], f"{r}")
    check_eq(r["max_size"], 16384, "max_size")
    check("truncated at --max-size" in text and "truncated" in err, f"said: {text[-400:]!r}")
    check(process(rep, wl.pid)["alloc_calls"] > 0, "what fitted is reported")


def test_symlink_at_output_is_not_followed(tmp):
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    link = os.path.join(tmp, "rec.glr")
    os.symlink(victim, link)
    rc, out, err = run_gpuleak(["record", "-o", link, "--", "/bin/true"])
    check_eq(rc, 1, "exit status")
    check("symbolic link" in err, f"said: {err!r}")
    check_eq(open(victim).read(), "precious\n", "the symlink's target is untouched")
    check(os.path.islink(link), "the symlink is left alone")


def test_python_frames_recorded_resolved(tmp):
    """Python frames are recorded with their function, file and line: the report names
    them without the interpreter, which is gone."""
    from test_python import check_site
    wl, truth, rep, text = record_py_stacks(tmp, "py.glr")
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check(truth["py_sites"], "the workload has Python sites")
    for name, site in truth["py_sites"].items():
        check_site(p, name, site)
    check(" [python]" in text, "the text report shows Python frames")


def test_report_explains_memory_as_live_attach(tmp):
    """A recording's report breaks the memory down and explains each out-of-memory
    failure (fragmentation here, with PyTorch's retry) as the live attach did."""
    wl, truth, live, rep, text = record_beside_attach(tmp, "wl_explain", "--scenario",
                                                      "fragmentation")
    p, lp = process(rep, wl.pid), process(live, wl.pid)
    check(lp["memory"] is not None, "the live attach breaks the memory down")
    check_eq(p["memory"], lp["memory"], "the breakdown of the report against the live attach")
    check_eq(p["memory"]["torch_cached_bytes"], truth["torch_reserved"] - truth["torch_allocated"],
             "cached: segments minus blocks")
    causes = [f["oom"]["cause"] for f in p["failures_list"]]
    check_eq(causes, ["fragmentation", "fragmentation"], "both failures explained")
    check_eq([f["oom"] for f in p["failures_list"]], [f["oom"] for f in lp["failures_list"]],
             "the explanations of the report against the live attach")
    check("cause: fragmentation" in text, f"the text report says it:\n{text}")


def _wait_log(tr, text, timeout=15):
    wait_until(lambda: text in tr.stderr(), timeout, f"gpuleak to say {text!r}")


def _torch_stacks(proc):
    """The tensor-block stacks as comparable values: figures, verdict and site."""
    return sorted((s["outstanding_bytes"], s["outstanding_allocs"], s["allocs"], s["frees"],
                   s["verdict"], s["why"], s["growth_bytes_per_s"], s["site"])
                  for s in proc["stacks"] if s["memory"] == "torch_block")


def test_report_keeps_the_tensor_windows(tmp):
    """The default (windowed) tensor level through two windows, the second asked for
    with SIGUSR1: the recording keeps each window and what the books did as it opened
    (the first window's blocks forgotten), so that its report gives the very
    tensor_level, torch_block figures and verdicts of the recording session's own final
    report (record --json), judged as of the second window's end."""
    wl = Workload("wl_torch", "--iters", "150", "--interval-ms", "20", "--size", "4096",
                  tmp=tmp, hold=True)
    wl.wait_ready()
    rec = os.path.join(tmp, "windows.glr")
    tr = Tracer(["record", "-o", rec, "--tensor-window", "500ms", "--tensor-duty", "10",
                 "--resolution", "50ms", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    _wait_log(tr, "tensor window 1 closed")
    tr.proc.send_signal(signal.SIGUSR1)
    _wait_log(tr, "tensor window 2 (request)")
    truth = wl.truth()
    _wait_log(tr, "tensor window 2 closed")
    live, rep, text = stop_and_report(tmp, wl, tr, rec)
    check(rep["recording"]["complete"], f"complete: {rep['recording']}")
    check_eq(rep["recording"]["unknown_records"], 0, "records this gpuleak does not know")
    p, lp = process(rep, wl.pid), process(live, wl.pid)
    check_books(rep, p, truth)
    for key in FIGURES:
        check_eq(p[key], lp[key], f"{key} of the report against the live report")
    tl = p["tensor_level"]
    check_eq(tl, lp["tensor_level"], "tensor_level of the report against the live report")
    check_eq((tl["mode"], tl["coverage"], tl["armed"]), ("windowed", "windowed", False),
             "mode, coverage, armed")
    check_eq([w["why"] for w in tl["windows"]], ["start", "request"], "why each window opened")
    check(all(w["end_s"] is not None for w in tl["windows"]), f"both windows closed: {tl}")
    for key in ("torch_allocated_bytes", "torch_blocks", "torch_reserved_bytes", "memory"):
        check_eq(p[key], lp[key], f"{key} of the report against the live report")
    # the second window forgot the first's blocks, in the recording's books as in the live
    check(0 < p["torch_allocated_bytes"] < truth["torch_block_bytes"],
          f"torch_allocated_bytes {p['torch_allocated_bytes']} of {truth['torch_block_bytes']}")
    check_eq(p["bpf"]["torch_allocated_bytes"], p["torch_allocated_bytes"],
             "BPF's torch block bytes")
    check(p["memory"] is None or p["memory"]["driver_level_only"],
          f"a window's blocks are not PyTorch's whole map: {p['memory']}")
    stacks = _torch_stacks(p)
    check(stacks, "the report has tensor-block stacks")
    check_eq(stacks, _torch_stacks(lp), "tensor-block stacks and verdicts against the live")
    check("tensor blocks: windowed: as of the end of window 2" in text,
          f"the text report says what the tensor figures cover:\n{text[-1500:]}")


def test_report_of_sampled_tensor_stacks_equals_the_live(tmp):
    """--tensors sampled: the recording keeps the mode and the sample's mean, so that its
    report estimates each sampled stack's blocks as the live report does."""
    wl = Workload("wl_torch", "--iters", "200", "--size", str(256 * 1024), tmp=tmp, hold=True)
    wl.wait_ready()
    rec = os.path.join(tmp, "sampled.glr")
    tr = Tracer(["record", "-o", rec, "--tensors", "sampled", "--tensor-sample",
                 str(1 << 20), str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    live, rep, text = stop_and_report(tmp, wl, tr, rec)
    p, lp = process(rep, wl.pid), process(live, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "exact tensor total")
    check_eq(p["tensor_level"], lp["tensor_level"], "tensor_level against the live report")
    check_eq((p["tensor_level"]["mode"], p["tensor_level"]["coverage"],
              p["tensor_level"]["sample_bytes"]), ("sampled", "sampled", 1 << 20),
             "mode, coverage, sample")

    def estimates(proc):
        return sorted((s["outstanding_bytes"], s.get("sampled", False),
                       s.get("estimated_outstanding_bytes"), s.get("unsampled", False))
                      for s in proc["stacks"] if s["memory"] == "torch_block")
    est = estimates(p)
    check(any(e[1] and e[2] for e in est), f"the report estimates sampled stacks: {est}")
    check_eq(est, estimates(lp), "sampled stacks and their estimates against the live report")
    check_eq(_torch_stacks(p), _torch_stacks(lp), "tensor-block stacks and verdicts")
    check("sampled stack: about" in text, "the text report names the estimates")


def test_report_of_a_command_hides_its_launchers_as_run_does(tmp):
    """record -- sh -c PROGRAM: the report of the recording, as run's live report, lists
    only the processes that made CUDA calls and counts the shells in front of the job."""
    def script(truth):
        # the workload allocates a second after it starts, when its libcuda is attached
        return (f"(sleep 1; echo go) | {os.path.join(WORKLOADS, 'wl_basic')} --truth {truth}; "
                "exit 0")

    live_json, live_truth = os.path.join(tmp, "live.json"), os.path.join(tmp, "live.truth")
    rc, live_text, err = run_gpuleak(["run", "-i", "0", "--json", live_json, "--", "sh", "-c",
                                      script(live_truth)], timeout=60)
    check_eq(rc, 0, f"run's exit status ({err[-500:]!r})")
    with open(live_json) as f:
        live = json.load(f)
    rec_truth = os.path.join(tmp, "rec.truth")
    rec, tr = recorder(tmp, "cmd.glr", "--", "sh", "-c", script(rec_truth))
    check_eq(tr.wait(timeout=60), 0, f"record's exit status:\n{tr.stderr()}")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"report's exit status ({err})")
    for name, r, truth in (("run", live, live_truth), ("the recording", rep, rec_truth)):
        with open(truth) as f:
            t = json.load(f)
        p = process(r, t["pid"])
        check_books(r, p, t)
        for q in r["processes"]:
            check(q["alloc_calls"] > 0,
                  f"{name} reports a process without CUDA calls: {q['comm']} {q['pid']}")
        check(r["processes_without_cuda"] >= 2, f"{name} counts the shells: {r}")
    check_eq(rep["processes_without_cuda"], live["processes_without_cuda"],
             "processes without CUDA calls, the recording against run")
    check_eq(sorted(p["comm"] for p in rep["processes"]),
             sorted(p["comm"] for p in live["processes"]), "the processes reported")
    line = r"\d+ other processes traced made no CUDA call: not shown"
    check(re.search(line, live_text), f"run's text says so: {live_text[-300:]!r}")
    check(re.search(line, text), f"the recording's text says so as run's: {text[-300:]!r}")


# tests/integration/recordings/abi2-wl_ctx.glr: `gpuleak record -- ./workloads/wl_ctx
# --no-wait` by the last gpuleak of BPF ABI 2 (its calls carried their duration, 168
# bytes each); what that gpuleak's own report said of it:
ABI2_FIGURES = {"device_bytes": 3670016, "outstanding_allocs": 4, "alloc_calls": 12,
                "free_calls": 1, "failures": 1, "context_dropped_bytes": 6819840,
                "peak_device_bytes": 8392704, "consistent": True}
ABI2_STACK_BYTES = [2097152, 1048576, 262144, 262144]


def test_a_recording_of_the_last_abi_reads_as_it_did(tmp):
    rec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recordings",
                       "abi2-wl_ctx.glr")
    rc, rep, text, err = report(tmp, rec)
    check_eq(rc, 0, f"report's exit status ({err})")
    check(rep["complete"] and rep["recording"]["complete"] and
          rep["recording"]["bad_records"] == 0, f"read whole: {rep['recording']}")
    check_eq(len(rep["processes"]), 1, "one process")
    p = rep["processes"][0]
    for key, want in ABI2_FIGURES.items():
        check_eq(p[key], want, f"{key} as ABI 2's gpuleak reported it")
    check_eq(sorted((d["device"], d["device_bytes"]) for d in p["devices"]),
             [(0, 1310720), (1, 2359296)], "bytes per device")
    # the allocation made on the reset primary context after its teardown is kept: the
    # teardown's time and the calls' entries are ordered as the counts are now
    check_eq(sorted((s["outstanding_bytes"] for s in p["stacks"]), reverse=True),
             ABI2_STACK_BYTES, "what each stack holds")
    check("6.50 MiB freed by context teardown" in text, f"the text: {text[:600]!r}")
    # an ABI this gpuleak neither writes nor converts: one line, exit 3
    data = bytearray(open(rec, "rb").read())
    data[16:20] = (1).to_bytes(4, "little")
    data[28:32] = zlib.crc32(bytes(data[:28])).to_bytes(4, "little")
    old = os.path.join(tmp, "abi1.glr")
    with open(old, "wb") as f:
        f.write(data)
    rc, rep, text, err = report(tmp, old)
    check_eq(rc, NOT_A_RECORDING, f"exit status of an ABI 1 recording ({err})")
    check("recorded by a gpuleak of BPF ABI 1" in err and err.count("\n") == 1,
          f"said: {err!r}")
