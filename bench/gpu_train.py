#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Step time of a training loop under each way of watching its memory, interleaved in
one training process (bench/gpu.sh runs it on the GPU machine).

    gpu_train.py [--large] [--reps N] [--seconds S] [--steps N] [--settle N] [--json FILE]
                 [--fake LIB] [--phases P,P] [--cpus N,N] [--design rep|aba]
                 [--tensor-window T] [--blocking-sync] [--keep-log FILE]
    gpu_train.py --merge FILE FILE...   pools the reps of earlier --json results

One process of bench/torch_train.py trains without end (--control); between blocks
of --steps steps this script changes what watches it, and the process tags each step
with the phase in force. Phases, rep after rep:
  untraced            nothing attached
  attach, idle        `gpuleak attach PID` (default: tensor level windowed), between
                      windows: its first window shortened to 1 s, measured after it closed
  attach, window      `gpuleak attach PID` with no options, inside its first window
                      (the probes armed: every tensor block, full stacks)
  serve, idle         `gpuleak serve` (host-wide), between windows, as attach, idle
  full                `gpuleak attach --tensors full PID`: every block, full stacks
  history             torch.cuda.memory._record_memory_history() (all stacks: C++ and
                      Python, of every malloc and every free)
  history-alloc       the same with context="alloc": stacks of mallocs only, what
                      --tensors full keeps (not in the default --phases)
The order of the phases is shuffled in each rep (seeded by the rep: no phase always
follows another), and each block's first --settle steps are dropped (a change,
e.g. the recorder's buffer freed, settles). Per block: median
step wall time, main-thread CPU time, the CPU time of PyTorch's autograd threads (a CUDA
backward runs there), the two together (train_cpu: the step's own CPU work, however it
moves between the two threads from block to block) and process CPU time, and where the
machine has CPU counters the main thread's instructions and cycles retired a step (user
and kernel): counts of its work that do not move with the speed of a shared vCPU, as its
CPU time does. The run also reports the CPU time of each of the process's threads by
name, over all phases (threads_cpu_s): which threads the rest of the process's CPU time
is. And per attach phase, what each block's tracer said it saw (tracer_booked: the calls
it booked by probe, its tensor mode, the events it lost, whether its report was
complete): a block whose tracer lost events was not watched as its phase claims, and the
summary says so. Beside each block it reads the tracer's own CPU time (all its threads,
schedstat) and the steal time of the training CPUs (/proc/stat): what of gpuleak ran while
the block was measured, and how much of the block the hypervisor gave to others.
--keep-log FILE keeps the step log, every step with its label.

--design rep (the default): each block's median against the untraced block of the same
rep. --design aba: an untraced block before and after every watched block (U A U B U
..., the last untraced block of a rep the first of the next) and each watched block's
median against the mean of its two neighbours': the step time of this VM drifts by
several per cent over seconds (its vCPUs are shared), and the neighbours cancel the part
of the drift that is linear over a pair. Either way: median [IQR] over the reps and a 95 %
bootstrap interval of that median; full mode is also compared with each recorder block
of the same rep (full / history: with --design aba each block against its own
neighbours first, so the drift between the two blocks cancels). --seconds S starts no
rep after S seconds (--reps is then the most). --blocking-sync: the training process
waits for the GPU by blocking (torch_train.py --blocking-sync), so that its main
thread's CPU time is its work, without the final synchronize's spinning (the driver's
default on a host with more cores than contexts). --merge pools the per-rep figures of
several runs of one model, design and sync mode (each pair was interleaved in its own
run) and prints the same summary.
Refuses to run when another tracer (gpuleak, bpftrace) is running on the machine.
"""
import argparse
import json
import random
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "bench", "torch_train.py")
GPULEAK = os.environ.get("GPULEAK", os.path.join(ROOT, "gpuleak"))
PHASES = ("untraced", "attach-idle", "attach-window", "serve-idle", "full", "history",
          "history-alloc")
RECORDER_PHASES = ("history", "history-alloc")  # full mode is compared with each


def ratio_key(recorder):
    """The results JSON's key of full mode against a recorder phase."""
    return "full_over_" + recorder.replace("-", "_")
