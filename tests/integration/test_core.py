# SPDX-License-Identifier: BSD-2-Clause
"""The core promise: every libcuda allocation of a traced process is accounted,
exactly, per process and per call site, against the CUDA driver stand-in's own
ground truth."""
import json
import os
import signal
import subprocess

import harness
from harness import (FAKECUDA, OUTPUT, ROOT, WORKLOADS, Tracer, Workload, attach_workload, check,
                     check_books, check_eq, check_sites, finish_attached, process,
                     run_gpuleak, site_bytes, wait_until)


def run_workload(tmp, name, *args, tracer_args=()):
    """gpuleak run -- workload: traced from its first call."""
    tr = Tracer(["run", "-i", "0", *tracer_args, "--", os.path.join(WORKLOADS, name),
                 "--no-wait", "--hold", *args], tmp)
    return tr


def test_every_family_attached(tmp):
    wl, tr = attach_workload(tmp, "wl_basic")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_eq(p["state"], "running", "state of a held process")
    check_books(rep, p, truth)
    check_sites(p, truth)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")
    check_eq(p["free_calls"], truth["free_calls"], "free_calls")


def test_every_family_run_mode(tmp):
    """gpuleak run holds the program until attached, then traces it from its first call.
    The pinned host buffer registered before the mark is not lost."""
    wl = Workload("wl_basic", tmp=tmp, wait=False)  # reference truth of a plain run
    base = wl.truth()
    wl.wait()
    truth_path = os.path.join(tmp, "run.truth.json")
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_basic"), "--no-wait",
                 "--truth", truth_path], tmp)
    check_eq(tr.wait(), 0, "gpuleak run exit status")
    rep = tr.report()
    import json
    truth = json.load(open(truth_path))
    p = process(rep, truth["pid"])
    check_eq(p["state"], "exited", "state")
    check_books(rep, p, truth)
    check_eq(truth["device_bytes"], base["device_bytes"], "same work in both runs")
    check("attached" in tr.stderr(), "run mode says it attached")


def test_bpf_programs_time_is_reported_while_the_kernel_keeps_it(tmp):
    """With the kernel's BPF statistics on, the report gives each program's runs and run
    time: call_enter and call_exit ran at least once per traced call; without them, no
    figure is made up."""
    def run():
        tr = Tracer(["run", "-i", "0", "--stacks", "none", "--",
                     os.path.join(WORKLOADS, "wl_basic"), "--no-wait"], tmp)
        check_eq(tr.wait(), 0, "gpuleak run exit status")
        return tr.report()["stats"]

    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        if f.read().strip() == "0":
            check("programs" not in run(), "no program times while the kernel keeps none")
    fd = harness.enable_bpf_stats()
    try:
        st = run()
    finally:
        os.close(fd)
    progs, calls = st.get("programs", {}), sum(st["calls"].values())
    check(calls > 10, f"the load made calls: {st['calls']}")
    for p in ("call_enter", "call_exit"):
        check(p in progs and progs[p]["runs"] >= calls and progs[p]["run_ns"] > 0,
              f"{p} timed at every call ({calls} calls): {progs}")
    check(st["self_cpu_ns"] > 0, f"gpuleak's own CPU: {st.get('self_cpu_ns')}")


def test_the_verifier_walks_each_program_in_few_instructions(tmp):
    """Loading the programs is most of an attach's time, and the kernel refuses a program
    whose verification walks a million instructions. With DWARF stacks and Python frames
    (the default), no program may take more than 150,000: a walk whose loop states
    multiply (each count of a bpf_loop() step a state of its own, each going on through
    the stack copy) walked 491,488 for torch_malloc and took 2 s of every start."""
    wl, tr = attach_workload(tmp, "wl_basic")
    progs = harness.bpf_objects(tr.proc.pid)["progs"]
    names = {}
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, timeout=20)
    for p in json.loads(out.stdout or b"[]"):
        names[p["id"]] = p.get("name", "?")
    finish_attached(wl, tr)
    check(len(progs) >= 8, f"the tracer holds its programs: {progs}")
    walked = {names.get(i, str(i)): n for i, n in progs.items()}
    check(all(n >= 0 for n in walked.values()), f"the kernel says what it verified: {walked}")
    check(walked.get("call_enter", 0) > 1000 and walked.get("torch_malloc", 0) > 1000,
          f"the stack-taking programs are among them: {walked}")
    over = {k: n for k, n in walked.items() if n > 150_000}
    check(not over, f"programs whose verification walked over 150,000 instructions: {over}")


