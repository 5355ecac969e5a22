# SPDX-License-Identifier: BSD-2-Clause
"""Libraries mapped after gpuleak started: BPF sees the mmap of a libcuda or libc10_cuda
file from the kernel side, stops the process there until the probes are in, and no
probe is placed in any other process (the dynamic loader is left alone)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import (FAKECUDA, WORKLOADS, Agent, Tracer, Workload, check, check_books,
                     check_eq, free_port, process, wait_until)


def _late_copy(tmp):
    """A private copy of the stand-in: a file no tracer has seen, so it must be held."""
    d = os.path.join(tmp, "late")
    os.makedirs(d)
    lib = os.path.join(d, "libcuda.so.1")
    shutil.copy(FAKECUDA, lib)
    return lib


def _waiting_for_late_load(tmp, tracer_args, *wl_args, hold=False):
    """wl_dlopen about to load a copy of the stand-in no tracer has seen (_late_copy), and
    attach -i 0 TRACER_ARGS PID waiting for it to load libcuda; returns both."""
    wl = Workload("wl_dlopen", "--lib", _late_copy(tmp), "--late-ms", "0", *wl_args, tmp=tmp,
                  hold=hold)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", *tracer_args, str(wl.pid)], tmp)
    wait_until(lambda: "has not loaded libcuda yet" in tr.stderr(), 20, "gpuleak to wait")
    return wl, tr


def _held_late_load(tmp, tracer_args, *wl_args):
    """The same, the load then made: the truth, the tracer once it has exited with the
    target, its report and the target's figures in it."""
    wl, tr = _waiting_for_late_load(tmp, tracer_args, *wl_args)
    wl.go()
    truth = wl.truth()
    check_eq(tr.wait(30), 0, "gpuleak exit status (the target exited)")
    rep = tr.report()
    return wl, truth, tr, rep, process(rep, wl.pid)


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_attach_then_dlopen_and_call_at_once(tmp):
    """attach PID before the process loads libcuda; it dlopens and allocates at once."""
    wl, truth, tr, rep, p = _held_late_load(tmp, ["-v"])
    check_books(rep, p, truth)
    check(rep["complete"], "complete")
    check(f"PID {wl.pid} was held" in tr.stderr(), f"the process was held: {tr.stderr()}")


def test_hold_at_a_mapping_that_fails(tmp):
    """The first mmap of the library fails inside the kernel (after the hold); the process
    loads it for real right after and allocates at once: that load is held too."""
    wl, truth, tr, rep, p = _held_late_load(tmp, ["-vv"], "--failed-map", "1")
    err = tr.stderr()
    check("which is not in /proc/" in err, f"the failed mapping was held and released:\n{err}")
    check(f"PID {wl.pid} was held" in err, f"the real load was held:\n{err}")
    check_books(rep, p, truth)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "every allocation seen")
    check_eq(p["unheld_mappings"], 0, "no mapping went unheld")
    check(rep["complete"], f"complete: {rep['incomplete_why']}")


def test_process_that_cannot_be_held_is_named(tmp):
    """--max-held 1, and the tracer busy (stopped) while two processes map libraries it has
    not attached: the first is held, the second cannot be and runs on; its report says so."""
    wls = []
    for name in ("a", "b"):
        lib = os.path.join(tmp, name, "libcuda.so.1")
        os.makedirs(os.path.dirname(lib))
        shutil.copy(FAKECUDA, lib)
        wls.append(Workload("wl_dlopen", "--lib", lib, "--late-ms", "0", tmp=tmp))
    a, b = wls
    for wl in wls:
        wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--max-held", "1", str(a.pid), str(b.pid)], tmp)
    wait_until(lambda: tr.stderr().count("has not loaded libcuda yet") == 2, 20,
               "gpuleak to wait for both")
    tr.proc.send_signal(signal.SIGSTOP)
    try:
        a.go()
        wait_until(lambda: _state(a.pid) == "T", 10, "the first process to be held")
        b.go()
        truth_b = b.truth()  # not held: it runs to its end while the tracer is stopped
    finally:
        tr.proc.send_signal(signal.SIGCONT)
    truth_a = a.truth()
    check_eq(tr.wait(30), 0, "gpuleak exit status (the targets exited)")
    rep = tr.report()
    pa, pb = process(rep, a.pid), process(rep, b.pid)
    check_books(rep, pa, truth_a)
    check_eq(pa["unheld_mappings"], 0, "the held process")
    check(pb["unheld_mappings"] >= 1, f"the process that could not be held: {pb}")
    check(truth_b["alloc_calls"] > 0, "it made calls")
    check_eq(rep["complete"], False, "the report is not complete")
    check(f"PID {b.pid}" in rep["incomplete_why"] and "could not be held" in rep["incomplete_why"],
          rep["incomplete_why"])
    check(f"PID {b.pid} (wl_dlopen) maps libcuda.so.1, not attached yet, and could not be held"
          in tr.stderr(), tr.stderr())
    check("could not be held" in tr.stdout(), "the text report says so")


