# SPDX-License-Identifier: BSD-2-Clause
"""Allocation patterns of frameworks beside PyTorch, and of steady services, against the
CUDA driver stand-in (tests/workloads/wl_frameworks.c): XLA's preallocated pool (one block
of 3/4 of the device, results carved out of it with no driver call) is named with the
settings that make its buffers visible and draws no leak verdict; a service with a
preallocated cache and requests of random sizes, and training on batches of random
length through a caching allocator, draw no leak verdict; a job that leaked before
gpuleak attached is still named at its line, and what it held before is reported as
such."""
import os
import shutil

from harness import (FAKECUDA, OUTPUT, TestFailure, Tracer, Workload, attached_targets,
                     build_fake_nvml, check, check_books, check_eq, check_sites, process,
                     wait_until)

MIB = 1 << 20
GIB = 1 << 30
POOL_CAPACITY = 8 * GIB
RESOLUTION = "50ms"  # a verdict needs 8 of these


def trace(tmp, scenario, *wl_args, nvml=None, capacity=None, tracer=("attach", "-i", "0"),
          tracer_args=("--resolution", RESOLUTION)):
    """Runs the scenario under gpuleak (attached while the workload waits). nvml: None (no
    NVML), or {'total': bytes, 'self': bytes the process uses}. Returns (truth, the
    process's report or None, the text gpuleak wrote on stdout, gpuleak's stderr)."""
    env = dict(os.environ)
    wl_env = dict(os.environ)
    if capacity:
        wl_env["FAKECUDA_CAPACITY"] = str(capacity)
    json_report = tracer[0] != "explain"
    wl = Workload("wl_frameworks", "--scenario", scenario, *wl_args, tmp=tmp, hold=True,
                  env=wl_env)
    wl.wait_ready()
    if nvml is not None:
        libdir = build_fake_nvml(tmp)
        nvml_file = os.path.join(tmp, "nvml.txt")
        env.update(LD_LIBRARY_PATH=libdir, FAKE_NVML_FILE=nvml_file)
        with open(nvml_file, "w") as f:
            f.write(f"device {nvml['total']} {nvml['total'] // 8} GPU-fake-0\n")
            f.write(f"proc 0 {wl.pid} {nvml['self']}\n")
    else:
        # no NVML library, and no nvidia-smi command to fall back on
        env["GPULEAK_NVIDIA_SMI"] = "/nonexistent/nvidia-smi"
    tr = Tracer([*tracer, *tracer_args, str(wl.pid)], tmp, env=env, json_report=json_report)
    try:
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        if json_report:
            tr.stop()
        else:
            tr.wait(timeout=30)
    finally:
        wl.release()
        wl.wait()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    p = process(tr.report(), wl.pid) if json_report else None
    return truth, p, tr.stdout(), tr.stderr()


def check_no_leak(p, what):
    leaks = [(s.get("site"), s["outstanding_bytes"], s.get("why")) for s in p["stacks"]
             if s["verdict"] == "leak"]
    check(not leaks, f"{what}: no leak verdict, got {leaks}")


def stack_at(p, function):
    found = [s for s in p["stacks"] if any(f.get("function") == function for f in s["frames"])]
    check(len(found) == 1, f"one stack through {function}: {[s.get('site') for s in found]}")
    return found[0]


