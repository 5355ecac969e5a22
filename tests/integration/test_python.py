# SPDX-License-Identifier: BSD-2-Clause
"""Python frames: a Python program calling the CUDA driver stand-in through ctypes, from the
main thread with the GIL released (CDLL) and held (PyDLL), from a second thread, from a
callback that C code makes into Python, and deep in a recursion, shows each call's Python
functions and exact lines, innermost first, in gpuleak's JSON.

The interpreter is GPULEAK_TEST_PYTHON, else /usr/bin/python3 (make test-python-versions
runs these tests under every pyenv interpreter present)."""
import os
import re
import subprocess
import time

from harness import (FAKECUDA, ROOT, Tracer, TestFailure, check, check_books, check_eq,
                     check_sites, process, wait_until, _readline)

PYTHON = os.environ.get("GPULEAK_TEST_PYTHON", "/usr/bin/python3")
SCRIPT = os.path.join(ROOT, "tests", "workloads", "py_stacks.py")
MAX_PY_FRAMES = 64


class PyWorkload:
    """tests/workloads/py_stacks.py under PYTHON (or argv), speaking the protocol of wl.h."""

    def __init__(self, tmp, *args, argv=None):
        self.truth_path = os.path.join(tmp, f"py.{time.monotonic_ns()}.truth.json")
        argv = argv or [PYTHON, SCRIPT, "--lib", FAKECUDA]
        argv = [*argv, "--truth", self.truth_path, "--hold", *args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.pid = self.proc.pid

    def wait_ready(self):
        line = _readline(self.proc.stdout, 20, "the workload to say ready")
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


def traced_run(tmp, *tracer_args, wl_args=(), argv=None):
    wl = PyWorkload(tmp, *wl_args, argv=argv)
    try:
        wl.wait_ready()
        tr = Tracer(["attach", "-i", "0", *tracer_args, str(wl.pid)], tmp)
        tr.wait_attached()
        wl.go()
        truth = wl.truth()
        tr.stop()
    finally:
        rc = wl.finish()
    check_eq(rc, 0, "workload exit status")
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


def test_python_failure_names_the_programs_line(tmp):
    """A failed call's warning names the program's own line that made it, as the report's site
    does: not the installed package's frame inside it, nor the native frames of ctypes."""
    wl, truth, tr = traced_run(tmp, wl_args=("--fail", "--depth", "0"))
    want = (rf"PID {wl.pid} \([^)]*\): cuMemAlloc_v2 of 0 B at {re.escape(truth['fail_site'])} "
            r"failed with CUDA_ERROR_INVALID_VALUE while ")
    check(re.search(want, tr.stderr()), f"the warning {want!r} in:\n{tr.stderr()}")


def test_python_frames_in_pprof(tmp):
    """go tool pprof names Python frames as the report does: a module's code is
    py_stacks.<module>, not <unknown>; the main binary is the interpreter."""
    import shutil
    import subprocess
    path = os.path.join(tmp, "py.pb.gz")
    wl, truth, tr = traced_run(tmp, "--pprof", path)
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    p = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=100000", path],
                       capture_output=True, text=True, timeout=60)
    check_eq(p.returncode, 0, f"go tool pprof -top ({p.stderr})")
    check("py_stacks.<module>" in p.stdout, f"the module's code by its name:\n{p.stdout}")
    check("<unknown>" not in p.stdout, f"no <unknown> frame:\n{p.stdout}")
    m = re.search(r"^File: (\S+)", p.stdout, re.M)
    check(m and m.group(1).startswith("python"), f"main binary: {m and m.group(1)}")


def test_python_frames_after_exec(tmp):
    """A Python process that execs a new Python image: the new image's frames, read with
    the new image's interpreter, from its first calls after a moment to find it."""
    wl, truth, tr = traced_run(tmp, wl_args=("--exec", "--depth", "10", "--iters", "2"))
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    sites = truth["py_sites"]
    check("pre_exec" not in sites and "warmup" in sites, "the truth is the new image's")
    for name, site in sites.items():
        if name != "warmup":
            check_site(p, name, site)


def test_python_frames_many_threads(tmp):
    """150 Python threads started after the main one: CPython lists the main thread's
    state last, and the search still reaches it."""
    wl, truth, tr = traced_run(tmp, wl_args=("--idle-threads", "150", "--depth", "5",
                                             "--iters", "1"))
    p = process(tr.report(), wl.pid)
    for name, site in truth["py_sites"].items():
        check_site(p, name, site)


