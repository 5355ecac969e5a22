# SPDX-License-Identifier: BSD-2-Clause
"""The benchmark harness stays runnable: bench/bench.py --smoke measures a few hundred
pairs untraced, under the floor programs and under gpuleak, runs books_bench, and reads
gpuleak's peak memory under a small load of many stacks, in a few seconds. Its figures prove the harness works, not how fast gpuleak is: nothing here
asserts a speed."""
import json
import os
import re
import subprocess
import sys

from harness import GPULEAK, OUTPUT, ROOT, check, check_eq

BENCH = os.path.join(ROOT, "bench", "bench.py")


def test_bench_smoke(tmp):
    results = os.path.join(tmp, "results.json")
    env = dict(os.environ, GPULEAK=GPULEAK, OUTPUT=OUTPUT)
    p = subprocess.run([sys.executable, BENCH, "--smoke", "-q", "--json", results],
                       capture_output=True, text=True, timeout=60, env=env)
    check_eq(p.returncode, 0, f"bench.py --smoke exit status (stderr: {p.stderr[-1500:]})")
    for row in ("untraced", "floor", "gpuleak fp", "(gpuleak fp - untraced) / (floor - untraced)",
                "call records only"):
        check(row in p.stdout, f"the table has no '{row}' row:\n{p.stdout}")
    with open(results) as f:
        res = json.load(f)["results"]
    ns = res["overhead"]["cpu_ns_per_pair"]
    check_eq(sorted(ns), ["floor", "gpuleak fp", "untraced"], "configurations measured")
    check(all(s["median"] > 0 and s["n"] == 1 for s in ns.values()),
          f"every configuration has one positive figure: {ns}")
    # (bench.py fails a floor run whose report attached no probe, and a traced run whose
    # books missed a call: its exit status above says both held)
    for name, s in res["books"].items():
        check(s["median"] > 0, f"books_bench measured {name}: {s}")
    hooks = res["hooks"]
    check_eq(sorted(hooks["ns_per_pair"]), ["attach -a", "attach PID", "untraced"],
             "the hook's modes measured")
    check(all(s["median"] > 0 for m in hooks["ns_per_pair"].values() for s in m.values()),
          f"every mmap load measured in every mode: {hooks['ns_per_pair']}")
    check("the mmap-lock hook" in p.stdout, f"the table has the hook's section:\n{p.stdout}")
    # gpuleak's peak resident memory under a load of many stacks, read from the kernel
    for load, by in res["peak"].items():
        f = by["gpuleak"]
        check(f["vm_hwm_mib"]["median"] > 1, f"{load}: a peak resident size measured: {f}")
        check_eq((f["lost_events"], f["complete"]), ([0], [True]),
                 f"{load}: the run lost nothing")
    check("peak resident memory (VmHWM" in p.stdout, f"the table has the peak's section:\n"
          f"{p.stdout}")


def test_bench_before_and_after_smoke(tmp):
    """make bench OLD=...: bench.py --old runs the other build beside this one in the
    programs suite (driver level) and in the tensors suite (PyTorch's probes, full
    mode), and prints per program its ns per run for both builds and their ratio per
    rep (here the same build twice; nothing asserts a speed)."""
    results = os.path.join(tmp, "results.json")
    env = dict(os.environ, GPULEAK=GPULEAK, OUTPUT=OUTPUT)
    p = subprocess.run([sys.executable, BENCH, "--smoke", "-q", "--only",
                        "programs,tensors,peak", "--old", GPULEAK, "--json", results],
                       capture_output=True, text=True, timeout=120, env=env)
    check_eq(p.returncode, 0, f"bench.py --old exit status (stderr: {p.stderr[-1500:]})")
    for line in ("gpuleak / old per run: call_enter", "BPF ns per program run",
                 "full / full@old", "BPF/pair above the floor"):
        check(line in p.stdout, f"the table has no '{line}' line:\n{p.stdout}")
    with open(results) as f:
        res = json.load(f)["results"]
    check_eq(sorted(res["programs"]["ns"]), ["floor", "gpuleak", "old"],
             "builds in the programs suite, and the do-nothing programs")
    ns = res["programs"]["ns"]
    check(0 < ns["floor"]["bpf"]["median"] < ns["gpuleak"]["bpf"]["median"],
          f"the do-nothing programs cost less than gpuleak's: {ns}")
    check(all(v["median"] > 0 for v in res["programs"]["above_floor"].values()),
          f"each build's work above the floor: {res['programs']['above_floor']}")
    pair = res["tensors"]["pair"]
    for mode in ("full", "full@old"):
        per = pair["bpf_prog_ns"][mode]
        check(all(per[p]["median"] > 0 for p in ("torch_malloc", "torch_free")),
              f"{mode}: each tensor program timed: {per}")
    ratio = pair["bpf_over_old"]["full"]
    check(all(ratio[k]["median"] > 0 for k in ("torch_malloc", "torch_free", "pair")),
          f"this build over the old one, per program: {ratio}")
    for load, by in res["peak"].items():
        check(sorted(by) == ["gpuleak", "gpuleak_over_old", "old"]
              and by["gpuleak_over_old"]["median"] > 0,
              f"{load}: both builds' peaks, and their ratio per rep: {by}")


