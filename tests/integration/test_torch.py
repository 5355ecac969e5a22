# SPDX-License-Identifier: BSD-2-Clause
"""Tensor-level attribution through PyTorch's caching-allocator USDT probes
(pytorch:malloc / pytorch:free in libc10_cuda.so), against a stand-in library
that carries the same probes and semaphores."""
import math
import os
import signal
import time

from harness import (FAKECUDA, Tracer, Workload, attach_workload, bpf_objects, check, check_books,
                     check_eq, finish_attached, process, wait_until)


def _attach(tmp, *tracer_args, wl_args=()):
    """attach_workload returns once gpuleak says "attached to PID"; by then the allocator
    probes must be attached too (their line comes first), so that the workload's first
    tensor is seen."""
    wl, tr = attach_workload(tmp, "wl_torch", *wl_args, tracer_args=tracer_args, go=False)
    if "--no-torch" not in tracer_args:
        err = tr.stderr()
        probes, pid = err.find("attached PyTorch's allocator probes"), err.find("attached to PID")
        check(0 <= probes < pid, f"the allocator probes are attached before 'attached to "
              f"PID' is said: {err!r}")
    return wl, tr


def test_tensor_blocks_exact(tmp):
    wl, tr = _attach(tmp)
    check("attached PyTorch's allocator probes" in tr.stderr(),
          f"the probes are attached automatically: {tr.stderr()!r}")
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "torch_allocated_bytes")
    check_eq(p["torch_blocks"], truth["torch_blocks"], "torch_blocks")
    check_eq(p["bpf"]["torch_allocated_bytes"], truth["torch_block_bytes"],
             "BPF's torch block bytes")
    blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
    check(blocks, "torch_block stacks are reported")
    leak = [s for s in blocks if any(f.get("function") == "torch_site_leak" for f in s["frames"])]
    check_eq(sum(s["outstanding_bytes"] for s in leak), truth["torch_block_bytes"],
             "tensor blocks attributed to the leaking site")
    scratch = [s for s in blocks if any(f.get("function") == "torch_site_scratch"
                                        for f in s["frames"])]
    check(all(s["outstanding_bytes"] == 0 for s in scratch),
          "freed scratch blocks hold nothing")
    # the segments are the caching allocator's (their stacks pass through libc10_cuda.so):
    # PyTorch reserved; they hold the blocks' memory, so the blocks' stacks rank first
    check_eq(p["torch_reserved_bytes"], truth["sites"]["torch_site_segment"],
             "torch_reserved_bytes: the segments")
    first = p["stacks"][0]
    check(first["memory"] == "torch_block" and
          any(f.get("function") == "torch_site_leak" for f in first["frames"]),
          f"the leaking blocks' stack first, before the larger segment: {first}")


def test_no_torch_stays_at_driver_level(tmp):
    wl, tr = _attach(tmp, "--no-torch")
    time.sleep(0.5)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], 0, "no tensor blocks with --no-torch")
    check("allocator probes" not in tr.stderr(), "no probes attached")


def test_python_only_tensor_stacks(tmp):
    """--torch-stacks python: tensor blocks keep their Python frames only (this workload has
    none, so their stack is the probe's own function); accounting stays exact, driver calls
    keep their full stacks."""
    wl, tr = _attach(tmp, "--torch-stacks", "python")
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "torch_allocated_bytes")
    blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
    check(blocks and all([f["function"] for f in s["frames"]] == ["faketorch_malloc"]
                         for s in blocks), f"no native frames for tensors: {blocks[:1]}")
    dev = [s for s in p["stacks"] if s["memory"] == "device"]
    check(all(len(s["frames"]) > 2 for s in dev), "driver calls keep their stacks")


def test_blocks_tell_the_device_of_a_context_from_before_attach(tmp):
    """The job made device 1's context current before gpuleak attached, as a training job
    has: BPF cannot tell which device its driver allocations are on, PyTorch's blocks can.
    A segment holding a block of device 1 is on device 1, and so is the rest of its context
    (the workspace allocated outside the caching allocator). Without the probes the device
    stays unknown (-1), and says so."""
    for tracer_args, dev in (((), 1), (("--no-torch",), -1)):
        wl, tr = _attach(tmp, *tracer_args, wl_args=("--device", "1"))
        wl.go()
        truth, rep = finish_attached(wl, tr)
        p = process(rep, wl.pid)
        check_books(rep, p, truth)
        devs = {d["device"]: d["device_bytes"] for d in p["devices"]}
        check_eq(devs, {dev: p["device_bytes"]}, f"devices with {tracer_args or 'the probes'}")
        check(p["device_bytes"] > truth["sites"]["torch_site_workspace"] > 0,
              "the workspace is part of it")


