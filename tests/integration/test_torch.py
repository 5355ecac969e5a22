# SPDX-License-Identifier: BSD-2-Clause
"""Tensor-level attribution through PyTorch's caching-allocator USDT probes
(pytorch:malloc / pytorch:free in libc10_cuda.so), against a stand-in library
that carries the same probes and semaphores."""
import time

from harness import (attach_workload, check, check_books, check_eq, finish_attached, process,
                     wait_until)


def _attach(tmp, *tracer_args):
    """The workload waits until gpuleak has attached to libcuda and, unless --no-torch,
    to the allocator probes (a separate step, reported on its own line)."""
    wl, tr = attach_workload(tmp, "wl_torch", tracer_args=tracer_args, go=False)
    if "--no-torch" not in tracer_args:
        wait_until(lambda: "attached PyTorch's allocator probes" in tr.stderr(), 20,
                   "gpuleak to attach PyTorch's allocator probes")
    return wl, tr


def test_tensor_blocks_exact(tmp):
    wl, tr = _attach(tmp)
    check("attached PyTorch's allocator probes" in tr.stderr(),
          f"the probes are attached automatically: {tr.stderr()!r}")
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "torch_allocated_bytes")
    check_eq(p["torch_blocks"], truth["torch_blocks"], "torch_blocks")
    check_eq(p["bpf"]["torch_allocated_bytes"], truth["torch_block_bytes"],
             "BPF's torch block bytes")
    blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
    check(blocks, "torch_block stacks are reported")
    leak = [s for s in blocks if any(f.get("function") == "torch_site_leak" for f in s["frames"])]
    check_eq(sum(s["outstanding_bytes"] for s in leak), truth["torch_block_bytes"],
             "tensor blocks attributed to the leaking site")
    scratch = [s for s in blocks if any(f.get("function") == "torch_site_scratch"
                                        for f in s["frames"])]
    check(all(s["outstanding_bytes"] == 0 for s in scratch),
          "freed scratch blocks hold nothing")


def test_no_torch_stays_at_driver_level(tmp):
    wl, tr = _attach(tmp, "--no-torch")
    time.sleep(0.5)
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], 0, "no tensor blocks with --no-torch")
    check("allocator probes" not in tr.stderr(), "no probes attached")


def test_python_only_tensor_stacks(tmp):
    """--torch-stacks python: tensor blocks keep their Python frames only (this workload has
    none, so their stack is the probe's own function); accounting stays exact, driver calls
    keep their full stacks."""
    wl, tr = _attach(tmp, "--torch-stacks", "python")
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(p["torch_allocated_bytes"], truth["torch_block_bytes"], "torch_allocated_bytes")
    blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
    check(blocks and all([f["function"] for f in s["frames"]] == ["faketorch_malloc"]
                         for s in blocks), f"no native frames for tensors: {blocks[:1]}")
    dev = [s for s in p["stacks"] if s["memory"] == "device"]
    check(all(len(s["frames"]) > 2 for s in dev), "driver calls keep their stacks")
