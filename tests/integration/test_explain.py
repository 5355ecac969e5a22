# SPDX-License-Identifier: BSD-2-Clause
"""Where a process's device memory is, and why its allocations ran out of memory:
tests/workloads/wl_explain.c runs out of the stand-in driver's 60 MiB for one reason
per scenario (a leak, fragmentation, a library outside PyTorch, a peak, memory from
before attach), through the PyTorch allocator stand-in; NVML's figures come from the
stand-in library of fake_nvml.c. Each report's breakdown and each failure's cause are
checked against the workload's own figures."""
import os

from harness import Tracer, Workload, build_fake_nvml, check, check_eq, process, run_gpuleak

MIB = 1 << 20
CAPACITY = 60 * MIB


def explain(tmp, scenario, *wl_args, nvml_procs=None, tracer_args=()):
    """Runs the scenario under an attached gpuleak with a fake NVML (a device of CAPACITY
    whose free memory is what the workload leaves; nvml_procs: {pid or 'self': bytes});
    returns (truth, the process's report, the text report, its out-of-memory failures)."""
    libdir = build_fake_nvml(tmp)
    nvml_file = os.path.join(tmp, "nvml.txt")
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, FAKE_NVML_FILE=nvml_file)
    wl = Workload("wl_explain", "--scenario", scenario, *wl_args, tmp=tmp, hold=True)
    wl.wait_ready()
    with open(nvml_file, "w") as f:
        f.write(f"device {CAPACITY} {4 * MIB} GPU-fake-0\n")
        for pid, used in (nvml_procs or {}).items():
            f.write(f"proc 0 {wl.pid if pid == 'self' else pid} {used}\n")
    tr = Tracer(["attach", "-i", "0", *tracer_args, str(wl.pid)], tmp, env=env)
    try:
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        tr.stop()
    finally:
        wl.release()
        wl.wait()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    p = process(tr.report(), wl.pid)
    with open(tr.out_path) as f:
        text = f.read()
    ooms = [f for f in p["failures_list"] if f["error"] == "CUDA_ERROR_OUT_OF_MEMORY"]
    check_eq(len(ooms), truth["expect"]["oom_failures"], "out-of-memory failures")
    check(all(f["oom"] for f in ooms), f"every out-of-memory failure explained: {ooms}")
    return truth, p, text, ooms


def check_retry(ooms, segment):
    """PyTorch's own retry: the first request failed, it freed its cache (nothing cached
    whole here) and asked again, which failed too."""
    first, second = ooms[-2]["oom"], ooms[-1]["oom"]
    check_eq(first["torch_request"], True, "the failing request is PyTorch's allocator's")
    check_eq(first["request_bytes"], segment, "the request: one segment")
    check_eq(first["torch_retry"], "failed", "PyTorch's retry failed too")
    check_eq(second["is_torch_retry"], True, "the second failure is PyTorch's retry")
    check_eq(first["retry_freed_bytes"], 0, "no segment was cached whole")
    check_eq(first["device_free_bytes"], 4 * MIB, "NVML's free memory at the failure")


def check_text(text, *wants):
    for w in wants:
        check(w in text, f"the text report says {w!r}:\n{text}")


def test_fragmentation(tmp):
    truth, p, text, ooms = explain(tmp, "fragmentation")
    m = p["memory"]
    check_eq(m["driver_level_only"], False, "PyTorch's blocks were seen")
    check_eq(m["torch_reserved_bytes"], truth["torch_reserved"], "reserved: the segments")
    check_eq(m["torch_allocated_bytes"], truth["torch_allocated"], "allocated: the blocks")
    check_eq(m["torch_cached_bytes"], truth["torch_reserved"] - truth["torch_allocated"],
             "cached: segments minus blocks")
    check_eq(m["largest_free_extent_bytes"], MIB, "every other 1 MiB block was freed")
    check_eq(m["devices"][0]["free_extents"], (truth["torch_reserved"] - truth["torch_allocated"])
             // MIB, "one free extent per freed block")
    check(abs(m["fragmentation"] - (1 - MIB / m["torch_cached_bytes"])) < 1e-5,
          f"fragmentation 1 - largest / free: {m['fragmentation']}")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "fragmentation", f"the cause: {o}")
    check("expandable_segments:True" in o["action"], f"the action: {o['action']}")
    check_eq(o["largest_free_extent_bytes"], MIB, "largest free extent at the failure")
    check_eq(o["torch_cached_bytes"], truth["torch_reserved"] - truth["torch_allocated"],
             "the reserve's free bytes at the failure")
    check_retry(ooms, truth["segment"])
    check_text(text, "cause: fragmentation", "largest free extent 1.00 MiB",
               "the retry failed too")


def test_leak_to_oom(tmp):
    # --tensors full: every block traced, so the map is whole when the device fills
    truth, p, text, ooms = explain(tmp, "leak", "--interval-ms", "60",
                                   tracer_args=("--resolution", "50ms", "--tensors", "full"))
    o = ooms[0]["oom"]
    check_eq(o["cause"], "leak", f"the cause: {o}")
    check_eq(o["leak_bytes"], truth["torch_allocated"], "the leaking blocks held it all")
    check(".detach()" in o["action"], f"the action: {o['action']}")
    check_retry(ooms, truth["segment"])
    check_text(text, "cause: leak: stacks judged to leak held 56.00 MiB")


