# SPDX-License-Identifier: BSD-2-Clause
"""Objects that the census takes for tensors, under any CPython (no PyTorch needed): a
class named like PyTorch's tensor base type, torch._C._TensorBase, and its subclass. They
are held in a module attribute, an object attribute (a plain class: 3.11's managed dict,
3.12's tagged values, 3.13's inline values), a list, a dict with str and int keys, a
closure and a thread's local variable. Writes the holders' paths as JSON, says
"ready PID", waits for a line on stdin."""
import json
import os
import sys
import threading
import types

Base = type("torch._C._TensorBase", (), {})


class Tensor(Base):
    pass


class Holder:
    def __init__(self):
        self.kept = Tensor()
        self.other = 3


def make_closure():
    cap = Tensor()

    def f():
        return cap
    return f


def worker(ready, stop, out):
    local_t = Tensor()
    out["tid"] = threading.get_native_id()
    ready.set()
    stop.wait()
    out["t"] = local_t


def main():
    mod = types.ModuleType("census_stand_in")
    mod.table = Tensor()
    sys.modules["census_stand_in"] = mod
    g = globals()
    g["holder"] = Holder()
    g["items"] = [Tensor() for _ in range(5)]
    g["by_key"] = {"a": Tensor(), 7: Tensor()}
    g["fn"] = make_closure()
    ready, stop, out = threading.Event(), threading.Event(), {}
    th = threading.Thread(target=worker, args=(ready, stop, out))
    th.start()
    ready.wait()
    paths = ["census_stand_in.table", "__main__.holder.kept", "__main__.by_key['a']",
             "__main__.by_key[7]", "__main__.fn.__closure__[0].cell_contents",
             f"thread {out['tid']} worker(): local_t"]
    paths += [f"__main__.items[{i}]" for i in range(5)]
    with open(sys.argv[1], "w") as f:
        json.dump(paths, f)
    print(f"ready {os.getpid()}", flush=True)
    sys.stdin.readline()
    stop.set()
    th.join()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