def check_side_by_side(script, args, figures, first, timeout):
    """Runs bench/SCRIPT on two binaries (the same one twice, a and b) and checks its table:
    a row per binary of FIGURES "median [q1-q3]" figures, each positive, and the per-rep
    ratio line, which begins with the figure FIRST."""
    env = dict(os.environ, GPULEAK=GPULEAK, OUTPUT=OUTPUT)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), *args,
                        f"a={GPULEAK}", f"b={GPULEAK}"],
                       capture_output=True, text=True, timeout=timeout, env=env)
    check_eq(p.returncode, 0, f"{script} exit status (stderr: {p.stderr[-1500:]})")
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines()[2:4]}
    check_eq(sorted(rows), ["a", "b"], f"a row per binary:\n{p.stdout}")
    for name, cols in rows.items():
        medians = [float(c) for c in cols[1::2]]
        check(len(medians) == figures and all(m > 0 for m in medians),
              f"{name}: every figure measured and positive:\n{p.stdout}")
    check(f"b / a, per rep: {first}" in p.stdout, f"the ratio line:\n{p.stdout}")
    return p.stdout


def test_driver_cost_smoke(tmp):
    """bench/driver_cost.py reads the programs' run time of a few hundred pairs, two
    binaries side by side (here the same one twice); nothing asserts a speed."""
    # call_enter, call_exit, BPF total, load CPU
    check_side_by_side("driver_cost.py", ["--reps", "2", "--pairs", "300"], 4, "BPF total", 120)


