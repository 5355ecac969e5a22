#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""On a GPU machine: contexts torn down under gpuleak, against the real driver.

Run under gpuleak (`gpuleak run --json OUT -- python3 ctx_teardown.py`), then again with
--check OUT. Through libcuda itself (ctypes, no framework): a context made with
cuCtxCreate keeps KEEP allocations and is destroyed with them (the driver frees them);
the primary context of device 0 keeps KEEP more and is reset (cuDevicePrimaryCtxReset);
then the primary is retained again and one allocation is made and kept, which the
reset must not take. THREADS threads allocate and free in the created context while it
is destroyed, so calls are in flight across the teardown. gpuleak's books must end with
the one kept allocation, every dropped byte counted as freed by a teardown, consistent.
"""
import ctypes
import json
import sys
import threading

KEEP = 8
SIZE = 2 << 20
THREADS = 4


def cu():
    lib = ctypes.CDLL("libcuda.so.1")

    def call(name, *args):
        rc = getattr(lib, name)(*args)
        if rc:
            raise RuntimeError(f"{name} failed: {rc}")
    return lib, call


def churn(lib, ctx, stop):
    """Allocations and frees in ctx until stop, whatever the teardown does to them (once
    it is gone they fail, and a free of what was made before it fails too)."""
    lib.cuCtxSetCurrent(ctx)
    p = ctypes.c_uint64()
    while not stop.is_set():
        if lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(SIZE)) == 0:
            lib.cuMemFree_v2(p)


def workload():
    lib, call = cu()
    call("cuInit", 0)
    dev = ctypes.c_int()
    call("cuDeviceGet", ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    call("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
    p = ctypes.c_uint64()
    for _ in range(KEEP):
        call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(SIZE))
    stop = threading.Event()
    threads = [threading.Thread(target=churn, args=(lib, ctx, stop))
               for _ in range(THREADS)]
    for t in threads:
        t.start()
    call("cuCtxDestroy_v2", ctx)
    stop.set()
    for t in threads:
        t.join()
    prim = ctypes.c_void_p()
    call("cuDevicePrimaryCtxRetain", ctypes.byref(prim), dev)
    call("cuCtxSetCurrent", prim)
    for _ in range(KEEP):
        call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(SIZE))
    call("cuDevicePrimaryCtxReset", dev)
    call("cuDevicePrimaryCtxRetain", ctypes.byref(prim), dev)
    call("cuCtxSetCurrent", prim)
    call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(SIZE))
    print("ctx_teardown: kept one allocation", flush=True)
    return 0


def check(path):
    rep = json.load(open(path))
    procs = [p for p in rep["processes"] if p["alloc_calls"]]
    ok = len(procs) == 1
    p = procs[0] if ok else {}
    lines = [f"complete {rep.get('complete')}, lost {rep.get('lost_events')}"]
    if ok:
        lines.append(f"device_bytes {p['device_bytes']} (want {SIZE}), outstanding "
                     f"{p['outstanding_allocs']} (want 1), context_dropped_bytes "
                     f">= {2 * KEEP * SIZE}: {p['context_dropped_bytes']}, consistent "
                     f"{p['consistent']}")
        ok = (rep["complete"] and p["consistent"] and p["device_bytes"] == SIZE and
              p["outstanding_allocs"] == 1 and
              p["context_dropped_bytes"] >= 2 * KEEP * SIZE)
    print(("PASS" if ok else "FAIL") + " ctx_teardown: " + "; ".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(check(sys.argv[2]) if sys.argv[1:2] == ["--check"] else workload())