def test_python_frames_deep_stack_keeps_innermost(tmp):
    """A stack deeper than gpuleak keeps: exactly the innermost frames, in order."""
    wl, truth, tr = traced_run(tmp, wl_args=("--depth", "150", "--iters", "1"))
    p = process(tr.report(), wl.pid)
    site = truth["py_sites"]["deep"]
    check(len(site["frames"]) > MAX_PY_FRAMES + 50, "the recursion is deeper than kept")
    check_site(p, "deep", site)
    deep = [s for s in p["stacks"] if py_frames(s) == site["frames"][:MAX_PY_FRAMES]]
    check_eq(len(py_frames(deep[0])), MAX_PY_FRAMES, "Python frames kept")


def test_python_walk_reads_a_threads_frames_in_one_read(tmp):
    """A thread that calls from one line, again and again: after its first walk, each walk
    copies its frames in one read that stays on the data stack's pages. A read that
    reaches below them faults, and was paid at every call (1.3 us of a tensor block's
    4.6 us of BPF work, bench/RESULTS.md)."""
    bench = os.path.join(ROOT, "tests", "workloads", "py_bench.py")
    wl = subprocess.Popen([PYTHON, bench, "--lib", FAKECUDA, "--calls", "500", "--depth", "12"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check_eq(_readline(wl.stdout, 20, "py_bench.py to say ready"), f"ready {wl.pid}",
                 "py_bench.py's first line")
        tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
        tr.wait_attached()
        wl.stdin.write("go\n")
        wl.stdin.flush()
        _readline(wl.stdout, 60, "py_bench.py's result")
        tr.stop()
        check_eq(tr.returncode, 0, f"gpuleak's exit status: {tr.stderr()}")
        rep = tr.report()
        wl.stdin.write("exit\n")
        wl.stdin.flush()
        check_eq(wl.wait(30), 0, "py_bench.py's exit status")
    finally:
        if wl.poll() is None:
            wl.kill()
            wl.wait()
    st = rep["stats"]
    # the report's own figures are those after its last read of the ring
    check(st["stack_records"] >= 500, f"a stack a call, every one read: {st}")
    check(st["python_block_rereads"] <= 2,
          f"frames read again after a fault: {st['python_block_rereads']} of "
          f"{st['stack_records']} walks")
    p = process(rep, wl.pid)
    top = max(p["stacks"], key=lambda s: s["allocs"])
    names = [f[0] for f in py_frames(top)]
    check(top["allocs"] >= 500 and names[:1] == ["workload.<locals>.loop"] and
          names.count("nest") == 12,
          f"every call's frames, whole: {top['allocs']} allocations, {names}")


def test_python_frames_off_the_data_stack(tmp):
    """Frames in a generator (its own memory, not the thread's data stack), in a function it
    calls, and 2.4 KiB frames spread over several of the data stack's chunks: every frame
    exact, in order, wherever it lies."""
    wl, truth, tr = traced_run(tmp, wl_args=("--frames", "--depth", "0", "--iters", "1"))
    p = process(tr.report(), wl.pid)
    sites = truth["py_sites"]
    check_eq([f[0] for f in sites["generator"]["frames"][:3]],
             ["alloc_leaf", "gen_body", "alloc_in_generator"], "the generator site")
    check_eq([f[0] for f in sites["gen_callee"]["frames"][:3]],
             ["alloc_leaf", "gen_callee", "gen_body"], "the generator's callee")
    check_eq(sum(1 for f in sites["wide"]["frames"] if f[0] == "wide"), 31, "wide frames")
    check(len(sites["wide"]["frames"]) < MAX_PY_FRAMES, "the wide stack is kept whole")
    for name, site in sites.items():
        check_site(p, name, site)


def test_python_frames_off(tmp):
    """--no-python: the same program, native frames only, the same books."""
    wl, truth, tr = traced_run(tmp, "--no-python", wl_args=("--depth", "0"))
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check(p["stacks"], "stacks are reported")
    for s in p["stacks"]:
        check_eq(py_frames(s), [], "Python frames with --no-python")


# A process that looks like CPython 3.12 to gpuleak (its file is named python3.12 and it
# defines _PyRuntime and Py_Version) but whose interpreter state is garbage, changed
# between calls: frame chains that loop, shim frames that loop, frames and interpreters in
# unmapped memory, a thread list that loops without this thread, code objects that are not.
HOSTILE_C = r"""
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "wl.h"

unsigned char _PyRuntime[256] __attribute__((aligned(64)));
#ifndef PY_VERSION_VALUE
#define PY_VERSION_VALUE 0x030c01f0
#endif
const unsigned long Py_Version = PY_VERSION_VALUE;
static unsigned char interp[256], tstate[256], cframe[64];
static unsigned char frames[2][128] __attribute__((aligned(16)));

enum { S_SANE, S_CYCLE, S_SELF, S_SHIMS, S_BAD_FRAME, S_THREADS, S_BAD_INTERP, NR };
static struct wl_site sites[NR] = {
	{ "site_sane", FAKECUDA_DEVICE, 0, 0 }, { "site_cycle", FAKECUDA_DEVICE, 0, 0 },
	{ "site_self", FAKECUDA_DEVICE, 0, 0 }, { "site_shims", FAKECUDA_DEVICE, 0, 0 },
	{ "site_bad_frame", FAKECUDA_DEVICE, 0, 0 }, { "site_threads", FAKECUDA_DEVICE, 0, 0 },
	{ "site_bad_interp", FAKECUDA_DEVICE, 0, 0 },
};

static void put(unsigned char *b, int off, uint64_t v)
{
	memcpy(b + off, &v, sizeof(v));
}

/* The 3.12 layout: a thread state for this thread, two frames with bogus code objects. */
static void reset(void)
{
	memset(_PyRuntime, 0, sizeof(_PyRuntime));
	memset(interp, 0, sizeof(interp));
	memset(tstate, 0, sizeof(tstate));
	memset(frames, 0, sizeof(frames));
	put(_PyRuntime, 40, (uintptr_t)interp);
	put(interp, 72, (uintptr_t)tstate);
	put(tstate, 16, (uintptr_t)interp);
	put(tstate, 56, (uintptr_t)cframe);
	put(tstate, 136, (uint64_t)pthread_self());
	put(tstate, 144, (uint64_t)syscall(SYS_gettid));
	put(cframe, 0, (uintptr_t)frames[0]);
	put(frames[0], 0, 0x1000);
	put(frames[0], 8, (uintptr_t)frames[1]);
	put(frames[0], 56, 0x1000 + 192 + 8);
	put(frames[1], 0, (uintptr_t)frames);
}

#define SITE(fn, i)                                                  \
	WL_SITE void fn(void)                                        \
	{                                                            \
		CUdeviceptr p = 0;                                   \
		wl_check(cuMemAlloc_v2(&p, (i + 1) * WL_MIB), #fn);  \
		wl_site_alloc(&sites[i], (i + 1) * WL_MIB);          \
	}
SITE(site_sane, S_SANE)
SITE(site_cycle, S_CYCLE)
SITE(site_self, S_SELF)
SITE(site_shims, S_SHIMS)
SITE(site_bad_frame, S_BAD_FRAME)
SITE(site_threads, S_THREADS)
SITE(site_bad_interp, S_BAD_INTERP)

int main(int argc, char **argv)
{
	struct wl_opts o = { 0 };

	wl_parse(&o, argc, argv, 0);
	wl_cuda_start(0);
	reset();
	wl_ready(&o);
	fakecuda_mark();
	reset();
	site_sane();
	reset();
	put(frames[1], 8, (uintptr_t)frames[0]);
	site_cycle();
	reset();
	put(frames[0], 8, (uintptr_t)frames[0]);
	site_self();
	reset();
	frames[0][70] = 3;
	frames[1][70] = 4;
	put(frames[1], 8, (uintptr_t)frames[0]);
	site_shims();
	reset();
	put(cframe, 0, 0x10);
	site_bad_frame();
	reset();
	put(tstate, 8, (uintptr_t)tstate);
	put(tstate, 136, 1);
	put(tstate, 144, 1);
	site_threads();
	reset();
	put(_PyRuntime, 40, 0xffffffffff000000ULL);
	site_bad_interp();
	reset();
	wl_finish(&o, fakecuda_truth_json, sites, NR, NULL);
	return 0;
}
"""

HOSTILE_PY_FRAMES = {"site_sane": 2, "site_cycle": MAX_PY_FRAMES, "site_self": 0,
                     "site_shims": 0, "site_bad_frame": 0, "site_threads": 0,
                     "site_bad_interp": 0}


def build_fake_python(tmp, name, *cflags):
    src = os.path.join(tmp, "hostile.c")
    exe = os.path.join(tmp, name)
    with open(src, "w") as f:
        f.write(HOSTILE_C)
    fakecuda_dir = os.path.dirname(FAKECUDA)
    cc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-fno-omit-frame-pointer",
                         "-fno-optimize-sibling-calls", "-pthread", *cflags,
                         "-I" + os.path.join(ROOT, "tests", "fakecuda"),
                         "-I" + os.path.join(ROOT, "tests", "workloads"), src,
                         os.path.join(ROOT, "tests", "workloads", "wl.c"), "-o", exe,
                         "-L" + fakecuda_dir, "-lcuda", "-Wl,-rpath," + fakecuda_dir, "-ldl"],
                        capture_output=True, timeout=60)
    check_eq(cc.returncode, 0, f"compiling {name}: {cc.stderr.decode()}")
    return exe


