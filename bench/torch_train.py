#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A small transformer training loop on one GPU, timed per step: the load for the
step-time slowdown that gpuleak (attached from outside) and PyTorch's own
torch.cuda.memory._record_memory_history() cause. Run by bench/gpu.py.

    torch_train.py [--steps N] [--warmup N] [--record-history] [--go FILE]
    torch_train.py --control FILE --log FILE [--large]   (bench/gpu_train.py drives it)

--go FILE: print "ready PID" after building the model and wait until FILE exists
(the tracer attaches in between). Step time is wall time with a synchronize at the end
of each step. Prints one line to stdout:
    steps=N median_step_ms=X mean_step_ms=Y p90_step_ms=Z

--control FILE: after warm-up print "ready PID" and train until FILE says "quit";
each step is tagged with FILE's contents (a phase label, read once a step) and logged
to --log as "label wall_ns main_thread_cpu_ns process_cpu_ns autograd_cpu_ns
main_instructions main_cycles": autograd_cpu_ns is the CPU time of PyTorch's autograd
threads (pt_autograd_N: a CUDA backward runs there, not on the thread that called it;
"-" where there are none), the counts are the main thread's instructions and cycles
retired in the step, user and kernel, from the CPU's counters ("- -" where the machine
has none, or where a counter did not run the whole step). At quit, one line per thread
name, "# thread NAME CPU_NS", with the CPU time the process's threads of that name used
while steps were logged. The labels "history"
and "history-alloc" turn _record_memory_history() on for as long as they last (stacks
of mallocs and frees, or of mallocs only: RECORDERS). --large: a model of
hundreds of ms a step (d=2048, 16 layers, batch 16 x 1024). --fake LIB: no torch, a
CPU step of ctypes calls into the libc10_cuda stand-in LIB (to test the driver).
--blocking-sync: the device's primary context waits for the GPU by blocking, not by
spinning (CU_CTX_SCHED_BLOCKING_SYNC, set before PyTorch creates the context): the main
thread's CPU time a step is then the work it does, not also the time it spun in the
step's final synchronize, which moves with how far the CPU side ran ahead of the GPU.
"""
import argparse
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:  # --fake
    torch = None


def build(d_model=1024, layers=8, heads=16):
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, batch_first=True,
                                             dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model, opt, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


class ThreadCounters:
    """The calling thread's instructions and cycles retired, user and kernel (a count
    of work that, unlike CPU time, does not move with the speed of a shared vCPU)."""
    SYSCALL = {"x86_64": 298, "aarch64": 241}
    HW_CYCLES, HW_INSTRUCTIONS = 0, 1
    FORMAT_ENABLED_RUNNING = 1 | 2
    EXCLUDE_HV = 1 << 6

    def __init__(self):
        import ctypes
        import platform
        import struct
        self.struct = struct
        self.fds = []
        nr = self.SYSCALL.get(platform.machine())
        if nr is None:
            return
        libc = ctypes.CDLL(None, use_errno=True)
        for config in (self.HW_INSTRUCTIONS, self.HW_CYCLES):
            attr = bytearray(128)  # struct perf_event_attr, PERF_TYPE_HARDWARE
            struct.pack_into("IIQQQQQ", attr, 0, 0, len(attr), config, 0, 0,
                             self.FORMAT_ENABLED_RUNNING, self.EXCLUDE_HV)
            fd = libc.syscall(nr, ctypes.create_string_buffer(bytes(attr), len(attr)), 0, -1,
                              -1, 0)
            if fd < 0:
                self.close()
                return
            self.fds.append(fd)

    def read(self):
        """(value, time enabled, time running) of each counter; None without counters."""
        if not self.fds:
            return None
        return [self.struct.unpack("QQQ", os.read(fd, 24)) for fd in self.fds]

    @staticmethod
    def delta(before, after):
        """The counts between two reads, "- -" where a counter was not running throughout
        (multiplexed with others: its count would be an estimate)."""
        if before is None:
            return "- -"
        out = []
        for b, a in zip(before, after):
            if a[1] - b[1] != a[2] - b[2]:
                return "- -"
            out.append(str(a[0] - b[0]))
        return " ".join(out)

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class ThreadTimes:
    """CPU time of the process's threads by name, read through each thread's CPU clock
    (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): nanoseconds, unlike the
    ticks of /proc/PID/task/TID/stat)."""
    AUTOGRAD = "pt_autograd_"

    def __init__(self):
        self.names = {}  # tid -> thread name
        self.scan()
        self.start = self.by_name()

    def scan(self):
        """Learns the threads there are now (PyTorch starts its threads lazily)."""
        names = {}
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    names[int(t)] = f.read().strip()
            except OSError:  # it ended meanwhile
                pass
        self.names = names

    @staticmethod
    def cpu(tid):
        """Thread tid's CPU time in ns; None once it has ended."""
        try:
            return time.clock_gettime_ns((~tid << 3) | 6)
        except OSError:
            return None

    def autograd(self):
        """The autograd threads' CPU time together; None where there are none."""
        times = [self.cpu(t) for t, n in self.names.items() if n.startswith(self.AUTOGRAD)]
        times = [x for x in times if x is not None]
        return sum(times) if times else None

    @staticmethod
    def delta(before, after):
        return "-" if before is None or after is None else str(after - before)

    def by_name(self):
        out = {}
        for t, n in self.names.items():
            x = self.cpu(t)
            if x is not None:
                out[n] = out.get(n, 0) + x
        return out

    def since_start(self):
        """The "# thread NAME CPU_NS" lines: each name's CPU time since the first scan (of
        the threads alive now; a thread started since counts from its start)."""
        self.scan()
        now = self.by_name()
        return "".join(f"# thread {n.replace(' ', '_')} {x - self.start.get(n, 0)}\n"
                       for n, x in sorted(now.items(), key=lambda kv: -kv[1]))