def test_process_continued_before_its_probes_is_named(tmp):
    """A held process continued by someone else (another tracer's release, a SIGCONT)
    while gpuleak is busy (stopped): it ran before its probes were in, so its first calls
    are missing; the report must say so instead of calling itself complete."""
    wl, tr = _waiting_for_late_load(tmp, [], hold=True)
    tr.proc.send_signal(signal.SIGSTOP)
    try:
        wl.go()
        wait_until(lambda: _state(wl.pid) == "T", 10, "the process to be held")
        os.kill(wl.pid, signal.SIGCONT)
        truth = wl.truth()  # it runs its calls while the tracer is stopped
    finally:
        tr.proc.send_signal(signal.SIGCONT)
    check(truth["alloc_calls"] > 0, "it made calls")
    wait_until(lambda: "ran on before its probes were in" in tr.stderr() or
               tr.proc.poll() is not None, 20, "gpuleak to find it continued")
    wl.release()
    check_eq(tr.wait(30), 0, "gpuleak exit status (the target exited)")
    rep = tr.report()
    p = process(rep, wl.pid)
    check(p["unheld_mappings"] >= 1, f"the mapping counted as not held: {p}")
    check_eq(rep["complete"], False, "the report is not complete")
    check(f"PID {wl.pid}" in rep["incomplete_why"], rep["incomplete_why"])
    check(f"PID {wl.pid} (wl_dlopen) maps libcuda.so.1 and was held, but ran on before its "
          "probes were in" in tr.stderr(), tr.stderr())


def _run_wrapped(tmp, script, truth_path):
    tr = Tracer(["run", "-i", "0", "--", "sh", "-c", script], tmp)
    check_eq(tr.wait(60), 0, "gpuleak run exit status")
    with open(truth_path) as f:
        truth = json.load(f)
    rep = tr.report()
    return truth, rep


def test_run_shell_wrapper_that_execs(tmp):
    """run -- sh -c 'exec PROGRAM': the libcuda comes with PROGRAM, not with sh."""
    truth_path = os.path.join(tmp, "t.json")
    wl = os.path.join(WORKLOADS, "wl_basic")
    truth, rep = _run_wrapped(tmp, f"exec {wl} --no-wait --truth {truth_path}", truth_path)
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check(rep["complete"], "complete")


def test_run_shell_wrapper_that_waits_then_forks(tmp):
    """run -- sh -c 'sleep 0.2; PROGRAM; true': PROGRAM is a forked child of sh."""
    truth_path = os.path.join(tmp, "t.json")
    wl = os.path.join(WORKLOADS, "wl_basic")
    truth, rep = _run_wrapped(tmp, f"sleep 0.2; {wl} --no-wait --truth {truth_path}; true",
                              truth_path)
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check(rep["complete"], "complete")


def test_all_started_while_nothing_maps_libcuda(tmp):
    """attach -a with no libcuda attached up front: short processes started right away
    are exact from their first call, and end as exited."""
    lib = _late_copy(tmp)
    tr = Tracer(["attach", "-a", "-i", "0"], tmp)
    wait_until(lambda: "tracing every process" in tr.stderr() or tr.proc.poll() is not None,
               20, "gpuleak -a to start")
    truths = []
    for i in range(6):
        path = os.path.join(tmp, f"t{i}.json")
        subprocess.run([os.path.join(WORKLOADS, "wl_dlopen"), "--lib", lib, "--no-wait",
                        "--truth", path], check=True, timeout=30, stdout=subprocess.DEVNULL)
        with open(path) as f:
            truths.append(json.load(f))
    time.sleep(1.5)
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    for truth in truths:
        p = process(rep, truth["pid"])
        check_books(rep, p, truth)
        check_eq(p["state"], "exited", f"state of PID {truth['pid']}")
    check(f"functions in {lib}" in tr.stderr(), f"the copy was attached: {tr.stderr()}")


def test_torch_probes_in_before_run_child_runs(tmp):
    """run -- PROGRAM linking a libc10_cuda with PyTorch's probes: every tensor block."""
    truth_path = os.path.join(tmp, "t.json")
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_torch"), "--no-wait",
                 "--truth", truth_path], tmp)
    check_eq(tr.wait(60), 0, "gpuleak run exit status")
    with open(truth_path) as f:
        truth = json.load(f)
    rep = tr.report()
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check(truth["torch_blocks"] > 0, "the workload allocates tensor blocks")
    check_eq(p["torch_blocks"], truth["torch_blocks"], "torch_blocks")
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "torch_allocated_bytes")
    check(rep["complete"], "complete")