def test_vmm_handles_mappings_reservations(tmp):
    wl, tr = attach_workload(tmp, "wl_vmm")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    check(truth["reserved_bytes"] > 0, "the workload reserves address space")
    check_eq(p["address_space_bytes"], truth["reserved_bytes"], "address space reserved")
    check(all(s["memory"] != "address_space" for s in p["stacks"]),
          "address space is never listed as memory")


def test_eight_threads_exact(tmp):
    wl, tr = attach_workload(tmp, "wl_threads", "--threads", "8", "--iters", "3000",
                             tracer_args=harness.SAN_RINGBUF)
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check(truth["alloc_calls"] >= 8 * 3000, f"the threads made {truth['alloc_calls']} calls")
    check_books(rep, p, truth)
    check_sites(p, truth)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")
    check_eq(p["free_calls"], truth["free_calls"], "free_calls")
    check_eq(rep["stats"]["lost_call_records"] + rep["stats"]["lost_stack_records"], 0,
             "ring-buffer records lost")


def test_a_process_not_attached_is_not_counted(tmp):
    """Another process calls the same libcuda through the same probes while the target
    runs: none of its calls is counted or booked, though its threads enter the probes
    over and over (a thread is known to be a target's from its first call on)."""
    other = Workload("wl_threads", "--threads", "2", "--iters", "3000", tmp=tmp, hold=True)
    other.wait_ready()
    wl, tr = attach_workload(tmp, "wl_threads", "--threads", "2", "--iters", "3000")
    other.go()
    other_truth = other.truth()
    truth, rep = finish_attached(wl, tr)
    other.release()
    other.wait()
    check(other_truth["alloc_calls"] >= 2 * 3000,
          f"the other process made {other_truth['alloc_calls']} calls beside the target")
    check_eq([q["pid"] for q in rep["processes"]], [wl.pid], "the processes in the report")
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    calls = rep["stats"]["calls"]
    allocs = calls.get("cuMemAlloc_v2", 0) + calls.get("cuMemAllocAsync_ptsz", 0)
    frees = calls.get("cuMemFree_v2", 0) + calls.get("cuMemFreeAsync_ptsz", 0)
    check_eq(allocs, truth["alloc_calls"], "allocating calls counted (the target's alone)")
    check_eq(frees, truth["free_calls"], "freeing calls counted (the target's alone)")


def test_failures_and_bad_frees(tmp):
    """OOM and invalid-value failures are failures, not allocations; double frees and
    frees of unknown pointers (rejected by the driver) change nothing."""
    wl, tr = attach_workload(tmp, "wl_oom")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["oom_failures"], truth["oom_failures"], "oom_failures")
    check_eq(p["failures"], truth["oom_failures"] + truth["other_failures"], "failures")
    check_eq(p["failed_frees"], truth["free_failures"], "failed frees")
    ooms = [f for f in p["failures_list"] if f["error"] == "CUDA_ERROR_OUT_OF_MEMORY"]
    check(ooms, "OOM failures are listed")
    check(ooms[0]["frames"] and ooms[0]["frames"][0]["function"].startswith("cuMem"),
          f"an OOM keeps the failing call's stack: {ooms[0]['frames'][:2]}")
    check("CUDA_ERROR_OUT_OF_MEMORY" in tr.stderr(), "an OOM is reported on stderr at once")
    dev_oom = [f for f in ooms if f["memory"] == "device"]
    check(dev_oom and dev_oom[0]["top_holders"], "a device OOM lists the top holders")
    top = dev_oom[0]["top_holders"]
    check_eq(sum(h["outstanding_bytes"] for h in top), dev_oom[0]["held_device_bytes"],
             "the holders account for the device memory held at the failure")
    check(all(any(f.get("function") == "oom_site_fill" for f in h["frames"]) for h in top),
          "each holder is named by its stack")
    check("the most" in tr.stderr() and "oom_site_fill" in tr.stderr(),
          f"the stderr line names the largest holder: {tr.stderr()!r}")


def test_memory_from_before_attach(tmp):
    """Frees of memory allocated before attach are counted as unmatched, never as
    negative memory."""
    wl, tr = attach_workload(tmp, "wl_preattach")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check(truth["unmatched_frees"] > 0, "the workload frees pre-attach memory")
    check_books(rep, p, truth)
    check_eq(rep["unmatched_frees"], truth["unmatched_frees"], "top-level unmatched_frees")
    check_eq(p["bpf"]["unmatched_frees"], truth["unmatched_frees"], "BPF's unmatched_frees")