def test_python_garbage_interpreter_state(tmp):
    """Garbage where the interpreter's state should be: every walk ends within its bounds,
    the books stay exact, and nothing but frames of unknown code comes out of it."""
    exe = build_fake_python(tmp, "python3.12")
    wl, truth, tr = traced_run(tmp, argv=[exe])
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    check("runs CPython 3.12" in tr.stderr(), f"taken for CPython 3.12: {tr.stderr()}")
    for site, want in HOSTILE_PY_FRAMES.items():
        stacks = [s for s in p["stacks"]
                  if any(f.get("function") == site for f in s["frames"])]
        check_eq(len(stacks), 1, f"stacks through {site}")
        got = py_frames(stacks[0])
        check_eq(len(got), want, f"Python frames under {site}")
        check(all(f == [None, None, None] for f in got), f"frames of unknown code: {got[:3]}")


def test_python_unsupported_version(tmp):
    """A CPython older than 3.10 is named, and its process keeps native stacks and books."""
    exe = build_fake_python(tmp, "python3.9", "-DPY_VERSION_VALUE=0x030912f0")
    wl, truth, tr = traced_run(tmp, argv=[exe])
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    check("runs CPython 3.9" in tr.stderr() and "cannot walk" in tr.stderr(),
          f"the version is named: {tr.stderr()}")
    check(all(not py_frames(s) for s in p["stacks"]), "no Python frames")


