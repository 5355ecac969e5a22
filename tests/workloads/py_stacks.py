# SPDX-License-Identifier: BSD-2-Clause
"""A Python workload for gpuleak's Python frames: it calls the CUDA driver stand-in through
ctypes from several places and records, for each, the Python stack that gpuleak should show.

Protocol (as tests/workloads/wl.h): set up CUDA, print "ready <pid>", wait for a line on
stdin (unless --no-wait), fakecuda_mark(), allocate, write the stand-in's truth with a
"py_sites" key, then wait for one more line if --hold.

py_sites: {site: {"bytes": outstanding bytes, "allocs": N,
                  "frames": [[function, file, line], ...] innermost first}}
The sites:
  main      the main thread, ctypes.CDLL (the GIL is released during the call)
  thread    a second thread, ctypes.CDLL
  gil_held  the main thread, ctypes.PyDLL (the GIL is held during the call)
  callback  Python called back from C (libc qsort) calls the driver: two runs of Python
            frames, one per eval-loop call
  deep      a recursion deeper than gpuleak keeps (its innermost frames are compared)
  worker    (--worker LIB) the XLA runtime stand-in's worker thread, which runs no Python,
            allocates while the main thread waits in the call: the frames gpuleak should
            infer for it are the main thread's at that call
  generator, gen_callee (--frames): inside a generator's body, whose frame lives in
            the generator object, not on the thread's data stack, and in a function it
            calls, back on the data stack
  wide      (--frames) a recursion of functions with 300 locals each (2.4 KiB frames):
            its frames span several of the data stack's chunks
  churn-D-L with --churn N: N allocations at recursion depths D changing from one call
            to the next, from two lines L (a, b) in turn, so that each call's Python frames
            lie at the addresses of the last call's (CPython reuses a thread's frame
            memory) while the stack differs; its native part is the same every time
With --fail, the main thread last asks for 0 bytes, which the driver refuses, through a
function of an installed package's stand-in (site-packages/gl_standin_pkg.py) called at
fail_in_package; the truth's "fail_site" is that line, "function (file:line)".
With --exec, the program allocates once and then execs itself (--after-exec): the new
image sets CUDA up again, marks, allocates once at "warmup", waits --settle-ms and goes on
with the sites above; its truth is what the new image did.
"""
import argparse
import ctypes
import json
import os
import sys
import threading
import time

CUDA = None
PYCUDA = None
SITES = {}
LOCK = threading.Lock()


def qualname(code):
    return code.co_qualname if sys.version_info >= (3, 11) else code.co_name


def expected_stack(frame, next_line):
    """The stack gpuleak should report for a call made on the line after this one."""
    frames = []
    f = frame
    while f is not None:
        line = f.f_lineno + 1 if f is frame and next_line else f.f_lineno
        frames.append([qualname(f.f_code), f.f_code.co_filename, line])
        f = f.f_back
    return frames


def check(rc, what):
    if rc != 0:
        sys.exit(f"py_stacks: {what} failed with {rc}")


def book(site, size, frames):
    with LOCK:
        s = SITES.setdefault(site, {"bytes": 0, "allocs": 0, "frames": frames})
        if s["frames"] != frames:
            sys.exit(f"py_stacks: site {site} has two stacks: {s['frames']} and {frames}")
        s["bytes"] += size
        s["allocs"] += 1


def alloc_leaf(lib, site, size):
    ptr = ctypes.c_ulonglong(0)
    frames = expected_stack(sys._getframe(), True)
    check(lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc_v2")
    book(site, size, frames)


def alloc_in_main(n):
    for _ in range(n):
        alloc_leaf(CUDA, "main", 1 << 20)


def thread_body(ctx, n):
    check(CUDA.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    for _ in range(n):
        alloc_leaf(CUDA, "thread", 2 << 20)


def alloc_in_thread(ctx, n):
    t = threading.Thread(target=thread_body, args=(ctx, n), name="allocator")
    t.start()
    t.join()


def alloc_with_gil(n):
    for _ in range(n):
        alloc_leaf(PYCUDA, "gil_held", 3 << 20)


def sort_callback(a, b):
    if not SITES.get("callback"):
        alloc_leaf(CUDA, "callback", 4 << 20)
    return a[0] - b[0]


def alloc_from_callback():
    libc = ctypes.CDLL(None)
    cmp_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                ctypes.POINTER(ctypes.c_int))
    values = (ctypes.c_int * 4)(3, 1, 2, 0)
    libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, cmp_type]
    libc.qsort(values, len(values), ctypes.sizeof(ctypes.c_int), cmp_type(sort_callback))


def alloc_on_worker(path, n):
    lib = ctypes.CDLL(path)
    ptrs = (ctypes.c_ulonglong * n)()
    frames = expected_stack(sys._getframe(), True)
    check(lib.xla_standin_worker_alloc(ctypes.c_size_t(6 << 20), n, ptrs),
          "xla_standin_worker_alloc")
    for _ in range(n):
        book("worker", 6 << 20, frames)


