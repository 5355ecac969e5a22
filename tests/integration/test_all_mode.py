# SPDX-License-Identifier: BSD-2-Clause
"""-a: every process that uses CUDA, including processes that start after gpuleak."""
import json
import os
import subprocess
import time

from harness import (FAKECUDA, WORKLOADS, Tracer, Workload, check, check_books, check_eq, process,
                     stop_attached, wait_until)


def test_all_traces_processes_started_later(tmp):
    """With the library attached up front, a process started later is exact from its
    first call."""
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", FAKECUDA], tmp)
    tr.wait_attached()
    truth_path = os.path.join(tmp, "basic.json")
    subprocess.run([os.path.join(WORKLOADS, "wl_basic"), "--no-wait", "--truth", truth_path],
                   check=True, timeout=30, stdout=subprocess.DEVNULL)
    truth = json.load(open(truth_path))
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    p = process(rep, truth["pid"])
    check_eq(p["state"], "exited", "state")
    check_books(rep, p, truth)


def test_all_keeps_the_parent_of_ranks_gone_before_it_reads_them(tmp):
    """-a follows no fork: a process's parent is read from /proc at its first record. A
    gpuleak stopped while a launcher's two ranks run and are reaped reads their records
    after: the parent each mapping of libcuda named (BPF's) groups them all the same."""
    import signal
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", FAKECUDA], tmp)
    tr.wait_attached()
    truth_path = os.path.join(tmp, "ranks.json")
    os.kill(tr.proc.pid, signal.SIGSTOP)
    try:
        subprocess.run([os.path.join(WORKLOADS, "wl_ranks"), "--no-wait", "--truth", truth_path],
                       check=True, timeout=60, stdout=subprocess.DEVNULL)
    finally:
        os.kill(tr.proc.pid, signal.SIGCONT)
    launcher = json.load(open(truth_path))["pid"]
    ranks = [json.load(open(f"{truth_path}.rank{r}"))["pid"] for r in range(2)]
    for pid in ranks:
        check(not os.path.exists(f"/proc/{pid}"), f"rank {pid} was reaped before the read")
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    for pid in ranks:
        check_eq(process(rep, pid)["ppid"], launcher, f"PID {pid}'s parent")
    jobs = [j for j in rep["jobs"] if j["job"] == launcher]
    check_eq(len(jobs), 1, f"one job of the launcher: {rep['jobs']}")


def test_all_finds_a_library_mapped_later(tmp):
    """No library attached at start: BPF sees the process map libcuda and gpuleak attaches
    before the workload allocates."""
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", "/nonexistent/libcuda.so.1"], tmp)
    wait = tr.wait(timeout=10)
    check_eq(wait, 1, "a --libcuda that does not exist is an error")
    tr = Tracer(["attach", "-a", "-i", "0"], tmp)
    lib = os.path.realpath(FAKECUDA)
    time.sleep(0.5)
    check(f"functions in {lib}" not in tr.stderr(), "nothing maps the stand-in yet")
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    wait_until(lambda: f"functions in {lib}" in tr.stderr(), 5, "gpuleak to attach the stand-in")
    wl.go()
    truth = stop_attached(wl, tr)
    rep = tr.report()
    check_books(rep, process(rep, wl.pid), truth)


def test_all_caps_the_processes_it_keeps(tmp):
    """attach -a --max-procs 2, then more CUDA processes than that: the books keep two, and
    the report names the cap with what it left out."""
    cap, n = 2, 4
    tr = Tracer(["attach", "-a", "-i", "0", "--max-procs", str(cap), "--libcuda", FAKECUDA], tmp)
    tr.wait_attached()
    pids = []
    for i in range(n):
        truth_path = os.path.join(tmp, f"basic{i}.json")
        subprocess.run([os.path.join(WORKLOADS, "wl_basic"), "--no-wait", "--truth", truth_path],
                       check=True, timeout=30, stdout=subprocess.DEVNULL)
        with open(truth_path) as f:
            pids.append(json.load(f)["pid"])
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    caps = rep["caps"]["max_procs"]
    check_eq(caps["limit"], cap, "the cap in force")
    check(caps["reached"] and caps["refused_records"] > 0, f"the cap is reported reached: {caps}")
    check(len(rep["processes"]) <= cap, f"{len(rep['processes'])} processes in the books")
    missing = [pid for pid in pids if pid not in {p["pid"] for p in rep["processes"]}]
    check(len(missing) >= n - cap, f"processes past the cap are left out: {missing}")
    check_eq(rep["complete"], False, "the report is not complete")
    check(f"--max-procs {cap}" in rep["incomplete_why"], rep["incomplete_why"])
    check(f"--max-procs {cap}" in tr.stderr(), f"stderr names the cap:\n{tr.stderr()}")