def test_gpu_train_smoke(tmp):
    """bench/gpu_train.py's interleaving, with no GPU: torch_train.py --fake steps through
    the libc10_cuda stand-in, watched in turn by nothing, gpuleak between windows and
    gpuleak --tensors full and the recorder's label (no recorder without torch), each
    watched block between two untraced ones (--design aba), full mode against the
    recorder's block, each against its own neighbours; then --merge pools two runs' reps
    and refuses runs of different designs or sync modes."""
    env = dict(os.environ, GPULEAK=GPULEAK,
               FAKE_LIBCUDA=os.path.join(OUTPUT, "fakecuda", "libcuda.so.1"))
    train = os.path.join(ROOT, "bench", "gpu_train.py")
    out = os.path.join(tmp, "aba.json")
    p = subprocess.run([sys.executable, train, "--fake",
                        os.path.join(OUTPUT, "faketorch", "libc10_cuda.so"), "--design", "aba",
                        "--reps", "2", "--steps", "5", "--settle", "2", "--allow-others",
                        "--tensor-window", "100ms", "--phases", "untraced,attach-idle,full,history-alloc",
                        "--json", out], capture_output=True, text=True, timeout=180, env=env)
    check_eq(p.returncode, 0, f"gpu_train.py exit status (stderr: {p.stderr[-1500:]})")
    with open(out) as f:
        res = json.load(f)
    check_eq((res["design"], res["reps"], res["sync"]), ("aba", 2, "auto"),
             "design, reps and sync mode")
    # the stand-in has no autograd thread: no figure of it, nor of main + autograd
    check(not {"autograd_cpu", "train_cpu"} & set(res["step_ms"]["untraced"]),
          f"no autograd figures without autograd threads: {res['step_ms']['untraced']}")
    threads = res["threads_cpu_s"]
    check(threads and max(threads.values()) > 0, f"CPU time by thread name: {threads}")
    # aba: an untraced block first and one after each watched block
    phases = ("untraced", "attach-idle", "full", "history-alloc")
    check_eq([len(res["block_ms"][ph]["wall"]) for ph in phases], [7, 2, 2, 2],
             "blocks measured per phase")
    for ph in phases[1:]:
        check_eq(len(res["overhead_pct"][ph]["wall"]["reps"]), 2, f"{ph}: an overhead a rep")
    # beside each block: the tracer's CPU time where a tracer ran (full mode's, booking
    # 2,800 blocks with their stacks, is more than none), the steal of the training CPUs
    diag = res["block_diag"]
    check_eq([len(diag[ph]) for ph in phases], [7, 2, 2, 2], "diagnostics per block")
    for ph in phases:
        cpu = [d["tracer_cpu_ms"] for d in diag[ph]]
        want_tracer = ph in ("attach-idle", "full")
        check(all((c is not None and c >= 0) == want_tracer for c in cpu),
              f"{ph}: the tracer's CPU time beside its blocks: {cpu}")
        check(all(d["s"] > 0 and d["steal_ms"] >= 0 for d in diag[ph]),
              f"{ph}: block length and steal: {diag[ph]}")
    check(min(d["tracer_cpu_ms"] for d in diag["full"]) > 0,
          f"full mode's tracer used CPU beside its blocks: {diag['full']}")
    # full / recorder per rep: each block against its own neighbours, then divided
    full, rec = (res["overhead_pct"][ph]["wall"]["reps"] for ph in ("full", "history-alloc"))
    want = [(1 + f / 100) / (1 + r / 100) for f, r in zip(full, rec)]
    got = res["full_over_history_alloc"]["wall"]["reps"]
    check(len(got) == 2 and all(abs(g - w) < 1e-9 for g, w in zip(got, want)),
          f"full / history-alloc per rep: {got}, from the overheads {want}")
    check("full_over_history" not in res, "no ratio to a recorder phase that did not run")
    # the watched blocks were watched as named: each attach tracer's report has the
    # phase's tensor mode; full mode's are complete and lost nothing, and booked every
    # tensor block of its block's 7 steps (400 pairs a step) and the free of each block
    # it booked (the free probe goes in first: frees of blocks from before it are extra;
    # the stop may cut one pair). A window's first burst may outrun the reader on two busy
    # CPUs (test_gpu_sh_smoke): attach-idle's are complete or count what they lost.
    booked = res["tracer_booked"]
    check_eq(sorted(booked), ["attach-idle", "full"], "phases with a tracer's report")
    for ph, mode in (("attach-idle", "windowed"), ("full", "full")):
        seen = booked[ph]
        check_eq(len(seen), 2, f"{ph}: a report a block")
        check_eq([s["tensor_modes"] for s in seen], [[mode]] * 2, f"{ph}: tensor mode")
    check(all(s["report"] and (s["complete"] or s["lost_events"] > 0)
              for s in booked["attach-idle"]),
          f"attach-idle: reports, complete or counting what they lost: {booked['attach-idle']}")
    check(all(s["report"] and s["complete"] and s["lost_events"] == 0 for s in booked["full"]),
          f"full: complete reports that lost nothing: {booked['full']}")
    pairs = [(s["calls"].get("pytorch_malloc", 0), s["calls"].get("pytorch_free", 0))
             for s in booked["full"]]
    check(all(m >= 400 * (5 + 2) and m - f <= 1 for m, f in pairs),
          f"full mode booked every tensor block of the 7 steps, and their frees: {pairs}")
    p = subprocess.run([sys.executable, train, "--merge", out, out], capture_output=True,
                       text=True, timeout=60)
    check_eq(p.returncode, 0, f"--merge exit status (stderr: {p.stderr[-1500:]})")
    check("torch_train: 4 reps" in p.stdout, f"the merged reps:\n{p.stdout}")
    # runs that differ in their design or in their sync mode are not pooled
    for key, value, refusal in (("design", "rep", "different models, designs"),
                                ("sync", "blocking", "sync modes")):
        with open(out) as f:
            other = dict(json.load(f), **{key: value})
        path = os.path.join(tmp, f"{key}.json")
        with open(path, "w") as f:
            json.dump(other, f)
        p = subprocess.run([sys.executable, train, "--merge", out, path],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and refusal in p.stderr,
              f"runs with {key} {value!r} and {res[key]!r} are not pooled: "
              f"{p.returncode} {p.stderr}")
    p = subprocess.run([sys.executable, train, "--fake", "x", "--blocking-sync"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--blocking-sync needs a GPU" in p.stderr,
          f"--blocking-sync without a GPU is refused: {p.returncode} {p.stderr}")


def test_gpu_sh_smoke(tmp):
    """bench/gpu.sh passes its model, phases and options to gpu_train.py (here through
    --fake, with Debian's CPU PyTorch as the interpreter it wants), writes the model's JSON
    into OUTDIR, and refuses an unknown option with status 2 before it looks for a GPU."""
    fake_cuda = os.path.join(OUTPUT, "fakecuda", "libcuda.so.1")
    env = dict(os.environ, GPULEAK=GPULEAK, LIBCUDA=fake_cuda, FAKE_LIBCUDA=fake_cuda,
               PYTHON="/usr/bin/python3", REPS_SMALL="2")
    gpu_sh = os.path.join(ROOT, "bench", "gpu.sh")
    out = os.path.join(tmp, "out")
    p = subprocess.run(["sh", gpu_sh, "--small", "--phases", "untraced,attach-idle", out, "--",
                        "--fake", os.path.join(OUTPUT, "faketorch", "libc10_cuda.so"),
                        "--allow-others", "--steps", "3", "--settle", "1",
                        "--tensor-window", "100ms"],
                       capture_output=True, text=True, timeout=120, env=env)
    check_eq(p.returncode, 0, f"gpu.sh exit status (stderr: {p.stderr[-1500:]})")
    check_eq(os.listdir(out), ["train_small.json"], "gpu.sh's OUTDIR")
    with open(os.path.join(out, "train_small.json")) as f:
        res = json.load(f)
    check_eq((res["model"], res["design"], res["reps"], res["steps_per_block"]),
             ("torch_train", "aba", 2, 3), "model, design, reps and block size")
    check_eq(sorted(res["step_ms"]), ["attach-idle", "untraced"], "the phases asked for")
    # a report per rep, each complete or naming what it lost: a burst of the stand-in's
    # tensor probes can outrun the reader on two busy CPUs, and the JSON must say so
    booked = res["tracer_booked"]["attach-idle"]
    check(len(booked) == 2 and all(s["report"] and s["calls"]["pytorch_malloc"] > 0 and
                                   (s["complete"] or s["lost_events"] > 0) for s in booked),
          f"attach's reports: {res['tracer_booked']}")
    p = subprocess.run(["sh", gpu_sh, "--no-such-option"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, LIBCUDA="/nonexistent"))
    check(p.returncode == 2 and "unknown option --no-such-option" in p.stderr,
          f"an unknown option: {p.returncode} {p.stderr}")


def test_tensor_cost_smoke(tmp):
    """bench/tensor_cost.py reads the tensor programs' run time per call, two binaries
    side by side on one stand-in training process (here the same one twice, a third of
    the pairs on a native worker thread, Python frames 7 deep), and the stack cache's
    misses and ring bytes; nothing asserts a speed."""
    # torch_malloc, torch_free
    out = check_side_by_side("tensor_cost.py", ["--reps", "2", "--steps", "5", "--settle", "2",
                                                "--worker", "133", "--depth", "3"], 2,
                             "torch_malloc", 180)
    m = re.search(r"per stack record: a ([0-9.]+) % ([0-9]+) B, b ([0-9.]+) % ([0-9]+) B", out)
    check(m, f"the stack cache's line:\n{out}")
    for share, ring in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
        check(0 <= float(share) <= 100 and int(ring) > 0, f"missed {share} %, {ring} B:\n{out}")


def test_thread_counters(tmp):
    """torch_train.py's counts of the main thread's work: a step's count is the
    difference of two reads, none where a counter was multiplexed (not running for the
    whole step); counters open where the machine has a CPU PMU and count a loop's
    instructions, and where it has none, every step logs "- -" (gpu_train.py then
    reports no count figures)."""
    code = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from torch_train import ThreadCounters as T
out = {"none": T.delta(None, None),
       "two": T.delta([(10, 5, 5), (20, 5, 5)], [(110, 9, 9), (320, 9, 9)]),
       "multiplexed": T.delta([(10, 5, 5), (20, 5, 5)], [(110, 9, 8), (320, 9, 9)])}
c = T()
out["open"] = bool(c.fds)
if c.fds:
    before = c.read()
    x = sum(range(200000))
    out["loop"] = T.delta(before, c.read())
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "bench")],
                       capture_output=True, text=True, timeout=120)
    check_eq(p.returncode, 0, f"exit status (stderr: {p.stderr[-1500:]})")
    out = json.loads(p.stdout)
    check_eq((out["none"], out["two"], out["multiplexed"]), ("- -", "100 300", "- -"),
             "step counts from two reads")
    has_pmu = os.path.exists("/sys/bus/event_source/devices/cpu") or os.path.exists(
        "/sys/bus/event_source/devices/cpu_core")
    check_eq(out["open"], has_pmu, "counters open exactly where the machine has a CPU PMU")
    if out["open"]:
        instructions, cycles = (int(v) for v in out["loop"].split())
        check(instructions > 200000 and cycles > 0, f"a loop's counts: {out['loop']}")