def _usdt_links(pid):
    """gpuleak's perf-event links: the USDT probes (libcuda's are uprobe_multi links)."""
    return [i for i, t in bpf_objects(pid)["links"].items() if t == "perf"]


def _other_host_wide_tracers(ours):
    """gpuleak processes other than ours that trace every process (attach -a, serve)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if (pid.isdigit() and int(pid) != ours and argv and argv[0].endswith(b"gpuleak") and
                (b"-a" in argv or b"serve" in argv)):
            found.append(int(pid))
    return found


def _wait_log(tr, text, timeout=15):
    wait_until(lambda: text in tr.stderr(), timeout, f"gpuleak to say {text!r}")


def test_tensor_windows_detach_and_rearm_on_request(tmp):
    """Default (windowed) mode: the first window opens with tracing and closes; then the
    probes are detached (the workload sees its semaphore at 0), SIGUSR1 opens a second
    window, which starts from nothing; driver-level books stay exact throughout."""
    wl, tr = _attach(tmp, "--tensor-window", "500ms", "--tensor-duty", "10",
                     "--resolution", "50ms",
                     wl_args=("--iters", "200", "--interval-ms", "20", "--size", "4096"))
    armed = _usdt_links(tr.proc.pid)
    wl.go()
    _wait_log(tr, "tensor window 1 closed")
    time.sleep(0.3)
    check(armed and not _usdt_links(tr.proc.pid),
          f"the allocator probes' links are gone between windows (were {armed})")
    tr.proc.send_signal(signal.SIGUSR1)
    _wait_log(tr, "tensor window 2 (request)")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    # the kernel raises the semaphore while any tracer has the probe installed: a
    # host-wide tracer of someone else (attach -a, serve) holds it up, else it drops to 0
    if not _other_host_wide_tracers(tr.proc.pid):
        check_eq(truth["semaphore_min"], 0, "the semaphore between windows")
    check_eq(truth["semaphore_max"], 1, "the semaphore in a window")
    tl = p["tensor_level"]
    check_eq(tl["mode"], "windowed", "tensor_level.mode")
    check_eq(tl["coverage"], "windowed", "tensor_level.coverage")
    check_eq(tl["windows_total"], 2, "windows")
    check_eq([w["why"] for w in tl["windows"]], ["start", "request"], "why each window opened")
    check(tl["windows"][0]["end_s"] is not None and
          tl["windows"][0]["end_s"] <= tl["windows"][1]["start_s"], f"windows: {tl}")
    # the second window forgot the first's blocks: it holds part of the leak, and the
    # kernel's books agree with user space's
    check(0 < p["torch_allocated_bytes"] < truth["torch_block_bytes"],
          f"torch_allocated_bytes {p['torch_allocated_bytes']} of {truth['torch_block_bytes']}")
    check_eq(p["bpf"]["torch_allocated_bytes"], p["torch_allocated_bytes"],
             "BPF's torch block bytes")
    check(p["consistent"], "books consistent")
    check("tensor blocks: windowed: traced now, in window 2" in tr.stdout() or
          "tensor blocks: windowed: as of the end of window 2" in tr.stdout(),
          f"the text report says what the tensor figures cover:\n{tr.stdout()[-1500:]}")


def test_window_opened_mid_step_books_no_freed_block(tmp):
    """A window opened while the process allocates and frees without a pause: the free
    probe goes on before the malloc probe, so that no block freed between the two
    attaches is booked as outstanding. Each scratch block is freed at once, at an
    address never used again: at the stop, at most one of them (a pair the stop cut in
    two) is outstanding, however many pairs ran while the probes were being attached."""
    wl, tr = _attach(tmp, "--tensor-window", "300ms", "--resolution", "50ms",
                     wl_args=("--iters", "40000000", "--size", "256"))
    wl.go()
    _wait_log(tr, "tensor window 1 closed")
    for n in (2, 3, 4):
        tr.proc.send_signal(signal.SIGUSR1)
        _wait_log(tr, f"tensor window {n} (request)")
        if n < 4:
            _wait_log(tr, f"tensor window {n} closed")
    time.sleep(0.1)
    check(wl.proc.poll() is None, "the workload still runs at the stop")
    check_eq(tr.stop(), 0, "gpuleak exit status")
    wl.kill()
    wl.proc.wait()
    rep = tr.report()
    p = process(rep, wl.pid)
    scratch = [s for s in p["stacks"] if s["memory"] == "torch_block" and
               any(f.get("function") == "torch_site_scratch" for f in s["frames"])]
    held = sum(s["outstanding_allocs"] for s in scratch)
    check(held <= 1, f"{held} freed scratch blocks booked as outstanding after window 4 "
          f"opened mid-step: {scratch}")
    check_eq(p["bpf"]["torch_allocated_bytes"], p["torch_allocated_bytes"],
             f"BPF's torch block bytes (consistent {p['consistent']}, bpf {p['bpf']}, "
             f"calls {p['alloc_calls']}/{p['free_calls']}, complete {rep.get('complete')}, lost "
             f"{rep.get('lost_events')}, unread {rep.get('unread_ring_bytes')}, windows "
             f"{p['tensor_level']['windows']}, stats {rep['stats']})")
    calls = rep["stats"]["calls"]
    check(calls.get("pytorch_malloc", 0) > 10000, f"the windows traced the steps: {calls}")


def test_tensor_window_opens_on_driver_growth(tmp):
    """Segments growing past the last window's high-water mark open a window
    (why "growth") once the duty cycle allows it."""
    wl, tr = _attach(tmp, "--tensor-window", "300ms", "--tensor-duty", "50",
                     "--resolution", "50ms",
                     wl_args=("--iters", "250", "--interval-ms", "20"))
    wl.go()
    _wait_log(tr, "tensor window 2 (growth)")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    whys = [w["why"] for w in p["tensor_level"]["windows"]]
    check(whys[0] == "start" and "growth" in whys, f"windows opened on: {whys}")


def test_sampled_stacks_keep_totals_exact(tmp):
    """--tensors sampled: every block is booked (totals exact), a byte-weighted sample of
    them gets a stack, and the leaking stack's estimate is unbiased (within 4 sigma)."""
    iters, size, rate = 400, 256 * 1024, 1 << 20
    wl, tr = _attach(tmp, "--tensors", "sampled", "--tensor-sample", str(rate),
                     wl_args=("--iters", str(iters), "--size", str(size)))
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "exact tensor total")
    check_eq(p["bpf"]["torch_allocated_bytes"], truth["torch_block_bytes"], "BPF's total")
    check_eq(p["tensor_level"]["coverage"], "sampled", "coverage")
    check_eq(rep["stats"]["stacks_missing"], 0, "no stack counted missing")
    blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
    check_eq(sum(s["outstanding_bytes"] for s in blocks), truth["torch_block_bytes"],
             "sampled and unsampled blocks add up to the total")
    leak = [s for s in blocks if any(f.get("function") == "torch_site_leak" for f in s["frames"])]
    check(leak and all(s.get("sampled") for s in leak), f"the leak's stack is sampled: {leak}")
    prob = 1 - math.exp(-size / rate)
    est = sum(s["estimated_outstanding_allocs"] for s in leak)
    sigma = math.sqrt(iters * (1 - prob) / prob)
    check(abs(est - iters) < 4 * sigma, f"estimated {est:.0f} leaked blocks of {iters} "
          f"(sigma {sigma:.0f})")
    check(sum(s["outstanding_allocs"] for s in leak) < iters, "fewer stacks than blocks")
    check(any(s.get("unsampled") for s in blocks), "the unsampled blocks have their entry")
    check("sampled stack: about" in tr.stdout(), "the text report names the estimates")


