# SPDX-License-Identifier: BSD-2-Clause
"""Leak verdicts against the CUDA driver stand-in: each pattern of
tests/workloads/wl_patterns.c is traced for about two seconds at a 50 ms resolution
(--resolution), and gpuleak's JSON verdicts, growth rates, ranking and process-level
figures are checked. NVML's figures come from a stand-in library built from
fake_nvml.c."""
import os
import signal

from harness import Tracer, Workload, build_fake_nvml, check, check_eq, process

HERE = os.path.dirname(os.path.abspath(__file__))
RESOLUTION = "50ms"  # a verdict needs 8 of these: 0.4 s
RUN_MS = 2000
STEP_S = 0.020  # wl_patterns' default --interval-ms
MIB = 1 << 20


def trace(tmp, patterns, run_ms=RUN_MS, resolution=RESOLUTION, env=None, wl_args=()):
    """Starts one wl_patterns per pattern, attaches one gpuleak to all of them, lets them
    run for run_ms and returns ({pattern: its process in the report}, report)."""
    wls = {}
    for p in patterns:
        wls[p] = Workload("wl_patterns", "--pattern", p, *wl_args, tmp=tmp)
    for wl in wls.values():
        wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--resolution", resolution, "-d", f"{run_ms}ms",
                 *[str(wl.pid) for wl in wls.values()]], tmp, env=env)
    try:
        tr.wait_attached(count=len(wls), pids=[wl.pid for wl in wls.values()])
        for wl in wls.values():
            wl.go()
        check_eq(tr.wait(timeout=run_ms / 1000 + 20), 0, "gpuleak exit status")
    finally:
        for wl in wls.values():
            wl.kill(signal.SIGTERM)
            wl.wait()
    rep = tr.report()
    check_eq(rep["lost_events"], 0, "lost_events")
    return {p: process(rep, wl.pid) for p, wl in wls.items()}, rep


def site(proc, name):
    """The one stack that allocates at the workload's function `name`."""
    found = [s for s in proc["stacks"]
             if any(f.get("function") == name for f in s["frames"])]
    check_eq(len(found), 1, f"stacks through {name} (stacks: {summary(proc)})")
    return found[0]


def summary(proc):
    return [(s["verdict"], s["outstanding_bytes"], s.get("why"),
             [f.get("function") for f in s["frames"][:3]]) for s in proc["stacks"]]


def check_verdict(st, want, *words):
    """The verdict, explained with one of words (any, if none given)."""
    why = st.get("why", "")
    check(st["verdict"] == want and (not words or any(w in why for w in words)),
          f"verdict {st['verdict']} ({why}), want {want} saying one of {words!r}")


def check_no_leak(proc):
    leaks = [s for s in proc["stacks"] if s["verdict"] == "leak"]
    check(not leaks, f"no stack is a leak: {summary(proc)}")


def check_rate(got, want, what):
    """Steps come a little slower than their interval on a busy machine, never faster."""
    check(0.5 * want <= got <= 1.1 * want, f"{what}: {got:.0f} B/s, want about {want:.0f}")


def test_staircase_is_a_leak(tmp):
    procs, _ = trace(tmp, ["staircase"])
    p = procs["staircase"]
    st = site(p, "pattern_keep_output")
    check_verdict(st, "leak", "no plateau")
    check_rate(st["growth_bytes_per_s"], MIB / STEP_S, "growth of the staircase")
    check_eq(p["stacks"][0]["stack_id"], st["stack_id"], "the leak is ranked first")
    # one buffer kept per step, none freed: the hint names the pattern with its evidence
    check_eq(st.get("pattern", {}).get("name"), "outputs kept across steps",
             f"the pattern hint: {st.get('pattern')}")
    check(f"{st['outstanding_allocs']} of {st['allocs']} allocated here are held"
          in st["pattern"]["evidence"], f"its evidence: {st['pattern']}")
    check_rate(p["device_growth_bytes_per_s"], MIB / STEP_S, "growth of the process")
    check_eq(p["projected_oom_s"], None, "no projection without NVML")
    check("pre_attach_bytes" not in p, "no pre-attach figure without NVML")