def test_thread_times(tmp):
    """torch_train.py's CPU time of PyTorch's autograd threads, read from the main
    thread through each thread's CPU clock: a thread named pt_autograd_0 that worked
    for a while is counted to within a millisecond of what it read of its own clock;
    with no such thread the step logs "-"; the lines by thread name at quit carry its
    time too."""
    code = r"""
import ctypes, json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from torch_train import ThreadTimes as T
out = {}
t = T()
out["none"] = T.delta(t.autograd(), t.autograd())
done, stop, own = threading.Event(), threading.Event(), []
def work():
    ctypes.CDLL(None).prctl(15, b"pt_autograd_0", 0, 0, 0)  # PR_SET_NAME
    ready.set()
    go.wait()
    x, t0 = 0, time.thread_time_ns()
    while time.thread_time_ns() - t0 < 200_000_000:
        x += 1
    own.append(time.thread_time_ns() - t0)
    done.set()
    stop.wait()
ready, go = threading.Event(), threading.Event()
th = threading.Thread(target=work)
th.start()
ready.wait()
t.scan()
before = t.autograd()
go.set()
done.wait()
out["counted"] = int(T.delta(before, t.autograd()))
out["own"] = own[0]
out["lines"] = t.since_start()
stop.set()
th.join()
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "bench")],
                       capture_output=True, text=True, timeout=120)
    check_eq(p.returncode, 0, f"exit status (stderr: {p.stderr[-1500:]})")
    out = json.loads(p.stdout)
    check_eq(out["none"], "-", "a step with no autograd thread")
    check(out["own"] >= 200_000_000 and abs(out["counted"] - out["own"]) < 1_000_000,
          f"the autograd thread's time: counted {out['counted']} ns, its own clock "
          f"{out['own']} ns")
    lines = {ln.split()[2]: int(ln.split()[3]) for ln in out["lines"].splitlines()}
    check("pt_autograd_0" in lines and lines["pt_autograd_0"] >= out["own"],
          f"the lines by thread name: {out['lines']}")