# the columns of torch_train.py's step log, after the label
LOG_NAMES = ("wall", "main_cpu", "process_cpu", "autograd_cpu", "main_instructions",
             "main_cycles")
# the figures reported: train_cpu is the main thread's and the autograd threads' CPU
# time together (a CUDA backward runs on PyTorch's autograd thread, the rest of the
# step on the main thread: work moves between the two from block to block)
NAMES = ("wall", "main_cpu", "autograd_cpu", "train_cpu", "process_cpu", "main_instructions",
         "main_cycles")
UNITS = {"wall": "ms", "main_cpu": "ms", "autograd_cpu": "ms", "train_cpu": "ms",
         "process_cpu": "ms", "main_instructions": "M",
         "main_cycles": "M"}  # block_ms: ms of time, millions of counts
WINDOW = "1s"  # the first window of the idle phases (--tensor-window)


def log(msg):
    print(f"gpu_train: {msg}", file=sys.stderr, flush=True)


def other_tracers():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) in (b"gpuleak", b"bpftrace"):
            found.append(int(pid))
    return found


class Tracer:
    def __init__(self, argv, tmp, report=None):
        self.err = os.path.join(tmp, f"gl.{time.monotonic_ns()}.err")
        self.report = report  # the --json file it writes at its end, if any
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.err, "w"),
                                  stdin=subprocess.DEVNULL)

    def wait_for(self, text, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in open(self.err).read():
                return
            if self.p.poll() is not None:
                raise RuntimeError(f"gpuleak exited ({self.p.returncode}): "
                                   f"{open(self.err).read()[-1500:]}")
            time.sleep(0.01)
        raise RuntimeError(f"gpuleak did not say {text!r}: {open(self.err).read()[-1500:]}")

    def stop(self):
        """Stops it; what its report booked (booked()), None without a report."""
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        if not self.report:
            return None
        try:
            with open(self.report) as f:
                rep = json.load(f)
            os.unlink(self.report)
        except (OSError, ValueError):
            return {"report": False}
        return booked(rep)


def booked(rep):
    """What a gpuleak report says it saw: the calls it booked by probe, the events it lost
    and whether it calls itself complete (the figures of a block only count as traced
    ones if it did trace)."""
    modes = sorted({p["tensor_level"]["mode"] for p in rep.get("processes", [])
                    if p.get("tensor_level")})
    return {"report": True, "calls": rep.get("stats", {}).get("calls", {}),
            "tensor_modes": modes, "lost_events": rep.get("lost_events"),
            "complete": rep.get("complete")}


def task_cpu_ns(pid):
    """The CPU time of every thread of pid so far, in ns (schedstat: exact, not in ticks);
    None once it is gone."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended between the listing and the read
    except OSError:
        return None
    return total


def steal_ticks(cpus):
    """Steal time so far of the CPUs in cpus (all of them if empty), in USER_HZ ticks: the
    time the hypervisor ran something else while these vCPUs had work."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *cols = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            if cpus and int(name[3:]) not in cpus:
                continue
            total += int(cols[7]) if len(cols) > 7 else 0
    return total


class BlockDiag:
    """What ran beside a measured block: the tracer's own CPU time during it (all its
    threads) and the steal time of the training process's CPUs, which no design of the
    step figures can tell apart from a cost."""
    TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")

    def __init__(self, cpus, t0):
        self.cpus, self.t0 = cpus, t0

    def read(self, tracer):
        return (time.monotonic(), task_cpu_ns(tracer.p.pid) if tracer else None,
                steal_ticks(self.cpus))

    def delta(self, a, b):
        cpu = (b[1] - a[1]) / 1e6 if a[1] is not None and b[1] is not None else None
        return {"t_s": round(a[0] - self.t0, 3), "s": round(b[0] - a[0], 3),
                "tracer_cpu_ms": cpu, "steal_ms": (b[2] - a[2]) * self.TICK_MS}


def start_tracer(phase, pid, tmp):
    """The phase's tracer, ready to be measured (None: untraced, the recorder phases)."""
    if phase == "untraced" or phase in RECORDER_PHASES:
        return None
    rep = os.path.join(tmp, "rep.json")
    base = [GPULEAK, "attach", "-i", "0", "--json", rep]
    if phase == "attach-idle":
        t = Tracer(base + ["--tensor-window", WINDOW, str(pid)], tmp, rep)
    elif phase == "attach-window":
        t = Tracer(base + [str(pid)], tmp, rep)
    elif phase == "full":
        t = Tracer(base + ["--tensors", "full", str(pid)], tmp, rep)
    else:
        t = Tracer([GPULEAK, "serve", "--listen", "127.0.0.1:19464", "--tensor-window", WINDOW],
                   tmp)
    t.wait_for("attached", 120)
    if phase.endswith("idle"):
        t.wait_for("tensor window 1 closed", 30)
    return t


class Trainer:
    def __init__(self, a, tmp):
        self.ctl = os.path.join(tmp, "control")
        self.log = os.path.join(tmp, "steps.log")
        self.set("idle")
        argv = [a.python, TRAIN, "--control", self.ctl, "--log", self.log]
        if a.large:
            argv.append("--large")
        if getattr(a, "blocking_sync", False):
            argv.append("--blocking-sync")
        if a.fake:
            argv += ["--fake", a.fake]
            if getattr(a, "fake_worker", 0):
                argv += ["--fake-worker", str(a.fake_worker)]
            if getattr(a, "fake_depth", 0):
                argv += ["--fake-depth", str(a.fake_depth)]
        self.out = os.path.join(tmp, "train.out")
        cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else None
        self.p = subprocess.Popen(argv, stdout=open(self.out, "w"), stderr=subprocess.STDOUT,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus
                                  else None)
        deadline = time.monotonic() + 600
        while "ready" not in open(self.out).read():
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"torch_train.py failed: {open(self.out).read()[-2000:]}")
            time.sleep(0.1)
        self.pid = self.p.pid
        self.seen = 0

    def set(self, label):
        tmp = self.ctl + ".tmp"
        with open(tmp, "w") as f:
            f.write(label)
        os.rename(tmp, self.ctl)

    def block(self, label, steps, settle, timeout=600):
        """Runs settle + steps steps under label; (wall, main CPU, process CPU) lists in ns
        of the last steps."""
        self.set(label)
        deadline = time.monotonic() + timeout
        rows = []
        while len(rows) < steps + settle:
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"training stopped: {open(self.out).read()[-2000:]}")
            for line in self.new_lines():
                parts = line.split()
                if len(parts) == 1 + len(LOG_NAMES) and parts[0] == label:
                    rows.append(step_figures(parts[1:]))
            time.sleep(0.01)
        self.set("idle")
        rows = rows[settle:steps + settle]
        # a figure some step lacks (no CPU counters, a counter multiplexed): none
        return [[r[i] for r in rows] if all(r[i] is not None for r in rows) else []
                for i in range(len(NAMES))]

    def new_lines(self):
        """The whole lines the log gained since the last call (read from where it ended:
        rereading a log of thousands of steps every 10 ms would be load of its own)."""
        with open(self.log) as f:
            f.seek(self.seen)
            text = f.read()
        end = text.rfind("\n") + 1
        self.seen += len(text[:end].encode())
        return text[:end].splitlines()

    def quit(self):
        """Ends the training; the CPU time its threads used, in s by thread name (torch_train's
        "# thread" lines), {} where it did not say."""
        self.set("quit")
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return {}
        threads = {}
        for line in self.new_lines():
            parts = line.split()
            if len(parts) == 4 and parts[:2] == ["#", "thread"]:
                threads[parts[2]] = int(parts[3]) / 1e9
        return threads