def test_xla_pool_named_with_its_settings(tmp):
    """JAX's default: 3/4 of an 8 GiB device in one block by the XLA runtime (jaxlib's
    xla_extension.so), 1 MiB results kept inside it every step. The report says the pool is
    XLA's, its share of the device and line, that growth inside it is invisible, and the
    two settings that make each buffer visible; the block is no leak."""
    truth, p, text, err = trace(tmp, "pool", "--iters", "30", "--interval-ms", "20",
                                nvml={"total": POOL_CAPACITY, "self": 6 * GIB + 300 * MIB},
                                capacity=POOL_CAPACITY)
    check_books({"lost_events": 0}, p, truth)
    check_sites(p, truth)
    check_eq(truth["pool_bytes"], 6 * GIB, "the workload's pool")
    check(truth["pool_used"] > 0, "results were kept inside the pool")
    pools = p["memory"]["pools"]
    check_eq(len(pools), 1, "pools found")
    pool = pools[0]
    check_eq(pool["bytes"], truth["pool_bytes"], "the pool's bytes")
    check_eq(pool["framework"], "XLA", "the pool's framework")
    check_eq(pool["library"], "xla", "the library that asked")
    check_eq(pool["device_total_bytes"], POOL_CAPACITY, "the device's memory (NVML)")
    check_eq(pool["growth_inside_visible"], False, "growth inside is visible")
    check("XLA_PYTHON_CLIENT_PREALLOCATE=false" in pool["visible_with"] and
          "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in pool["visible_with"],
          f"both settings named: {pool['visible_with']}")
    st = stack_at(p, "xla_standin_preallocate")
    check_eq(pool["stack_id"], st["stack_id"], "the pool's stack")
    check(st["verdict"] != "leak", f"the pool is no leak: {st['verdict']} {st.get('why')}")
    check_no_leak(p, "a preallocated pool")
    # it had CUDA before the attach: a pool from then would not have been seen
    check("has XLA loaded (" in err and "xla_extension.so) and used CUDA before gpuleak "
          "attached" in err and "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in err,
          f"the warning about a pool from before attach:\n{err}")
    for want in ("pool: XLA's preallocated pool, 6.00 GiB in one allocation (75% of ",
                 "growth inside it is invisible to gpuleak",
                 "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform"):
        check(want in text, f"the text report says {want!r}:\n{text}")


def test_xla_pool_without_nvml_and_in_explain(tmp):
    """Without NVML the device's size is not known: XLA's block of 6 GiB is still named a
    pool (device total null), and gpuleak explain says the same."""
    truth, p, _, _ = trace(tmp, "pool", "--iters", "5", "--interval-ms", "10",
                           capacity=POOL_CAPACITY)
    pools = p["memory"]["pools"]
    check(len(pools) == 1 and pools[0]["device_total_bytes"] is None and
          pools[0]["framework"] == "XLA", f"the pool without NVML: {pools}")
    _, _, out, _ = trace(tmp, "pool", "--iters", "5", "--interval-ms", "10",
                         capacity=POOL_CAPACITY, tracer=("explain", "-d", "1500ms"),
                         tracer_args=())
    check("pool: XLA's preallocated pool, 6.00 GiB in one allocation" in out and
          "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in out, f"explain names the pool:\n{out}")


def test_service_with_cache_and_random_requests_is_steady(tmp):
    """An inference service: a cache preallocated once, then requests of 1 to 8 buffers of
    random sizes, freed when answered: no leak verdict; the cache held once, the requests
    back to nothing."""
    truth, p, _, _ = trace(tmp, "service", "--iters", "80", "--interval-ms", "15")
    check_books({"lost_events": 0}, p, truth)
    check_sites(p, truth)
    check_no_leak(p, "a steady service")
    check_eq(stack_at(p, "pool_site_cache")["verdict"], "steady", "the cache's verdict")
    check_eq(p["memory"]["pools"], [], "a 32 MiB cache is no framework pool")


def test_batches_of_random_length_are_steady(tmp):
    """Training on batches of random length through a caching allocator, four runs of
    other lengths (seeds) under one gpuleak: the reserve follows the longest batch so far
    (up to 512 MiB in 2 MiB-rounded segments, new highs ever rarer) and stays; no leak
    verdict in any of them."""
    wls = [Workload("wl_frameworks", "--scenario", "batches", "--iters", "100", "--size",
                    str(64 * MIB), "--interval-ms", "15", "--seed", str(seed), tmp=tmp,
                    hold=True) for seed in range(1, 5)]
    for w in wls:
        w.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--resolution", RESOLUTION, *[str(w.pid) for w in wls]],
                tmp)
    try:
        tr.wait_attached(count=len(wls), pids=[w.pid for w in wls])
        for w in wls:
            w.go()
        truths = [w.truth() for w in wls]
        tr.stop()
    finally:
        for w in wls:
            w.release()
            w.wait()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    for w, truth in zip(wls, truths):
        p = process(rep, w.pid)
        check_books(rep, p, truth)
        check_sites(p, truth)
        check(p["device_bytes"] > 256 * MIB,
              f"the reserve followed the batches: {p['device_bytes']}")
        check_no_leak(p, f"batches of random length (PID {w.pid})")