def test_context_teardown(tmp):
    wl, tr = attach_workload(tmp, "wl_ctx")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check(truth["ctx_dropped_bytes"] > 0, "the workload tears down contexts")
    check_books(rep, p, truth)
    check_eq(p["context_dropped_bytes"], truth["ctx_dropped_bytes"], "context_dropped_bytes")
    # per GPU: the context's device, or the location in cuMemCreate's properties
    devs = {d["device"]: d["device_bytes"] for d in p["devices"]}
    sites = truth["sites"]
    check_eq(devs.get(1), sites["ctx_site_vmm"] + sites["ctx_site_v3"],
             "device 1: the VMM handle placed there and the cuCtxCreate_v3 context's allocation")
    check_eq(devs.get(0), sites["ctx_site_after_reset"] + sites["ctx_site_v4"], "device 0")
    check_eq(sum(devs.values()), p["device_bytes"], "devices add up to device_bytes")


def test_imported_memory_not_charged(tmp):
    wl, tr = attach_workload(tmp, "wl_ipc")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)


def test_fork_child_has_own_books(tmp):
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_fork"), "--no-wait",
                 "--truth", os.path.join(tmp, "fork.json")], tmp)
    check_eq(tr.wait(), 0, "gpuleak exit status")
    rep = tr.report()
    import json
    parent = json.load(open(os.path.join(tmp, "fork.json")))
    child = json.load(open(os.path.join(tmp, "fork.json.child")))
    check_books(rep, process(rep, parent["pid"]), parent)
    check_books(rep, process(rep, child["pid"]), child)


def test_target_killed_with_outstanding_memory(tmp):
    wl = Workload("wl_leak", "--iters", "0", "--interval-ms", "20", tmp=tmp)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    wait_until(lambda: "leak" in open(tr.err_path).read() or True, 1, "")
    import time
    time.sleep(0.5)
    wl.kill(signal.SIGKILL)
    wl.wait()
    check_eq(tr.wait(timeout=15), 0, "gpuleak exits by itself when its target dies")
    rep = tr.report()
    p = process(rep, wl.pid)
    check_eq(p["state"], "exited", "state")
    check(p["device_bytes"] > 0, "the books at exit show what the process held")
    check(p["consistent"], f"books agree with BPF's at exit: {p['bpf']}")
    check(site_bytes(p, "leak_site") > 0 or any(
        "leak" in (f.get("function") or "") for s in p["stacks"] for f in s["frames"]),
        "the leaking site is named")


def test_errors_have_status_and_one_line(tmp):
    cases = [
        (["attach", "4194303"], 1, "no such process"),
        (["attach", "-i", "x", "1"], 2, "invalid --interval"),
        (["attach", "--top", "-1", "1"], 2, "invalid --top"),
        (["attach", "--ringbuf-size", "3000", "1"], 2, "power of two"),
        (["attach", "--ringbuf-size", "99999999999G", "1"], 2, "invalid --ringbuf-size"),
        (["attach", "--stacks", "lbr", "1"], 2, "invalid --stacks"),
        (["attach"], 2, "needs PIDs"),
        (["attach", "12ab"], 2, "invalid PID"),
        (["frobnicate"], 2, "unknown subcommand"),
        (["run"], 2, "needs a command"),
        (["run", "--libcuda", "/bin/true", "--", "/bin/true"], 1, "/bin/true"),
    ]
    for args, status, text in cases:
        rc, out, err = run_gpuleak(args)
        check_eq(rc, status, f"exit status of gpuleak {' '.join(args)}")
        check(text in err, f"gpuleak {' '.join(args)} says {text!r}; it said {err!r}")
        check(err.count("\n") <= 2, f"one clear line, not {err!r}")


def test_process_without_libcuda_times_out(tmp):
    import subprocess
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        rc, out, err = run_gpuleak(["attach", "--wait", "1", str(sleeper.pid)], timeout=20)
    finally:
        sleeper.kill()
        sleeper.wait()
    check_eq(rc, 1, "exit status")
    check("did not load libcuda within 1 s" in err, f"message: {err!r}")


def test_missing_symbols_are_named(tmp):
    """A library lacking expected functions: what exists is attached, the rest named."""
    lib = os.path.join(os.path.dirname(FAKECUDA), "..", "partial", "libcuda.so.1")
    check(os.path.exists(lib), f"{lib} is built by the test makefile")
    rc, out, err = run_gpuleak(["run", "--libcuda", lib, "--", "/bin/true"])
    check_eq(rc, 0, "exit status")
    check("lacks cuMemFree_v2" in err, f"the missing required function is named: {err!r}")
    check("attached: 1 functions" in err, f"what exists is attached: {err!r}")