def test_default_mode_names_a_tensor_leak_within_its_first_window(tmp):
    """No options: a leak of one tensor block a step at 4 steps a second is a leak
    verdict on its stack within the first window (16 s), and still is, judged as of the
    window's end, once the window has closed."""
    t0 = time.monotonic()
    wl, tr = _attach(tmp, wl_args=("--iters", "80", "--interval-ms", "250", "--size", "65536"))
    wl.go()
    _wait_log(tr, "tensor window 1 closed", timeout=40)
    truth, rep = finish_attached(wl, tr)
    elapsed = time.monotonic() - t0
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["tensor_level"]["coverage"], "windowed", "coverage after the first window")
    leak = [s for s in p["stacks"] if s["memory"] == "torch_block" and
            any(f.get("function") == "torch_site_leak" for f in s["frames"])]
    check(leak and leak[0]["verdict"] == "leak", f"the leaking site's verdict: {leak}")
    check(p["stacks"][0] is leak[0], "the leak ranks first")
    check(elapsed < 60, f"attach to verdict in {elapsed:.0f} s")


def test_tensor_windows_are_each_process_s_own(tmp):
    """attach -a, two PyTorch processes: driver-level growth in one opens a window for it
    alone. The other's probes stay detached (its semaphore at 0 while it runs, none of its
    steps traced) and its tensor_level lists its first window only; each process's JSON
    names its own windows."""
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", FAKECUDA, "--tensor-window", "2s",
                 "--tensor-duty", "50", "--resolution", "50ms"], tmp)
    tr.wait_attached()
    # a grows: a new segment every few steps; b's segment is allocated before it is held,
    # so that its steps make no driver call
    a = Workload("wl_torch", "--iters", "300", "--interval-ms", "20", tmp=tmp, hold=True)
    b = Workload("wl_torch", "--warm", "1", "--iters", "30", "--interval-ms", "10",
                 "--size", "64", tmp=tmp, hold=True)
    a.wait_ready()
    b.wait_ready()
    for wl in (a, b):
        _wait_log(tr, f"PID {wl.pid}: tensor window 1 closed")
    a.go()
    _wait_log(tr, f"PID {a.pid}: tensor window 2 (growth)")
    b.go()  # while a's window is open
    truth_b = b.truth()
    b.release()  # before its duty cycle opens it a window
    b.wait()
    # b ran inside a's window: it is still open (a window lasts 2 s, b's steps 0.3 s)
    err = tr.stderr()
    check(f"PID {a.pid}: tensor window 2 closed" not in err,
          f"b's steps ran while a's second window was open:\n{err[-2000:]}")
    truth_a = a.truth()
    tr.stop()
    a.release()
    a.wait()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    pa, pb = process(rep, a.pid), process(rep, b.pid)
    check_books(rep, pa, truth_a)
    check_books(rep, pb, truth_b)
    # another host-wide tracer (attach -a, serve) may hold b's probes itself
    if not _other_host_wide_tracers(tr.proc.pid):
        check_eq(truth_b["semaphore_max"], 0, "b's semaphore while a's window was open")
        check_eq(truth_b["traced_steps"], 0, "b's steps traced")
    check_eq(truth_a["semaphore_max"], 1, "a's semaphore in its windows")
    ta, tb = pa["tensor_level"], pb["tensor_level"]
    whys_a = [w["why"] for w in ta["windows"]]
    check(whys_a[:2] == ["start", "growth"], f"a's windows: {ta}")
    check_eq(ta["windows_total"], len(whys_a), "a's windows_total")
    check_eq([w["why"] for w in tb["windows"]], ["start"], "b's windows")
    check_eq(tb["windows_total"], 1, "b's windows_total")
    check_eq(tb["armed"], False, "b's probes at the end")
    check_eq(tb["coverage"], "windowed", "b's coverage")
    check(tb["windows"][0]["end_s"] is not None and
          tb["windows"][0]["end_s"] <= ta["windows"][1]["start_s"],
          f"b's window closed before a's second opened: {tb} {ta}")
    # b's blocks came while its probes were detached: none in its books, nor in BPF's
    check_eq(pb["torch_blocks"], 0, "b's tensor blocks")
    check_eq(pb["bpf"]["torch_allocated_bytes"], 0, "b's tensor bytes in BPF's books")
    check(pa["torch_blocks"] > 0, "a's blocks of its windows")
    check_eq(pa["bpf"]["torch_allocated_bytes"], pa["torch_allocated_bytes"],
             "a's tensor bytes: BPF's books agree")