def test_each_target_is_attached_before_it_goes(tmp):
    """Two targets: one attached at once, with XLA loaded (gpuleak then warns in a line
    that says "... before gpuleak attached: ..."), one that has not loaded libcuda yet.
    That warning is no attach: the second is not counted until its own line says so, and
    only then do the workloads go, so both are exact from their first call."""
    late = os.path.join(tmp, "late")
    os.makedirs(late)
    shutil.copy(FAKECUDA, os.path.join(late, "libcuda.so.1"))  # a file no tracer has seen
    xla = Workload("wl_frameworks", "--scenario", "batches", "--iters", "20", "--size",
                   str(64 * MIB), "--interval-ms", "5", "--seed", "7", tmp=tmp, hold=True)
    dl = Workload("wl_dlopen", "--lib", os.path.join(late, "libcuda.so.1"), "--late-ms", "0",
                  tmp=tmp, hold=True)
    wls = (xla, dl)
    for w in wls:
        w.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(xla.pid), str(dl.pid)], tmp)
    try:
        wait_until(lambda: "has XLA loaded" in tr.stderr() and
                   f"PID {dl.pid} has not loaded libcuda yet" in tr.stderr(), 20,
                   "gpuleak to attach the first target and wait for the second")
        try:
            tr.wait_attached(count=2, timeout=1)
        except TestFailure:
            pass
        else:
            raise TestFailure(f"two targets counted as attached while PID {dl.pid} waits "
                              f"for its libcuda:\n{tr.stderr()}")
        check_eq(attached_targets(tr.stderr()), ({xla.pid}, 0), "the targets attached")
        dl.go()  # it loads libcuda now, and is held there until its probes are in
        tr.wait_attached(count=2, pids=[w.pid for w in wls])
        xla.go()
        truths = [w.truth() for w in wls]
        tr.stop()
    finally:
        for w in wls:
            w.release()
            w.wait()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    check(rep["complete"], f"complete: {rep['incomplete_why']}")
    for w, truth in zip(wls, truths):
        check_books(rep, process(rep, w.pid), truth)
        check_eq(process(rep, w.pid)["alloc_calls"], truth["alloc_calls"], "calls booked")


def test_no_xla_warning_when_attached_first(tmp):
    """gpuleak run starts the program under its probes: nothing came before, no warning
    about XLA's pool from before attach."""
    from harness import WORKLOADS
    env = dict(os.environ, FAKECUDA_CAPACITY=str(POOL_CAPACITY),
               GPULEAK_NVIDIA_SMI="/nonexistent/nvidia-smi")
    tr = Tracer(["run", "--", os.path.join(WORKLOADS, "wl_frameworks"), "--scenario", "pool",
                 "--iters", "3", "--interval-ms", "10", "--no-wait"], tmp, env=env)
    check_eq(tr.wait(timeout=60), 0, "gpuleak run's exit status")
    check("has XLA loaded" not in tr.stderr(), f"no warning:\n{tr.stderr()}")
    p = tr.report()["processes"][0]
    check_eq(stack_at(p, "xla_standin_preallocate")["outstanding_bytes"], POOL_CAPACITY // 4 * 3,
             "the pool is seen from its start")


def test_late_attach_names_the_leak_and_what_came_before(tmp):
    """A job that leaked 16 steps before gpuleak attached: the leak is named at its line
    once it goes on, and NVML's figure minus what gpuleak saw is reported as the context
    and memory from before attach, with no unmatched frees."""
    steps, size = 40, MIB
    total = (16 + steps) * size
    truth, p, text, _ = trace(tmp, "late", "--iters", str(steps), "--interval-ms", "25",
                              nvml={"total": 64 * GIB, "self": total})
    check_books({"lost_events": 0}, p, truth)
    check_eq(truth["pre_attach"], 16 * size, "the workload's memory from before attach")
    st = stack_at(p, "leak_site_late")
    check_eq(st["verdict"], "leak", f"the leak's verdict ({st.get('why')})")
    check_eq(st["outstanding_bytes"], steps * size, "bytes seen at the leak's line")
    check_eq(p["memory"]["context_and_pre_attach_bytes"], truth["pre_attach"],
             "context and before attach")
    check_eq(p["pre_attach_bytes"], truth["pre_attach"], "pre_attach_bytes")
    check_eq(p["unmatched_frees"], 0, "unmatched frees")
    check("context and before attach 16.00 MiB" in text, f"the text says so:\n{text}")


