# SPDX-License-Identifier: BSD-2-Clause
"""-a: every process that uses CUDA, including processes that start after gpuleak."""
import json
import os
import subprocess
import time

from harness import (FAKECUDA, WORKLOADS, Tracer, Workload, check, check_books, check_eq, process,
                     wait_until)


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
    truth = wl.truth()
    tr.stop()
    wl.release()
    wl.wait()
    rep = tr.report()
    check_books(rep, process(rep, wl.pid), truth)