def test_library_outside_torch(tmp):
    truth, p, text, ooms = explain(tmp, "library")
    m = p["memory"]
    check_eq(m["outside_torch_bytes"], truth["outside_bytes"], "outside PyTorch: the library's")
    # the context was made before attach: its device is learned from PyTorch's blocks, for
    # the allocations they lie in; the library's stay on "device not known"
    libs = [lib for d in m["devices"] for lib in d["outside_torch_libraries"]]
    check_eq(libs, [{"library": "nccl", "bytes": truth["outside_bytes"]}],
             "grouped under the library whose code asked")
    check_eq(m["torch_reserved_bytes"], truth["torch_reserved"], "PyTorch's reserve")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "outside_torch", f"the cause: {o}")
    check_eq(o["top_library"], {"library": "nccl", "bytes": truth["outside_bytes"]},
             "the library named")
    check_text(text, "outside PyTorch: nccl 40.00 MiB", "cause: outside_torch: nccl held")


def test_peak(tmp):
    truth, p, text, ooms = explain(tmp, "peak")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "peak", f"the cause: {o}")
    check_eq(o["held_bytes"], truth["torch_reserved"], "held at the failure")
    check_eq(o["leak_bytes"], 0, "nothing judged to leak")
    check_eq(p["memory"]["torch_cached_bytes"], 0, "the reserve is full of blocks")
    check_text(text, "cause: peak")


def test_memory_before_attach(tmp):
    nvml_used = 48 * MIB + 8 * MIB  # what the job holds by then: before attach + one segment
    truth, p, text, ooms = explain(tmp, "preattach", nvml_procs={"self": nvml_used})
    m = p["memory"]
    check_eq(m["nvml_bytes"], nvml_used, "NVML's figure")
    check_eq(m["seen_bytes"], truth["torch_reserved"], "what gpuleak saw allocated")
    check_eq(m["context_and_pre_attach_bytes"], truth["pre_attach"],
             "NVML minus what gpuleak saw")
    check_eq(m["torch_reserved_bytes"] + m["outside_torch_bytes"] +
             m["context_and_pre_attach_bytes"] - m["unexplained_bytes"], m["nvml_bytes"],
             "the parts add up to NVML's figure")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "unknown", f"the cause: {o}")
    check("before gpuleak attached" in o["why"], f"why: {o['why']}")
    check_text(text, "memory: NVML 56.00 MiB = PyTorch 8.00 MiB + outside PyTorch 0 B + "
               "context and before attach 48.00 MiB")


def test_driver_level_only(tmp):
    """Without PyTorch's allocator probes the reserve cannot be split: the breakdown and
    the cause say so, and claim no fragmentation."""
    truth, p, text, ooms = explain(tmp, "fragmentation", tracer_args=("--no-torch",))
    m = p["memory"]
    check_eq(m["driver_level_only"], True, "driver level only")
    check_eq(m["torch_reserved_bytes"], truth["torch_reserved"], "the segments are seen")
    for k in ("torch_allocated_bytes", "torch_cached_bytes", "largest_free_extent_bytes",
              "fragmentation"):
        check_eq(m[k], None, f"{k}: not known without the blocks")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "unknown", f"the cause: {o}")
    check("tensor probes were not armed" in o["why"], f"why: {o['why']}")
    check_text(text, "its blocks were not all seen (tensor probes not armed")


def explained(tmp, wl, duration, env=None):
    """gpuleak explain -d DURATION on wl, ready and held, while it goes on; returns wl's truth,
    explain's stdout and the tracer, whose exit status is checked."""
    tr = Tracer(["explain", "-d", duration, str(wl.pid)], tmp, env=env, json_report=False)
    try:
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        check_eq(tr.wait(timeout=20), 0, "gpuleak explain's exit status")
    finally:
        wl.release()
        wl.wait()
    with open(tr.out_path) as f:
        return truth, f.read(), tr


def test_explain_command(tmp):
    """gpuleak explain PID: a one-shot attach that prints the breakdown and each
    out-of-memory failure's cause, and nothing else, on stdout."""
    wl = Workload("wl_explain", "--scenario", "fragmentation", tmp=tmp, hold=True)
    wl.wait_ready()
    truth, out, tr = explained(tmp, wl, "1500ms")
    check_text(out, f"PID {wl.pid} (wl_explain)",
               "PyTorch: 56.00 MiB reserved = 28.00 MiB allocated + 28.00 MiB cached; "
               "largest free extent 1.00 MiB", "out of memory: cuMemAlloc_v2(8.00 MiB)",
               "cause: fragmentation", "this is PyTorch's own retry")
    check("[1]" not in out and "#0" not in out, f"no stacks in explain's answer:\n{out}")
    check_eq(truth["torch_reserved"], 56 * MIB, "the workload's reserve")
    check("out of memory: fragmentation" in tr.stderr(), f"the warning names the cause: "
          f"{tr.stderr()}")
    rc, _, err = run_gpuleak(["explain", "-a"])
    check(rc == 2 and "-a is not an option of explain" in err and err.count("\n") == 1,
          f"explain -a is refused in one line: {rc} {err!r}")