def test_without_privileges(tmp):
    """Without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN: exit status 4 and what is missing."""
    import shutil
    import subprocess
    setpriv = shutil.which("setpriv")
    check(setpriv, "setpriv (util-linux) is installed")
    p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", "--", os.path.abspath(run_gpuleak.__globals__["GPULEAK"]),
                        "attach", "1"], capture_output=True, timeout=30)
    err = p.stderr.decode()
    check_eq(p.returncode, 4, f"exit status without privileges ({err!r})")
    check("CAP_BPF" in err or "CAP_SYS_ADMIN" in err, f"names the capability: {err!r}")


def test_partial_privileges_name_what_is_missing(tmp):
    """BPF and perf capabilities but not CAP_SYS_PTRACE, as another user: the target's
    maps cannot be read; gpuleak says which capability is missing and exits with 4."""
    import shutil
    import subprocess
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    caps = "-all,+bpf,+perfmon"
    p = subprocess.run([shutil.which("setpriv"), "--reuid=65534", "--regid=65534",
                        "--clear-groups", f"--inh-caps={caps}", f"--ambient-caps={caps}",
                        "--", os.path.abspath(run_gpuleak.__globals__["GPULEAK"]), "attach",
                        "-d", "1", str(wl.pid)], capture_output=True, timeout=30)
    err = p.stderr.decode()
    check_eq(p.returncode, 4, f"exit status without CAP_SYS_PTRACE ({err!r})")
    check("CAP_SYS_PTRACE" in err, f"names the capability: {err!r}")
    wl.release()
    wl.wait()


# Three frames of N bytes each, one calling the next: over the verifier's 512 bytes
# combined at N = 200 (3 x 208), within at N = 120 (3 x 128). A uprobe program, as
# gpuleak's are (tracepoint programs may get a private stack, with a looser bound).
STACK_CHAIN_C = r"""
#define SEC(name) __attribute__((section(name), used))
#define NOINLINE __attribute__((noinline))
static NOINLINE int fill(volatile char *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		b[i] = i;
	return b[n / 2];
}
static NOINLINE int leaf(int x)
{
	volatile char buf[N];
	fill(buf, N);
	return buf[x & 63];
}
static NOINLINE int mid(int x)
{
	volatile char buf[N];
	fill(buf, N);
	return leaf(buf[x & 63]);
}
SEC("uprobe") int chain_prog(void *ctx)
{
	volatile char buf[N];
	fill(buf, N);
	return mid(buf[3]);
}
char LICENSE[] SEC("license") = "GPL";
"""


def test_bpf_stack_bound_agrees_with_the_kernel(tmp):
    """scripts/check-bpf-stack (run on every build of the BPF object) passes gpuleak's
    programs, and on a chain of three frames says what the kernel's verifier says: over
    512 bytes refused by both, within loaded by both."""
    check_stack = os.path.join(ROOT, "scripts", "check-bpf-stack")
    p = subprocess.run([check_stack, "-v", os.path.join(OUTPUT, "gpuleak.bpf.o")],
                       capture_output=True, text=True)
    check_eq(p.returncode, 0, f"gpuleak's programs within the bound: {p.stderr}")
    check("call_exit (" in p.stdout and "torch_malloc (" in p.stdout,
          f"every program measured:\n{p.stdout}")
    src = os.path.join(tmp, "chain.bpf.c")
    with open(src, "w") as f:
        f.write(STACK_CHAIN_C)
    for n, fits in ((200, False), (120, True)):
        obj = os.path.join(tmp, f"chain{n}.o")
        subprocess.run(["clang", "-g", "-O2", "-target", "bpf", f"-DN={n}", "-c", src, "-o",
                        obj], check=True)
        p = subprocess.run([check_stack, obj], capture_output=True, text=True)
        check_eq(p.returncode, 0 if fits else 1, f"N={n}: check-bpf-stack ({p.stderr})")
        if not fits:
            check("chain_prog needs 624 bytes" in p.stderr and "mid (200) -> leaf (200)" in
                  p.stderr, f"the chain named with its frames: {p.stderr}")
        pin = f"/sys/fs/bpf/gpuleak-test-chain-{os.getpid()}-{n}"
        k = subprocess.run(["bpftool", "prog", "loadall", obj, pin], capture_output=True,
                           text=True)
        subprocess.run(["rm", "-rf", pin])
        check_eq(k.returncode == 0, fits, f"N={n}: the kernel loads it: {k.stderr[-600:]}")
        if not fits:
            check("stack size" in k.stderr, f"the kernel refuses it for its stack: "
                  f"{k.stderr[-600:]}")