def stack_table(p):
    """Every stack of a process report: (frames, memory, outstanding bytes and allocations,
    calls)."""
    return sorted((tuple((f["kind"], f.get("function"), f.get("file"), f.get("line"))
                         for f in s["frames"]), s["memory"], s["outstanding_bytes"],
                   s["outstanding_allocs"], s["allocs"], s["frees"]) for s in p["stacks"])


def test_python_frames_with_and_without_the_stack_cache(tmp):
    """Python stacks that change from one call to the next over frame memory CPython
    reuses, on a native path that stays the same: BPF sends most native stacks as ids of
    stacks unwound before (no copy), and every stack is what the program had, the same
    as with every stack copied (--no-stack-cache)."""
    args = ("--churn", "400", "--depth", "30", "--iters", "2")
    wl, truth, tr = traced_run(tmp, "--stacks", "dwarf", "--top", "0", "-v", wl_args=args)
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    churn = {k: v for k, v in truth["py_sites"].items() if k.startswith("churn-")}
    check_eq(len(churn), 26, "churn sites (13 depths, 2 lines)")
    for name, site in truth["py_sites"].items():
        check_site(p, name, site)
    st = rep["stats"]
    check(st["stack_cache_hits"] >= 100,
          f"most native stacks were sent by id: {st['stack_cache_hits']} of "
          f"{st['stack_records']}; {st}")
    check(st["stack_record_ring_bytes"] < st["stack_records"] * 4096,
          f"records by id carry no copy: {st['stack_record_ring_bytes']} ring bytes for "
          f"{st['stack_records']} stack records")

    wl2, truth2, tr2 = traced_run(tmp, "--stacks", "dwarf", "--top", "0", "--no-stack-cache",
                                  wl_args=args)
    rep2 = tr2.report()
    p2 = process(rep2, wl2.pid)
    check_eq(rep2["stats"]["stack_cache_hits"], 0, "no stack sent by id with --no-stack-cache")
    for name, site in truth2["py_sites"].items():
        check_site(p2, name, site)
    check_eq(stack_table(p), stack_table(p2), "every stack, with the cache and without")