def test_warmup_then_pool_reuse_is_steady(tmp):
    procs, _ = trace(tmp, ["warmup"])
    p = procs["warmup"]
    st = site(p, "pattern_pool_grow")
    check_verdict(st, "steady", "plateau at 10.00 MiB")
    check("pattern" not in st, "no leak pattern for a steady stack")
    check_eq(st["outstanding_allocs"], 10, "segments of the warmed-up pool")
    check_eq(st["growth_bytes_per_s"], 0, "growth of a plateau")
    check_no_leak(p)
    check_eq(p["device_growth_bytes_per_s"], 0, "growth of the process")


def test_release_and_reallocate_every_n_steps_is_steady(tmp):
    procs, _ = trace(tmp, ["release"])
    p = procs["release"]
    st = site(p, "pattern_cache_block")
    check(st["frees"] >= 30, f"the cache was released several times ({st['frees']} frees)")
    # released to nothing every N steps: seen either as the return to 0 B or, when
    # the last release is recent, as a floor flat at 0 B
    check_verdict(st, "steady", "returns to 0 B", "flat at 0 B")
    check_no_leak(p)


def test_allocation_held_forever_is_steady(tmp):
    procs, _ = trace(tmp, ["once"])
    p = procs["once"]
    st = site(p, "pattern_load_weights")
    check_verdict(st, "steady", "allocated once")
    check_eq(st["outstanding_bytes"], 64 * MIB, "weights")
    check_no_leak(p)


def test_slow_leak_under_heavy_churn_is_a_leak(tmp):
    procs, _ = trace(tmp, ["churnleak"])
    p = procs["churnleak"]
    st = site(p, "pattern_churn")
    check(st["frees"] >= 8 * 40, f"heavy churn at the site ({st['frees']} frees)")
    check_verdict(st, "leak", "no plateau")
    check_rate(st["growth_bytes_per_s"], MIB / 16 / STEP_S, "growth of the floor")
    check("pattern" not in st, f"most of it is freed: no step's output is kept: {st}")


def test_short_staircase_is_judged_by_its_steps(tmp):
    """Under 8 x --resolution of history: a staircase of many equal steps is a leak at
    once; a few steps are too few to tell."""
    procs, _ = trace(tmp, ["staircase"], run_ms=1000, resolution="250ms")
    st = site(procs["staircase"], "pattern_keep_output")
    check_verdict(st, "leak", "equal rises of 1.00 MiB")
    check_rate(st["growth_bytes_per_s"], MIB / STEP_S, "growth of the staircase")
    procs, _ = trace(tmp, ["staircase"], run_ms=1000, resolution="250ms",
                     wl_args=("--interval-ms", "300"))
    st = site(procs["staircase"], "pattern_keep_output")
    check_verdict(st, "unknown", "a verdict needs 2.0 s")


def test_leaks_ranked_first(tmp):
    """Every pattern in one process: the two leaks first, the fastest first, then the rest,
    none of them a leak."""
    procs, _ = trace(tmp, ["all"])
    p = procs["all"]
    ranked = [s["verdict"] for s in p["stacks"]]
    check(ranked[:2] == ["leak", "leak"] and "leak" not in ranked[2:],
          f"leaks first, and only those two: {summary(p)}")
    check_eq(p["stacks"][0]["stack_id"], site(p, "pattern_keep_output")["stack_id"],
             "the faster leak first")
    check_eq(p["stacks"][1]["stack_id"], site(p, "pattern_churn")["stack_id"],
             "the slower leak second")
    for name in ("pattern_pool_grow", "pattern_cache_block", "pattern_load_weights"):
        check_verdict(site(p, name), "steady")
    check_rate(p["device_growth_bytes_per_s"], (MIB + MIB / 16) / STEP_S,
               "growth of the process (both leaks)")


