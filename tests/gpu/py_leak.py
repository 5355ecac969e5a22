#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch training loop that leaks one output tensor a step, and the check of what
gpuleak says about it (run by tests/gpu/py_stacks.sh).

Workload mode: build the model on the GPU, print "ready <pid>", wait for the file --go,
run --steps steps of `results.append(model(x))` (each output is 32 MiB, so the caching
allocator asks the driver for a new block every step), write --done (JSON: pid, the file
and line of the leaking statement, steps, bytes per step), wait for the file --exit.
--fake-lib LIB replaces PyTorch by calls to a CUDA driver stand-in (to try the script
without a GPU).

Report mode (--report GPULEAK_JSON --done DONE): print the call site (stacks grouped by
their Python frames) that holds the most memory, with its largest stack, Python and native
frames innermost first, and PASS if the leaking line is in it and it holds at least the
memory leaked, else FAIL (exit status 1).
"""
import argparse
import json
import os
import sys
import time

OUT_FEATURES = 32768
BATCH = 256


def wait_for(path, timeout):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"py_leak: timed out waiting for {path}")
        time.sleep(0.02)


def torch_model():
    import torch

    model = torch.nn.Linear(1024, OUT_FEATURES).cuda().eval()
    x = torch.randn(BATCH, 1024, device="cuda")
    torch.cuda.synchronize()
    return model, x, torch.cuda.synchronize


def fake_model(lib):
    import ctypes

    cuda = ctypes.CDLL(lib)
    ctx = ctypes.c_void_p()
    cuda.cuInit(0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    cuda.cuCtxSetCurrent(ctx)

    class Linear:
        def forward(self, x):
            ptr = ctypes.c_ulonglong()
            cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(BATCH * OUT_FEATURES * 4))
            return ptr.value

        def __call__(self, x):
            return self.forward(x)

    return Linear(), None, lambda: None


def train(model, x, steps, results):
    for _ in range(steps):
        leak_line = sys._getframe().f_lineno + 1
        results.append(model(x))
        time.sleep(0.05)
    return leak_line


def workload(args):
    model, x, sync = fake_model(args.fake_lib) if args.fake_lib else torch_model()
    print(f"ready {os.getpid()}", flush=True)
    wait_for(args.go, 120)
    results = []
    line = train(model, x, args.steps, results)
    sync()
    done = {"pid": os.getpid(), "file": os.path.abspath(__file__), "line": line,
            "function": "train", "steps": args.steps, "bytes_per_step": BATCH * OUT_FEATURES * 4}
    with open(args.done + ".tmp", "w") as f:
        json.dump(done, f)
    os.rename(args.done + ".tmp", args.done)
    wait_for(args.exit, 120)


def describe(f):
    if f["kind"] == "python":
        return f"{f.get('function')} ({f.get('file')}:{f.get('line')}) [python]"
    where = os.path.basename(f.get("module") or "") or hex(f.get("address", 0))
    return f"{f.get('function') or '?'} ({where})"


def report(args):
    rep = json.load(open(args.report))
    done = json.load(open(args.done))
    procs = [p for p in rep["processes"] if p["pid"] == done["pid"]]
    if not procs or not procs[0]["stacks"]:
        print(f"FAIL: no stacks for PID {done['pid']} in {args.report}")
        return 1
    p = procs[0]
    # stacks that differ only in native frames past a truncated frame-pointer walk are one
    # call site: group them by their Python frames
    groups = {}
    for st in p["stacks"]:
        key = json.dumps([(f.get("function"), f.get("file"), f.get("line"))
                          for f in st["frames"] if f["kind"] == "python"])
        groups.setdefault(key, []).append(st)
    group = max(groups.values(), key=lambda g: sum(s["outstanding_bytes"] for s in g))
    held = sum(s["outstanding_bytes"] for s in group)
    top = max(group, key=lambda s: s["outstanding_bytes"])
    print(f"PID {p['pid']}: device {p['device_bytes']} bytes outstanding in "
          f"{p['outstanding_allocs']} allocations; the call site holding the most:")
    print(f"  {held} bytes in {sum(s['outstanding_allocs'] for s in group)} allocations "
          f"({len(group)} native variants), verdict {top['verdict']}; its largest stack:")
    for i, f in enumerate(top["frames"]):
        print(f"    #{i:<2} {describe(f)}")
    hit = any(f["kind"] == "python" and f.get("line") == done["line"] and
              f.get("file") == done["file"] and f.get("function") == done["function"]
              for f in top["frames"])
    leaked = done["steps"] * done["bytes_per_step"]
    if hit and held >= leaked:
        print(f"PASS: the leak ({leaked} bytes) is at {done['file']}:{done['line']} "
              f"in {done['function']}")
        return 0
    print(f"FAIL: want {done['function']} ({done['file']}:{done['line']}) holding at least "
          f"{leaked} bytes")
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go")
    ap.add_argument("--done", required=True)
    ap.add_argument("--exit")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--fake-lib")
    ap.add_argument("--report")
    args = ap.parse_args()
    if args.report:
        sys.exit(report(args))
    if not args.go or not args.exit:
        ap.error("--go and --exit are needed")
    workload(args)


if __name__ == "__main__":
    main()