CU_CTX_SCHED_MASK, CU_CTX_SCHED_BLOCKING_SYNC = 0x07, 0x04


def cuda_call(lib, name, *args):
    err = getattr(lib, name)(*args)
    if err:
        raise RuntimeError(f"{name} failed: CUresult {err}")


def set_blocking_sync():
    """Primary context of device 0: block in waits (before PyTorch makes it current)."""
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int()
    cuda_call(lib, "cuInit", 0)
    cuda_call(lib, "cuDeviceGet", ctypes.byref(dev), 0)
    name = ("cuDevicePrimaryCtxSetFlags_v2" if hasattr(lib, "cuDevicePrimaryCtxSetFlags_v2")
            else "cuDevicePrimaryCtxSetFlags")
    cuda_call(lib, name, dev, ctypes.c_uint(CU_CTX_SCHED_BLOCKING_SYNC))
    return lib


def check_blocking_sync(lib):
    """The context PyTorch made current on this thread has the flag."""
    import ctypes
    flags = ctypes.c_uint()
    cuda_call(lib, "cuCtxGetFlags", ctypes.byref(flags))
    if flags.value & CU_CTX_SCHED_MASK != CU_CTX_SCHED_BLOCKING_SYNC:
        raise RuntimeError(f"--blocking-sync: the current context's flags are "
                           f"{flags.value:#x}, not blocking sync")


def fake_backward(lib, base, n):
    """n pairs on the stand-in's worker thread, which runs no Python (as autograd's)."""
    if lib.faketorch_worker_pairs(base, n):
        raise RuntimeError("the stand-in's worker thread did not start")


def fake_step(lib, worker, depth=0):
    """A stand-in step (--fake): 400 tensor-block pairs, the last worker of them on a
    native worker thread, and some work, no GPU; depth more Python frames above the
    pairs (a real model's module calls)."""
    if depth:
        return fake_step(lib, worker, depth - 1)
    base = 1 << 40
    for i in range(400 - worker):
        lib.faketorch_malloc(base + i * 4096, 0, 4096, 0)
        lib.faketorch_free(base + i * 4096)
    if worker:
        fake_backward(lib, base + (400 - worker) * 4096, worker)
    x = 0
    for j in range(100000):
        x += j