def test_nvml_capacity_and_memory_before_attach(tmp):
    """With NVML: what a process holds outside gpuleak's view, and when a leaking process
    fills its GPU at its rate."""
    libdir = build_fake_nvml(tmp)
    nvml_file = os.path.join(tmp, "nvml.txt")
    nvml_figures(tmp, nvml_file, dict(os.environ, LD_LIBRARY_PATH=libdir,
                                      FAKE_NVML_FILE=nvml_file))


def test_nvidia_smi_answers_when_nvml_crashes(tmp):
    """The same figures from the nvidia-smi command when loading NVML kills the process
    that loads it (as it may a static gpuleak): gpuleak is not that process, and says
    nothing wrong."""
    libdir = build_fake_nvml(tmp)
    nvml_file = os.path.join(tmp, "nvml.txt")
    tr = nvml_figures(tmp, nvml_file, dict(
        os.environ, LD_LIBRARY_PATH=libdir, FAKE_NVML_FILE=nvml_file, FAKE_NVML_CRASH="1",
        GPULEAK_NVIDIA_SMI=os.path.join(HERE, "fake_nvidia_smi")), "-v", "-v")
    check("NVML: the library crashed the process that loaded it" in tr.stderr(),
          f"the crash is seen and nvidia-smi asked: {tr.stderr()!r}")


def nvml_figures(tmp, nvml_file, env, *tracer_args):
    """Two processes, one steady with memory from before attach, one leaking; NVML (or
    what stands for it in env) says how much each holds and how much room is left."""
    free = 10 << 30
    wls = {p: Workload("wl_patterns", "--pattern", p, tmp=tmp) for p in ("once", "staircase")}
    for wl in wls.values():
        wl.wait_ready()
    # what NVML will say when gpuleak asks, at its report
    with open(nvml_file, "w") as f:
        f.write(f"device {80 << 30} {free} GPU-fake-0\n")
        f.write(f"proc 0 {wls['once'].pid} {64 * MIB + 500 * MIB}\n")
        f.write(f"proc 0 {wls['staircase'].pid} {1 * MIB}\n")
    tr = Tracer(["attach", "-i", "0", "--resolution", RESOLUTION, "-d", f"{RUN_MS}ms",
                 *tracer_args, *[str(wl.pid) for wl in wls.values()]], tmp, env=env)
    try:
        tr.wait_attached(count=2)
        for wl in wls.values():
            wl.go()
        check_eq(tr.wait(timeout=RUN_MS / 1000 + 20), 0, "gpuleak exit status")
    finally:
        for wl in wls.values():
            wl.kill(signal.SIGTERM)
            wl.wait()
    rep = tr.report()
    once = process(rep, wls["once"].pid)
    stairs = process(rep, wls["staircase"].pid)
    check_eq(once["device_bytes"], 64 * MIB, "device bytes of the held allocation")
    check_eq(once.get("pre_attach_bytes"), 500 * MIB, "memory NVML counts and gpuleak did not see")
    check_eq(once["projected_oom_s"], None, "no projection for a steady process")
    check_eq(stairs.get("pre_attach_bytes"), 0, "NVML's figure below what gpuleak saw")
    want = free / stairs["device_growth_bytes_per_s"]
    check(stairs["projected_oom_s"] is not None and
          abs(stairs["projected_oom_s"] - want) < 1e-3 * want,
          f"projected_oom_s {stairs['projected_oom_s']}, want free / growth = {want:.1f}")
    check(100 < want < 500, f"10 GiB at about 50 MiB/s: {want:.0f} s")
    with open(tr.out_path) as f:
        text = f.read()
    check("full in about" in text and "500.00 MiB of device memory not in these figures" in text,
          f"the text report tells both:\n{text}")
    return tr