def worker_stacks(tmp, *wl_args):
    """py_stacks.py with the XLA runtime stand-in's worker thread allocating while the
    main thread waits in the call: (truth, the process's report)."""
    from test_python import traced_run
    xla = os.path.join(OUTPUT, "workloads", "jaxlib", "xla_extension.so")
    wl, truth, tr = traced_run(tmp, wl_args=("--depth", "0", "--worker", xla, *wl_args))
    return truth, process(tr.report(), wl.pid)


def through_worker(p):
    found = [s for s in p["stacks"]
             if any(f.get("function") == "xla_standin_worker" for f in s["frames"])]
    check(found, f"a stack through the worker thread: {[s.get('site') for s in p['stacks']]}")
    return found


def test_worker_thread_caller_inferred(tmp):
    """A thread that runs no Python allocates while the main thread waits in the call that
    started it: its stack goes on, behind a note saying so, with the main thread's Python
    frames at that call, each marked inferred; the site says (inferred)."""
    from test_python import check_site, py_frames
    truth, p = worker_stacks(tmp)
    site = truth["py_sites"]["worker"]
    check_site(p, "worker", site)
    for st in through_worker(p):
        names = [f.get("function") or "" for f in st["frames"]]
        note = [i for i, n in enumerate(names) if n.startswith("[inferred caller")]
        check(note, f"the note before the inferred frames: {names}")
        after = st["frames"][note[0] + 1:]
        check(after and all(f["kind"] == "python" and f.get("inferred") for f in after),
              f"every frame after the note is Python and inferred: {after}")
        check(not any(f.get("inferred") for f in st["frames"][:note[0]]),
              "the worker's own frames are not inferred")
        check(st["site"].endswith("(inferred)"), f"the site says inferred: {st['site']}")
        check_eq(py_frames(st)[0][2], site["frames"][0][2], "the inferred line")
    # the main thread's own sites are its own, not inferred
    for name in ("main", "thread"):
        check_site(p, name, truth["py_sites"][name])
    for st in p["stacks"]:
        if any(f.get("function") == "alloc_in_main" for f in st["frames"]):
            check(not any(f.get("inferred") for f in st["frames"]), "main's frames inferred")


def test_worker_thread_with_several_python_threads_says_why(tmp):
    """With two more Python threads waiting inside Python code, the caller cannot be told:
    no Python frames are inferred, and the stack says why instead."""
    _, p = worker_stacks(tmp, "--idle-threads", "2")
    for st in through_worker(p):
        check(not [f for f in st["frames"] if f["kind"] == "python"],
              f"no Python frames guessed: {st['frames']}")
        check(any((f.get("function") or "").startswith("[no Python caller") and
                  "several Python threads" in f["function"] for f in st["frames"]),
              f"the note says why: {[f.get('function') for f in st['frames']]}")


def test_inferred_caller_kept_by_recordings(tmp):
    """A recording keeps the note and the inferred frames: its report shows the worker's
    stack as the live attach does, with no Python process left to ask."""
    from test_python import check_site
    from test_record import record_py_stacks
    xla = os.path.join(OUTPUT, "workloads", "jaxlib", "xla_extension.so")
    wl, truth, rep, text = record_py_stacks(tmp, "worker.glr", "--depth", "0", "--worker", xla)
    p = process(rep, wl.pid)
    check_site(p, "worker", truth["py_sites"]["worker"])
    for st in through_worker(p):
        check(any((f.get("function") or "").startswith("[inferred caller") for f in st["frames"])
              and any(f.get("inferred") for f in st["frames"]),
              f"the note and inferred frames in the recording's report: {st['frames']}")
    check("[python, inferred]" in text and "[inferred caller:" in text,
          f"the text report shows them:\n{text}")