def controlled(a):
    """Steps until --control says quit, each logged with its phase label."""
    if a.fake:
        import ctypes
        if os.environ.get("FAKE_LIBCUDA"):  # mapped, so that gpuleak attaches
            ctypes.CDLL(os.environ["FAKE_LIBCUDA"]).cuInit(0)
        lib = ctypes.CDLL(a.fake)
        lib.faketorch_malloc.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64,
                                         ctypes.c_uint64]
        lib.faketorch_free.argtypes = [ctypes.c_void_p]
        lib.faketorch_worker_pairs.argtypes = [ctypes.c_uint64, ctypes.c_int]
        step, sync = (lambda: fake_step(lib, a.fake_worker, a.fake_depth)), (lambda: None)
    else:
        cu = set_blocking_sync() if a.blocking_sync else None
        torch.manual_seed(0)
        if a.large:
            model, opt = build(2048, 16, 16)
            x = torch.randn(16, 1024, 2048, device="cuda")
        else:
            model, opt = build()
            x = torch.randn(a.batch, a.seq, 1024, device="cuda")
        step, sync = (lambda: train_step(model, opt, x)), torch.cuda.synchronize
        if cu:
            check_blocking_sync(cu)
    for _ in range(a.warmup):
        step()
        sync()
    log = open(a.log, "w", buffering=1)
    counters = ThreadCounters()
    threads = ThreadTimes()
    print(f"ready {os.getpid()}", flush=True)
    recording = None  # the recorder's context in force (RECORDERS), None: off
    steps = 0
    while True:
        with open(a.control) as f:
            label = f.read().strip() or "idle"
        if label == "quit":
            break
        want = RECORDERS.get(label)
        if want != recording and not a.fake:
            if recording:
                torch.cuda.memory._record_memory_history(enabled=None)
            if want:
                torch.cuda.memory._record_memory_history(
                    enabled="all", context=want, max_entries=100000, stacks="all")
            recording = want
        steps += 1
        if steps % 100 == 1:
            threads.scan()
        g0 = threads.autograd()
        h0 = counters.read()
        w0, c0, p0 = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
        step()
        sync()
        w1, c1, p1 = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
        h1 = counters.read()
        log.write(f"{label} {w1 - w0} {c1 - c0} {p1 - p0} "
                  f"{threads.delta(g0, threads.autograd())} {counters.delta(h0, h1)}\n")
    log.write(threads.since_start())
    counters.close()
    log.close()
    return 0


# Labels under which PyTorch's recorder runs, and the stacks it keeps: "all" (the
# default call) a C++ and Python stack for every malloc and every free, "alloc" for
# every malloc only (what --tensors full keeps).
RECORDERS = {"history": "all", "history-alloc": "alloc"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--record-history", action="store_true")
    ap.add_argument("--history-stacks", default="all", choices=("all", "python"),
                    help="the stacks _record_memory_history() records")
    ap.add_argument("--go", default="")
    ap.add_argument("--control", default="")
    ap.add_argument("--log", default="")
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--blocking-sync", action="store_true",
                    help="--control: wait for the GPU by blocking, not spinning")
    ap.add_argument("--fake", default="")
    ap.add_argument("--fake-worker", type=int, default=0, choices=range(401), metavar="N",
                    help="--fake: N of a step's 400 pairs on a native worker thread")
    ap.add_argument("--fake-depth", type=int, default=0, metavar="N",
                    help="--fake: N more Python frames above the pairs")
    a = ap.parse_args()
    if a.blocking_sync and (a.fake or not a.control):
        ap.error("--blocking-sync goes with --control and a GPU (not --fake)")
    if a.control:
        return controlled(a)

    torch.manual_seed(0)
    model, opt = build()
    x = torch.randn(a.batch, a.seq, 1024, device="cuda")
    if a.go:
        print(f"ready {os.getpid()}", flush=True)
        while not os.path.exists(a.go):
            time.sleep(0.01)
    if a.record_history:
        torch.cuda.memory._record_memory_history(max_entries=100000, stacks=a.history_stacks)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        train_step(model, opt, x)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    if a.record_history:
        torch.cuda.memory._record_memory_history(enabled=None)
    times.sort()
    print(f"steps={len(times)} median_step_ms={statistics.median(times) * 1e3:.3f} "
          f"mean_step_ms={statistics.mean(times) * 1e3:.3f} "
          f"p90_step_ms={times[int(len(times) * 0.9)] * 1e3:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