def test_tensor_windows_leave_the_map_partial(tmp):
    """In tensor windows (the default) a window of 16 x 50 ms closes before the device
    fills: its blocks are not the allocator's whole map, so the breakdown does not split
    the reserve and the failure claims neither fragmentation nor a tensor leak."""
    truth, p, text, ooms = explain(tmp, "leak", "--interval-ms", "60",
                                   tracer_args=("--resolution", "50ms"))
    check_eq(p["memory"]["driver_level_only"], True, "the block map is partial")
    check_eq(p["memory"]["torch_cached_bytes"], None, "cached not told from a window's blocks")
    o = ooms[0]["oom"]
    check_eq(o["cause"], "unknown", f"the cause: {o}")
    check("armed in windows" in o["why"], f"why: {o['why']}")


def test_torch_reserve_before_attach(tmp):
    """PyTorch's segments from before attach, its blocks since: the reserve gpuleak saw is
    split into its own blocks and cached, the blocks beyond it are said to lie in a reserve
    from before attach, and no line claims reserved = allocated + cached over figures that
    cannot add up (allocated above reserved)."""
    nvml_used = 4 * 8 * MIB  # three segments from before attach and one since
    truth, p, text, ooms = explain(tmp, "torch_preattach", nvml_procs={"self": nvml_used})
    m = p["memory"]
    seen_blocks = truth["torch_allocated"] - truth["blocks_outside"]
    check_eq(m["driver_level_only"], False, "PyTorch's blocks were seen")
    check_eq(m["reserve_predates_attach"], True, "part of the reserve predates the attach")
    check_eq(m["torch_reserved_bytes"], truth["torch_reserved"], "the reserve seen: one segment")
    check_eq(m["torch_allocated_bytes"], truth["torch_allocated"], "every block seen")
    check_eq(m["blocks_outside_segments_bytes"], truth["blocks_outside"],
             "blocks in the segments from before attach")
    check_eq(m["torch_allocated_in_seen_segments_bytes"], seen_blocks,
             "blocks in the segment seen")
    check_eq(m["torch_cached_bytes"], truth["torch_reserved"] - seen_blocks,
             "cached: the segment seen minus its blocks")
    check_eq(m["context_and_pre_attach_bytes"], truth["pre_attach"], "NVML minus what was seen")
    check(truth["torch_allocated"] > truth["torch_reserved"],
          f"the scenario has more blocks than reserve seen: {truth}")
    for line in text.splitlines():
        check(not ("reserved =" in line and "allocated" in line and "since attach" not in line),
              f"no identity of the whole reserve: {line!r}")
    check_text(text, "PyTorch: 26.00 MiB allocated in blocks; part of its reserve predates "
               "the attach: 22.00 MiB of the blocks lie in segments allocated before it",
               "of the reserve seen since attach: 8.00 MiB = 4.00 MiB allocated + 4.00 MiB "
               "cached")
    check_eq(ooms, [], "no failure")


def explain_idle(tmp, others=0):
    """gpuleak explain on a process that allocated 48 MiB before attach and nothing while
    traced, NVML faked (a second process holding `others` when set); returns the text."""
    libdir = build_fake_nvml(tmp)
    nvml_file = os.path.join(tmp, "nvml.txt")
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, FAKE_NVML_FILE=nvml_file)
    wl = Workload("wl_explain", "--scenario", "idle", tmp=tmp, hold=True)
    wl.wait_ready()
    total = 100 * MIB  # NVML's device, apart from the stand-in driver's capacity
    free = total - 48 * MIB - others
    with open(nvml_file, "w") as f:
        f.write(f"device {total} {free} GPU-fake-0\n")
        f.write(f"proc 0 {wl.pid} {48 * MIB}\n")
        if others:
            f.write(f"proc 0 1 {others}\n")
    truth, out, _ = explained(tmp, wl, "1s", env=env)
    check_eq(truth["pre_attach"], 48 * MIB, "the workload's memory from before attach")
    return wl.pid, out


def test_explain_idle_process(tmp):
    """No allocation in the window: explain still gives NVML's figure for the process, as
    memory from before attach, and what an out-of-memory failure now could be told from."""
    pid, out = explain_idle(tmp)
    check("no CUDA allocations seen" not in out, f"the process is answered for:\n{out}")
    check_text(out, f"PID {pid} (wl_explain)",
               "no CUDA allocation, free or failure seen since attach",
               "memory: NVML 48.00 MiB, all allocated before attach or the CUDA context",
               "NVML GPU 0: the process 48.00 MiB, other processes 0 B, free 52.00 MiB of "
               "100.00 MiB (NVML)", "an out-of-memory failure now: cause unknown")


def test_explain_idle_process_beside_others(tmp):
    pid, out = explain_idle(tmp, others=40 * MIB)
    check_text(out, "other processes 40.00 MiB, free 12.00 MiB",
               "an out-of-memory failure now: other_processes would matter")