def step_figures(cols):
    """A step's figures (NAMES) from its log columns (LOG_NAMES); None for one the step
    lacks ("-")."""
    v = dict(zip(LOG_NAMES, (None if x == "-" else int(x) for x in cols)))
    v["train_cpu"] = (v["main_cpu"] + v["autograd_cpu"]
                      if v["autograd_cpu"] is not None else None)
    return [v[n] for n in NAMES]


def summarize(x):
    x = sorted(x)
    q = statistics.quantiles(x, n=4) if len(x) > 1 else [x[0]] * 3
    return {"median": statistics.median(x), "q1": q[0], "q3": q[2], "n": len(x)}


def median_ci(x, n=2000):
    """A 95 % bootstrap interval of the median: how well the reps pin the median down
    (the IQR is the spread of single reps)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(x, k=len(x))) for _ in range(n))
    return [meds[int(0.025 * n)], meds[int(0.975 * n) - 1]]


def run(a, phases, steps):
    """Measures; per watched phase and figure, the per-rep overheads in %, the block
    medians in ms per phase, and the per-rep full / history ratios."""
    blocks = {p: [] for p in phases}
    over = {p: {n: [] for n in NAMES} for p in phases if p != "untraced"}
    ratio = {r: {n: [] for n in NAMES} for r in RECORDER_PHASES if r in phases}
    med = lambda b, i: statistics.median(b[i]) if b[i] else None  # noqa: E731

    def over_ratio(x, *refs):
        """x over the mean of refs; None where a block lacks the figure."""
        if x is None or None in refs:
            return None
        return x / (sum(refs) / len(refs))
    tracer_saw = {}  # per attach phase, what each block's tracer booked (booked())
    diag = {}  # per phase, what ran beside each block (BlockDiag)
    bd = BlockDiag({int(c) for c in a.cpus.split(",")} if a.cpus else set(), time.monotonic())
    t_end = time.monotonic() + a.seconds if a.seconds else None
    with tempfile.TemporaryDirectory(prefix="gpuleak-train-") as tmp:
        tr = Trainer(a, tmp)

        def measure(ph):
            t = start_tracer(ph, tr.pid, tmp)
            try:
                d0 = bd.read(t)
                b = tr.block(ph, steps, a.settle)
                diag.setdefault(ph, []).append(bd.delta(d0, bd.read(t)))
            finally:
                seen = t.stop() if t else None
            blocks[ph].append(b)
            if seen:
                tracer_saw.setdefault(ph, []).append(seen)
            return b

        try:
            before = measure("untraced") if a.design == "aba" else None
            for rep in range(a.reps):
                if t_end and time.monotonic() > t_end:
                    log(f"--seconds {a.seconds} up after {rep} reps")
                    break
                watched = [p for p in phases if p != "untraced"]
                random.Random(rep).shuffle(watched)
                got, rel = {}, {}
                if a.design == "aba":
                    for ph in watched:
                        got[ph] = measure(ph)
                        after = measure("untraced")
                        rel[ph] = [over_ratio(med(got[ph], i), med(before, i), med(after, i))
                                   for i in range(len(NAMES))]
                        for i, n in enumerate(NAMES):
                            if rel[ph][i] is not None:
                                over[ph][n].append(100 * (rel[ph][i] - 1))
                        before = after
                else:
                    order = watched + ["untraced"]
                    random.Random(rep).shuffle(order)
                    for ph in order:
                        got[ph] = measure(ph)
                    for ph in watched:
                        rel[ph] = [over_ratio(med(got[ph], i), med(got["untraced"], i))
                                   for i in range(len(NAMES))]
                        for i, n in enumerate(NAMES):
                            if rel[ph][i] is not None:
                                over[ph][n].append(100 * (rel[ph][i] - 1))
                for r in ratio:
                    if "full" not in got or r not in got:
                        continue
                    for i, n in enumerate(NAMES):
                        # --design rep: the two raw medians, seconds apart (the drift
                        # between them stays); aba: each against its own neighbours
                        f, h = ((rel["full"][i], rel[r][i]) if a.design == "aba" else
                                (med(got["full"], i), med(got[r], i)))
                        if f is not None and h is not None:
                            ratio[r][n].append(f / h)
                log(f"rep {rep + 1}/{a.reps}: " + ", ".join(
                    f"{ph} {med(blocks[ph][-1], 0) / 1e6:.2f} ms" for ph in phases))
        finally:
            threads = tr.quit()
            if a.keep_log:
                shutil.copy(tr.log, a.keep_log)
    block_ms = {p: {n: [med(b, i) / 1e6 for b in blocks[p] if b[i]]
                    for i, n in enumerate(NAMES)} for p in phases}
    return over, block_ms, ratio, threads, tracer_saw, diag


def result(model, design, steps, over, block_ms, ratio, sync, threads, tracer_saw, diag):
    """The JSON of a run (or of merged runs) from its per-rep figures; threads: the CPU
    time the training process's threads used, in s by thread name, all phases together;
    tracer_saw: per attach phase, what the tracer of each block booked; diag: per phase,
    what ran beside each block (BlockDiag)."""
    res = {"model": model, "design": design, "steps_per_block": steps, "sync": sync,
           "threads_cpu_s": threads, "tracer_booked": tracer_saw, "block_diag": diag,
           "reps": max([len(v["wall"]) for v in over.values()] + [0]),
           "step_ms": {p: {n: summarize(x) for n, x in v.items() if x}
                       for p, v in block_ms.items()},
           "block_ms": block_ms, "overhead_pct": {}}
    for ph, v in over.items():
        res["overhead_pct"][ph] = {n: dict(summarize(x), median_ci95=median_ci(x), reps=x)
                                   for n, x in v.items() if x}
    for r, v in ratio.items():
        if v["wall"]:
            res[ratio_key(r)] = {
                n: dict(summarize(x), median_ci95=median_ci(x), reps=x)
                for n, x in v.items() if x}
    return res


def merge(files):
    """Pools the reps of runs of one model and design."""
    runs = [json.load(open(f)) for f in files]
    keys = {(r["model"], r.get("design", "rep"), r["steps_per_block"], r.get("sync", "auto"))
            for r in runs}
    if len(keys) != 1:
        sys.exit(f"gpu_train: --merge: runs of different models, designs, block sizes or "
                 f"sync modes: {sorted(keys)}")
    over, block_ms, ratio = {}, {}, {r: {n: [] for n in NAMES} for r in RECORDER_PHASES}
    threads, tracer_saw, diag = {}, {}, {}
    for r in runs:
        for ph, x in r.get("block_diag", {}).items():
            diag.setdefault(ph, []).extend(x)
        for n, x in r.get("threads_cpu_s", {}).items():
            threads[n] = threads.get(n, 0) + x
        for ph, x in r.get("tracer_booked", {}).items():
            tracer_saw.setdefault(ph, []).extend(x)
        for ph, v in r["overhead_pct"].items():
            for n, x in v.items():
                over.setdefault(ph, {m: [] for m in NAMES})[n] += x["reps"]
        for ph, v in r.get("block_ms", {}).items():
            for n, x in v.items():
                block_ms.setdefault(ph, {m: [] for m in NAMES})[n] += x
        for rec in RECORDER_PHASES:
            for n, x in r.get(ratio_key(rec), {}).items():
                ratio[rec][n] += x["reps"]
    model, design, steps, sync = keys.pop()
    res = result(model, design, steps, over, block_ms, ratio, sync, threads, tracer_saw, diag)
    res["merged"] = list(files)
    return res


def show(res):
    print(f"{res['model']}: {res['reps']} reps x {res['steps_per_block']} steps a block, "
          f"interleaved ({res['design']}), synchronize {res.get('sync', 'auto')}; "
          f"median [IQR]")
    for ph, s in res["step_ms"].items():
        line = f"  {ph:<14}" + "".join(
            f" {n} {s[n]['median']:8.2f} {UNITS[n]}" for n in NAMES if n in s)
        if ph in res["overhead_pct"]:
            o = res["overhead_pct"][ph]
            line += "   overhead " + ", ".join(
                f"{n} {o[n]['median']:+.2f}% [{o[n]['q1']:+.2f},{o[n]['q3']:+.2f}] "
                f"(median within {o[n]['median_ci95'][0]:+.2f}..{o[n]['median_ci95'][1]:+.2f})"
                for n in NAMES if n in o)
        print(line)
    threads = res.get("threads_cpu_s", {})
    if threads:
        total = sum(threads.values())
        print("  CPU time by thread, all phases: " + ", ".join(
            f"{n} {x:.1f} s ({100 * x / total:.0f} %)" for n, x in
            sorted(threads.items(), key=lambda kv: -kv[1])[:6]))
    for ph, seen in res.get("tracer_booked", {}).items():
        # a block whose tracer lost events or wrote no report was not traced as claimed
        bad = [s for s in seen if not s["report"] or s["lost_events"] or not s["complete"]]
        torch = [s["calls"].get("pytorch_malloc", 0) for s in seen if s["report"]]
        print(f"  {ph:<14} tracer: {len(seen)} blocks, "
              + (f"median {statistics.median(torch):.0f} pytorch_malloc calls booked"
                 if torch else "no report")
              + (f"; {len(bad)} without a report, with events lost or incomplete"
                 if bad else ", every report complete"))
    for ph, d in res.get("block_diag", {}).items():
        cpu = [x["tracer_cpu_ms"] / x["s"] / 10 for x in d if x["tracer_cpu_ms"] is not None]
        steal = [x["steal_ms"] / x["s"] / 10 for x in d]
        print(f"  {ph:<14} beside its {len(d)} blocks: "
              + (f"the tracer's CPU {statistics.median(cpu):.3f} % of the block's time "
                 f"(max {max(cpu):.3f} %), " if cpu else "")
              + f"steal on the training CPUs {statistics.median(steal):.2f} % "
              f"(max {max(steal):.2f} %) of one CPU")
    for rec in RECORDER_PHASES:
        r = res.get(ratio_key(rec))
        if not r:
            continue
        print(f"  full / {rec}, per rep: " + ", ".join(
            f"{n} {r[n]['median']:.3f} [{r[n]['q1']:.3f},{r[n]['q3']:.3f}] (median within "
            f"{r[n]['median_ci95'][0]:.3f}..{r[n]['median_ci95'][1]:.3f})" for n in NAMES
            if n in r))


def main():
    global WINDOW
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=0,
                    help="start no rep after this many seconds (--reps: the most)")
    ap.add_argument("--steps", type=int, default=0, help="per block (40; --large 8)")
    ap.add_argument("--settle", type=int, default=10,
                    help="steps dropped at the start of each block (a change settles)")
    ap.add_argument("--phases", default=",".join(p for p in PHASES if p != "history-alloc"))
    ap.add_argument("--design", choices=("rep", "aba"), default="rep")
    ap.add_argument("--tensor-window", default=WINDOW,
                    help="the first tensor window of the idle phases (measured after it)")
    ap.add_argument("--json", default="")
    ap.add_argument("--keep-log", default="",
                    help="copy torch_train.py's step log (every step, labelled) here")
    ap.add_argument("--merge", nargs="+", default=None, metavar="FILE")
    ap.add_argument("--blocking-sync", action="store_true",
                    help="the training process waits for the GPU by blocking, not spinning")
    ap.add_argument("--fake", default="", help="no GPU: torch_train.py --fake LIB")
    ap.add_argument("--allow-others", action="store_true", help="(testing the script only)")
    ap.add_argument("--python", default=os.environ.get("BENCH_PYTHON", sys.executable))
    ap.add_argument("--cpus", default="",
                    help="CPU numbers (1,2,3) the training process is kept on")
    a = ap.parse_args()
    if a.blocking_sync and a.fake:
        ap.error("--blocking-sync needs a GPU (not --fake)")
    if a.merge:
        res = merge(a.merge)
    else:
        WINDOW = a.tensor_window
        steps = a.steps or (8 if a.large else 40)
        phases = a.phases.split(",")
        bad = [p for p in phases if p not in PHASES]
        if bad or "untraced" not in phases:
            sys.exit(f"gpu_train: --phases: {','.join(bad) or 'untraced missing'}: the phases "
                     f"are {','.join(PHASES)}, untraced among them")
        others = other_tracers()
        if others and not a.allow_others:
            sys.exit(f"gpu_train: other tracers are running ({others}): the figures would be "
                     f"theirs too")
        over, block_ms, ratio, threads, tracer_saw, diag = run(a, phases, steps)
        res = result("large" if a.large else "torch_train", a.design, steps, over, block_ms,
                     ratio, "blocking" if a.blocking_sync else "auto", threads, tracer_saw,
                     diag)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    show(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