def recurse(depth):
    if depth == 0:
        alloc_leaf(CUDA, "deep", 5 << 20)
        return
    recurse(depth - 1)


def gen_body():
    alloc_leaf(CUDA, "generator", 7 << 16)
    yield 1
    gen_callee()
    yield 2


def gen_callee():
    alloc_leaf(CUDA, "gen_callee", 9 << 16)


def alloc_in_generator():
    for _ in gen_body():
        pass


# A function with 300 locals: each call's frame takes 2.4 KiB of the data stack (its
# chunks are 16 KiB), so 30 calls cross several chunks.
WIDE_LOCALS = 300
exec("def wide(depth):\n"
     + "".join(f"    v{i} = depth\n" for i in range(WIDE_LOCALS))
     + "    if depth == 0:\n"
     + "        alloc_leaf(CUDA, 'wide', 11 << 16)\n"
     + "        return v0\n"
     + f"    return wide(depth - 1) + v{WIDE_LOCALS - 1}\n", globals())


def churn_leaf(depth, line):
    if line == "a":
        alloc_leaf(CUDA, f"churn-{depth}-a", 1 << 16)
    else:
        alloc_leaf(CUDA, f"churn-{depth}-b", 1 << 17)


def churn_down(depth, line, left):
    if left == 0:
        churn_leaf(depth, line)
        return
    churn_down(depth, line, left - 1)


def alloc_churn(n):
    for i in range(n):
        depth = (i * 7) % 13
        churn_down(depth, "a" if i % 2 else "b", depth)
        # the tracer catches up (a busy machine may hold it back): later calls find what
        # it learnt from the first ones
        if i == 25:
            time.sleep(0.5)
        elif i % 16 == 15:
            time.sleep(0.002)


def fail_in_package():
    """The call the package makes fails; returns the site that should name it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "site-packages"))
    import gl_standin_pkg
    frame = sys._getframe()
    line = frame.f_lineno + 1
    if gl_standin_pkg.alloc_nothing(CUDA) == 0:
        sys.exit("py_stacks: the driver took a request for 0 bytes")
    return f"{qualname(frame.f_code)} ({frame.f_code.co_filename}:{line})"


def main():
    global CUDA, PYCUDA
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="the CUDA driver stand-in")
    ap.add_argument("--truth")
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--churn", type=int, default=0)
    ap.add_argument("--frames", action="store_true",
                    help="the generator, gen_callee and wide sites")
    ap.add_argument("--exec", action="store_true")
    ap.add_argument("--after-exec", action="store_true")
    ap.add_argument("--settle-ms", type=int, default=600)
    ap.add_argument("--fail", action="store_true")
    ap.add_argument("--worker", help="the XLA runtime stand-in (jaxlib/xla_extension.so)")
    ap.add_argument("--idle-threads", type=int, default=0,
                    help="Python threads that only wait (listed before the main thread)")
    args = ap.parse_args()
    idle = threading.Event()
    for _ in range(args.idle_threads):
        threading.Thread(target=idle.wait, daemon=True).start()

    CUDA = ctypes.CDLL(args.lib)
    PYCUDA = ctypes.PyDLL(args.lib)
    ctx = ctypes.c_void_p()
    check(CUDA.cuInit(0), "cuInit")
    check(CUDA.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
    check(CUDA.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    if not args.after_exec:
        print(f"ready {os.getpid()}", flush=True)
    if not args.no_wait and not args.after_exec:
        sys.stdin.readline()
    CUDA.fakecuda_mark()
    if args.exec:
        alloc_leaf(CUDA, "pre_exec", 1 << 20)
        argv = [a for a in sys.argv if a != "--exec"]
        os.execv(sys.executable, [sys.executable, *argv, "--after-exec"])
    if args.after_exec:
        alloc_leaf(CUDA, "warmup", 1 << 20)
        time.sleep(args.settle_ms / 1000)

    alloc_in_main(args.iters)
    alloc_in_thread(ctx, args.iters)
    alloc_with_gil(args.iters)
    alloc_from_callback()
    if args.depth:
        recurse(args.depth)
    if args.worker:
        alloc_on_worker(args.worker, args.iters)
    if args.frames:
        alloc_in_generator()
        wide(30)
    alloc_churn(args.churn)
    fail_site = fail_in_package() if args.fail else None

    if args.truth:
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        CUDA.fakecuda_truth_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        extra = '"py_sites":' + json.dumps(SITES)
        if fail_site:
            extra += ',"fail_site":' + json.dumps(fail_site)
        f = libc.fopen((args.truth + ".tmp").encode(), b"w")
        if not f:
            sys.exit(f"py_stacks: cannot create {args.truth}.tmp")
        check(CUDA.fakecuda_truth_json(f, extra.encode()), "fakecuda_truth_json")
        check(libc.fclose(f), "fclose")
        os.rename(args.truth + ".tmp", args.truth)
    if args.hold:
        sys.stdin.readline()


if __name__ == "__main__":
    main()
