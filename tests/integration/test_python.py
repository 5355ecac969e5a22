# SPDX-License-Identifier: BSD-2-Clause
"""Python frames: a Python program calling the CUDA driver stand-in through ctypes, from the
main thread with the GIL released (CDLL) and held (PyDLL), from a second thread, from a
callback that C code makes into Python, and deep in a recursion, shows each call's Python
functions and exact lines, innermost first, in gpuleak's JSON.

The interpreter is GPULEAK_TEST_PYTHON, else /usr/bin/python3 (make test-python-versions
runs these tests under every pyenv interpreter present)."""
import os
import subprocess
import time

from harness import (FAKECUDA, ROOT, Tracer, TestFailure, check, check_books, check_eq,
                     process, wait_until, _readline)

PYTHON = os.environ.get("GPULEAK_TEST_PYTHON", "/usr/bin/python3")
SCRIPT = os.path.join(ROOT, "tests", "workloads", "py_stacks.py")
MAX_PY_FRAMES = 64


class PyWorkload:
    """tests/workloads/py_stacks.py under PYTHON, speaking the protocol of wl.h."""

    def __init__(self, tmp, *args):
        self.truth_path = os.path.join(tmp, f"py.{time.monotonic_ns()}.truth.json")
        argv = [PYTHON, SCRIPT, "--lib", FAKECUDA, "--truth", self.truth_path, "--hold", *args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.pid = self.proc.pid

    def wait_ready(self):
        line = _readline(self.proc.stdout, 20, "py_stacks.py to say ready")
        check(line == f"ready {self.pid}", f"py_stacks.py said {line!r}")

    def go(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def truth(self):
        import json
        wait_until(lambda: os.path.exists(self.truth_path) or self.proc.poll() is not None,
                   30, "py_stacks.py's ground truth")
        if not os.path.exists(self.truth_path):
            raise TestFailure(f"py_stacks.py exited with {self.proc.returncode}: "
                              f"{self.proc.stderr.read().decode(errors='replace')}")
        with open(self.truth_path) as f:
            return json.load(f)

    def finish(self):
        try:
            self.proc.stdin.write(b"exit\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        return self.proc.wait(30)


def traced_run(tmp, *tracer_args, wl_args=()):
    wl = PyWorkload(tmp, *wl_args)
    try:
        wl.wait_ready()
        tr = Tracer(["attach", "-i", "0", *tracer_args, str(wl.pid)], tmp)
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        tr.stop()
    finally:
        rc = wl.finish()
    check_eq(rc, 0, "py_stacks.py exit status")
    check_eq(tr.returncode, 0, "gpuleak exit status")
    return wl, truth, tr


def py_frames(stack):
    return [[f.get("function"), f.get("file"), f.get("line")]
            for f in stack["frames"] if f["kind"] == "python"]


def check_site(p, name, site):
    want = site["frames"][:MAX_PY_FRAMES]
    stacks = [s for s in p["stacks"] if py_frames(s) == want]
    got = sum(s["outstanding_bytes"] for s in stacks)
    if got != site["bytes"]:
        seen = "\n  ".join(str(py_frames(s)[:6]) for s in p["stacks"])
        raise TestFailure(f"site {name}: {got} bytes under Python stack {want[:6]}..., want "
                          f"{site['bytes']}; stacks seen:\n  {seen}")
    for s in stacks:
        check_eq(s["frames"][0].get("function"), "cuMemAlloc_v2",
                 f"site {name}: the driver call is the innermost frame")
        kinds = [f["kind"] for f in s["frames"]]
        check(kinds.index("python") > 0, f"site {name}: native frames come first: {kinds}")


def test_python_frames_every_site(tmp):
    wl, truth, tr = traced_run(tmp)
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    sites = truth["py_sites"]
    check_eq(sorted(sites), sorted(["main", "thread", "gil_held", "callback", "deep"]),
             "sites the workload used")
    for name, site in sites.items():
        check_site(p, name, site)
    check("Python frames enabled" in tr.stderr(), f"gpuleak says so: {tr.stderr()}")


def test_python_frames_deep_stack_keeps_innermost(tmp):
    """A stack deeper than gpuleak keeps: exactly the innermost frames, in order."""
    wl, truth, tr = traced_run(tmp, wl_args=("--depth", "150", "--iters", "1"))
    p = process(tr.report(), wl.pid)
    site = truth["py_sites"]["deep"]
    check(len(site["frames"]) > MAX_PY_FRAMES + 50, "the recursion is deeper than kept")
    check_site(p, "deep", site)
    deep = [s for s in p["stacks"] if py_frames(s) == site["frames"][:MAX_PY_FRAMES]]
    check_eq(len(py_frames(deep[0])), MAX_PY_FRAMES, "Python frames kept")


def test_python_frames_off(tmp):
    """--no-python: the same program, native frames only, the same books."""
    wl, truth, tr = traced_run(tmp, "--no-python", wl_args=("--depth", "0"))
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check(p["stacks"], "stacks are reported")
    for s in p["stacks"]:
        check_eq(py_frames(s), [], "Python frames with --no-python")