def _loader_probe_holders():
    """PIDs holding a uprobe link on a dynamic loader (ld-linux*), from /proc/*/fdinfo."""
    holders = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf_link":
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    info = f.read()
            except OSError:
                continue
            if "uprobe" in info and "/ld-linux" in info:
                holders.add(int(pid))
    return holders


def _tracer_uprobe_paths(pid):
    """The files the tracer's uprobe links are on, from /proc/PID/fdinfo."""
    paths = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf_link":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("path:"):
                        paths.add(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return paths


def _check_leaves_host_alone(tracer_pid):
    """The tracer's uprobes are on CUDA libraries only; and valgrind -q sh -c 'exit 7',
    which a planted int3 kills with SIGTRAP, exits 7. Its status counts only from a run
    during which no other process on the host held a probe in the loader (tracers of an
    older build do); without such a window in 20 s, the first check stands alone."""
    paths = _tracer_uprobe_paths(tracer_pid)
    check(all(os.path.basename(p).startswith(("libcuda.so", "libc10_cuda.so")) for p in paths),
          f"gpuleak's uprobes are on CUDA libraries only: {sorted(paths)}")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if _loader_probe_holders():
            time.sleep(0.2)
            continue
        p = subprocess.Popen(["valgrind", "-q", "sh", "-c", "exit 7"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        others = set()
        while p.poll() is None:
            others |= _loader_probe_holders()
        _, err = p.communicate(timeout=120)
        others |= _loader_probe_holders()
        if not others:
            check_eq(p.returncode, 7, f"valgrind's exit status ({err.decode(errors='replace')})")
            return
    print(f"note: other processes ({sorted(_loader_probe_holders())}) kept uprobes in the "
          "dynamic loader for 20 s: valgrind's status not checked", file=sys.stderr)


def test_host_wide_discovery_leaves_other_processes_alone(tmp):
    """attach -a and serve place no breakpoint in processes that never load CUDA."""
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", FAKECUDA], tmp)
    tr.wait_attached()
    _check_leaves_host_alone(tr.proc.pid)
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{free_port()}"])
    try:
        agent.wait_said("serving http://", "gpuleak serve to listen")
        _check_leaves_host_alone(agent.proc.pid)
    finally:
        check(agent.stop() != "hung", "serve stops on SIGTERM")


def test_held_process_released_when_the_tracer_is_killed(tmp):
    """A tracer that cannot run (stopped) while BPF holds its target, then is killed: the
    target does not stay stopped."""
    wl, tr = _waiting_for_late_load(tmp, [])
    os.kill(tr.proc.pid, signal.SIGSTOP)
    try:
        wl.go()
        wait_until(lambda: _state(wl.pid) == "T", 10, "BPF to hold the workload")
        time.sleep(0.3)
        check_eq(_state(wl.pid), "T", "the workload stays held while the tracer cannot run")
    finally:
        tr.proc.kill()
        tr.proc.wait(10)
    wait_until(lambda: _state(wl.pid) != "T", 10, "the guard to release the workload")
    check_eq(wl.wait(20), 0, "the workload's exit status once released")


def test_serve_releases_a_held_process_of_another_user(tmp):
    """serve gives up capabilities after attaching, but keeps the one that releases a
    process of another user (in another session) held at a library's mapping: that
    process runs to its end."""
    shared = os.path.join(tmp, "shared")
    os.makedirs(os.path.join(shared, "lib"))
    for d in (tmp, shared, os.path.join(shared, "lib")):
        os.chmod(d, 0o755)
    os.chmod(shared, 0o777)
    lib = os.path.join(shared, "lib", "libcuda.so.1")
    shutil.copy(FAKECUDA, lib)
    os.chmod(lib, 0o755)
    # the other user may not reach the checkout (a clone under a 0700 temporary folder)
    wl = os.path.join(shared, "wl_dlopen")
    shutil.copy(os.path.join(WORKLOADS, "wl_dlopen"), wl)
    os.chmod(wl, 0o755)
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{free_port()}"])
    try:
        agent.wait_said("capabilities kept", "gpuleak serve to give up capabilities")
        truth_path = os.path.join(shared, "t.json")

        def as_nobody():
            os.setgid(65534)
            os.setuid(65534)
        p = subprocess.run([wl, "--lib", lib, "--no-wait",
                            "--truth", truth_path], preexec_fn=as_nobody, timeout=30,
                           capture_output=True, start_new_session=True)
        check_eq(p.returncode, 0, f"the other user's workload ({p.stderr!r})")
        wait_until(lambda: f"functions in {lib}" in agent.stderr(), 10,
                   "serve to attach the copy")
    finally:
        check(agent.stop() != "hung", "serve stops on SIGTERM")
