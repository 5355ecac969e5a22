# SPDX-License-Identifier: BSD-2-Clause
"""Load: 16 threads allocating and freeing every family as fast as the stand-in goes.
The books equal the ground truth to the byte, or the lost-event counters are non-zero
and the report says the figures are incomplete; the kernel's own counters stay exact
either way. Both outcomes are produced and checked: silent divergence is the failure."""
import os

from harness import SAN, WORKLOADS, Tracer, check, check_eq, process

CLASSES = ("device", "managed", "host_pinned")


def _load(tmp, seconds, *tracer_args):
    truth_path = os.path.join(tmp, "load.json")
    tr = Tracer(["run", "-i", "0", *tracer_args, "--", os.path.join(WORKLOADS, "wl_load"),
                 "--no-wait", "--threads", "16", "--iters", str(seconds), "--truth",
                 truth_path], tmp)
    check_eq(tr.wait(timeout=seconds + 60), 0, "gpuleak exit status")
    import json
    truth = json.load(open(truth_path))
    rep = tr.report()
    return truth, rep, process(rep, truth["pid"]), tr


def _kernel_exact(p, truth):
    for cls in CLASSES:
        check_eq(p["bpf"][f"{cls}_bytes"], truth[f"{cls}_bytes"], f"BPF's {cls}_bytes")
    check_eq(p["bpf"]["outstanding_allocs"], truth["outstanding_allocs"], "BPF's allocations")


def test_sixteen_threads_for_a_minute(tmp):
    """A minute (20 s against the ASan build, whose pass repeats the same paths)."""
    truth, rep, p, tr = _load(tmp, 20 if SAN else 60)
    check(truth["load_calls"] > 100000, f"load made {truth['load_calls']} calls")
    _kernel_exact(p, truth)
    if rep["lost_events"] == 0:
        for cls in CLASSES:
            check_eq(p[f"{cls}_bytes"], truth[f"{cls}_bytes"], f"{cls}_bytes")
        check_eq(p["outstanding_allocs"], truth["outstanding_allocs"], "outstanding_allocs")
        check(p["consistent"] and rep["complete"], "nothing lost, books agree")
    else:
        check_eq(rep["complete"], False, "losses make the report incomplete")
        check("incomplete" in tr.stdout(), "and the text says so")


def test_undersized_ring_buffer_is_flagged(tmp):
    truth, rep, p, tr = _load(tmp, 3, "--ringbuf-size", "4096")
    check(rep["lost_events"] > 0, "a 4 KiB ring buffer drops records under this load")
    check_eq(rep["lost_events"], rep["stats"]["lost_stack_records"] +
             rep["stats"]["lost_call_records"] + rep["stats"]["lost_process_records"],
             "drops are counted per record type")
    _kernel_exact(p, truth)
    check_eq(p["consistent"], False, "user space's books diverge")
    check_eq(rep["complete"], False, "the report says the figures are incomplete")
    check("attributed" in p, "the stacks' partial sum is reported apart")
    for cls in CLASSES:
        check_eq(p[f"{cls}_bytes"], truth[f"{cls}_bytes"],
                 f"{cls}_bytes are the kernel's exact figure despite the losses")
    check("events were lost" in tr.stdout() and "events were lost" in tr.stderr(),
          "text and stderr both warn")
