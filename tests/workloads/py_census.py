# SPDX-License-Identifier: BSD-2-Clause
"""A PyTorch program whose tensors are held in every way `gpuleak census` names: a
module attribute, an object attribute, a list in an attribute and a global list, a
dict (str and int keys), a closure,
a thread's local variable, views of one storage, and a loss summed across steps that
keeps every step's graph. It writes what it holds (paths, storages, bytes) as JSON,
says "ready PID", waits for "go", checks its tensors are intact and says "ok".

--freed: make and free the same tensors, so that none is left.
--churn: besides, a thread makes and drops tensors, lists and dicts without pause, so
that the heap changes while it is read.
"""
import argparse
import gc
import json
import sys
import threading
import types

import torch

STEPS = 5
HISTORY = 60


def storage(t):
    s = t.storage()
    return {"data": s.data_ptr(), "bytes": s.nbytes(), "shape": list(t.shape),
            "dtype": str(t.dtype).replace("torch.", "")}


class Model:
    def __init__(self):
        self.history = []
        self.w = torch.zeros(100, 10)


def make_closure():
    cap = torch.ones(300)

    def f():
        return cap
    return f


def worker(ready, stop, out):
    local_t = torch.ones(2048)
    out["tid"] = threading.get_native_id()
    out["t"] = storage(local_t)
    ready.set()
    stop.wait()
    out["sum"] = float(local_t.sum())


def churn(stop):
    keep = []
    while not stop.is_set():
        keep.append({"t": torch.ones(64), "l": [torch.zeros(8) for _ in range(4)]})
        if len(keep) > 50:
            del keep[:25]


class Slotted:
    """An object without a __dict__: the census does not enter it, and says so."""
    __slots__ = ("value",)


def build(truth):
    g = globals()
    g["slotted"] = Slotted()
    g["slotted"].value = 3
    mod = types.ModuleType("census_cache")
    mod.table = torch.arange(64, dtype=torch.int64)
    sys.modules["census_cache"] = mod
    g["model"] = Model()
    for i in range(HISTORY):
        g["model"].history.append(torch.full((256,), float(i)))
    g["batches"] = [torch.zeros(4, 32) for _ in range(3)]
    g["results"] = {"a": torch.zeros(512, dtype=torch.float64),
                    7: torch.zeros(8, dtype=torch.int32)}
    g["base"] = torch.zeros(1000)
    g["v1"] = g["base"][10:20]
    g["v2"] = g["base"].view(10, 100)
    g["fn"] = make_closure()
    g["w"] = torch.ones(50, requires_grad=True)
    g["param"] = torch.nn.Parameter(torch.zeros(20))
    g["unset"] = torch.ones(7, requires_grad=True)
    g["unset"].requires_grad_(False)  # a leaf whose autograd metadata says no
    total = 0
    steps = []
    for i in range(STEPS):
        x = torch.full((50,), float(i + 1))
        steps.append(storage(x))
        total = total + (x * g["w"]).sum()
    g["x"] = x
    g["total"] = total
    del x, total
    truth["named"] = {
        "census_cache.table": storage(mod.table),
        "__main__.model.w": storage(g["model"].w),
        "__main__.results['a']": storage(g["results"]["a"]),
        "__main__.results[7]": storage(g["results"][7]),
        "__main__.base": storage(g["base"]),
        "__main__.v1": storage(g["v1"]),
        "__main__.v2": storage(g["v2"]),
        "__main__.fn.__closure__[0].cell_contents": storage(g["fn"].__closure__[0].cell_contents),
        "__main__.w": storage(g["w"]),
        "__main__.param": storage(g["param"]),
        "__main__.unset": storage(g["unset"]),
        "__main__.total": storage(g["total"]),
        "__main__.x": steps[-1],
    }
    truth["history"] = [storage(t) for t in g["model"].history]
    truth["batches"] = [storage(t) for t in g["batches"]]
    # every step's x but the last is kept by the graph only
    truth["graph_only"] = steps[:-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", required=True)
    ap.add_argument("--freed", action="store_true")
    ap.add_argument("--churn", action="store_true")
    args = ap.parse_args()
    truth = {}
    ready, stop, out = threading.Event(), threading.Event(), {}
    th = None
    build(truth)
    if args.freed:
        for name in ("model", "batches", "results", "base", "v1", "v2", "fn", "w", "param",
                     "unset", "x", "total"):
            del globals()[name]
        del sys.modules["census_cache"]
        truth = {"named": {}, "history": [], "batches": [], "graph_only": []}
        gc.collect()
    else:
        th = threading.Thread(target=worker, args=(ready, stop, out))
        th.start()
        ready.wait()
        truth["local"] = {"path": f"thread {out['tid']} worker(): local_t", **out["t"]}
    churner = None
    if args.churn:
        churner = threading.Thread(target=churn, args=(stop,))
        churner.start()
    with open(args.truth, "w") as f:
        json.dump(truth, f)
    print(f"ready {__import__('os').getpid()}", flush=True)
    line = sys.stdin.readline().strip()
    if line != "go":
        sys.exit(f"py_census: expected 'go', got {line!r}")
    stop.set()
    if churner:
        churner.join()
    if th:
        th.join()
        g = globals()
        assert out["sum"] == 2048.0
        assert float(g["model"].history[-1].sum()) == 256.0 * (HISTORY - 1)
        g["total"].backward()
        assert float(g["w"].grad.sum()) == 50.0 * sum(range(1, STEPS + 1))
    print("ok", flush=True)


if __name__ == "__main__":
    main()
