# SPDX-License-Identifier: BSD-2-Clause
"""The kernel hook's cost to processes gpuleak does not trace: bench/mmap_loop maps and
unmaps a file, anonymous memory and mprotects a page, untraced, beside `gpuleak attach PID`
(another process: the hook's early return) and beside `gpuleak attach -a` (every process a
target: the hook reads the mapped file's name), interleaved; ns per operation pair.
"""
import os
import tempfile

from benchlib import ALLOC_LOOP, BENCH_OUT, GPULEAK, Proc, Stats, kv, run, scan_lib

MMAP_LOOP = os.path.join(BENCH_OUT, "mmap_loop")
LOADS = ("file_ns", "anon_ns", "prot_ns")


def _tracer(mode, tmp, lib, target_pid):
    if mode == "untraced":
        return None
    if mode == "attach PID":
        gl = Proc([GPULEAK, "attach", "-i", "0", str(target_pid)], tmp, "gpuleak")
        gl.wait_for(rf"attached to PID {target_pid}", 60)
    else:
        gl = Proc([GPULEAK, "attach", "-a", "-i", "0"], tmp, "gpuleak")
        gl.wait_for(r"tracing every process", 60)
    return gl


def hooks(ops, reps, log):
    """{mode: {load: Stats dict}} and the added ns per pair of each traced mode."""
    modes = ["untraced", "attach PID", "attach -a"]
    samples = {m: {k: [] for k in LOADS} for m in modes}
    lib = scan_lib()  # a libcuda.so.1 for attach to find in the target
    with tempfile.TemporaryDirectory(prefix="gpuleak-bench-") as tmp:
        target = Proc([ALLOC_LOOP, "--lib", lib, "--wait", "--pairs", "1"], tmp, "target",
                      stdin=True)
        try:
            target.wait_for(r"ready \d+", 30, stream="stdout")
            for r in range(reps):
                k = r % len(modes)
                for mode in modes[k:] + modes[:k]:
                    gl = _tracer(mode, tmp, lib, target.pid)
                    try:
                        v = kv(run([MMAP_LOOP, "--ops", str(ops)], 120), LOADS)
                    finally:
                        if gl:
                            gl.stop()
                    for key in LOADS:
                        samples[mode][key].append(v[key])
                log(f"hooks rep {r + 1}/{reps}: " + ", ".join(
                    f"{m} {samples[m]['file_ns'][-1]:.0f}" for m in modes))
        finally:
            target.kill()
    res = {"ops": ops, "reps": reps,
           "ns_per_pair": {m: {k: Stats(v).as_dict() for k, v in d.items()}
                           for m, d in samples.items()},
           "added_ns": {}}
    for m in modes[1:]:
        res["added_ns"][m] = {
            k: Stats([t - u for t, u in zip(samples[m][k], samples["untraced"][k])]).as_dict()
            for k in LOADS}
    return res
