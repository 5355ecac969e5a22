# SPDX-License-Identifier: BSD-2-Clause
"""Load: 16 threads allocating and freeing every family as fast as the stand-in goes.
The books equal the ground truth to the byte, or the lost-event counters are non-zero
and the report says the figures are incomplete; the kernel's own counters stay exact
either way. Both outcomes are produced and checked: silent divergence is the failure."""
import json
import os
import time

from harness import (SAN, WORKLOADS, Agent, Tracer, Workload, check, check_eq, free_port,
                     process)

CLASSES = ("device", "managed", "host_pinned")


def _load(tmp, seconds, *tracer_args):
    truth_path = os.path.join(tmp, "load.json")
    tr = Tracer(["run", "-i", "0", *tracer_args, "--", os.path.join(WORKLOADS, "wl_load"),
                 "--no-wait", "--threads", "16", "--iters", str(seconds), "--truth",
                 truth_path], tmp)
    check_eq(tr.wait(timeout=seconds + 60), 0, "gpuleak exit status")

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


def _wakeups(pid):
    """{"main" or thread name: voluntary context switches} of the threads of pid."""
    res = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            st = dict(line.split(":", 1) for line in f if ":" in line)
        res["main" if int(tid) == pid else st["Name"].strip()] = \
            int(st["voluntary_ctxt_switches"])
    return res


def test_a_steady_stream_wakes_gpuleak_at_its_polls(tmp):
    """One thread allocating and freeing without a pause: the thread at the ring's mouth
    copies what came every 8 ms and tells the reader, which reads it. Neither wakes the
    other between its polls: a reader that asked the thread to look at each of its
    wakeups set the two reading the ring in turn without a pause (about 1,000 wakeups a
    second each on 2 CPUs, more where each has a CPU of its own), every look moving the
    ring's positions and records between their CPUs and the traced thread's."""
    seconds = 3
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_load"), "--no-wait",
                 "--threads", "1", "--iters", str(seconds + 3), "--truth",
                 os.path.join(tmp, "load.json")], tmp)
    tr.wait_attached()
    time.sleep(1.5)  # the stream under way
    before, t0 = _wakeups(tr.proc.pid), time.monotonic()
    time.sleep(seconds)
    after, t1 = _wakeups(tr.proc.pid), time.monotonic()
    check_eq(tr.wait(timeout=60), 0, "gpuleak exit status")
    check(tr.report()["processes"][0]["alloc_calls"] > 10000, "a stream of calls")
    # the mouth's polls (125 a second) and the reader's one wakeup after each, its own
    # timeouts (10 a second) and the ring's fill on top: 250 a second leaves twice that
    for name in ("gpuleak-ring", "main"):
        rate = (after[name] - before[name]) / (t1 - t0)
        check(rate < 250, f"gpuleak's {name} thread woke {rate:.0f} times a second")


def _peak_kib(pid):
    """The process's peak resident size (VmHWM), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_a_burst_of_new_stacks_waits_in_gpuleaks_memory(tmp):
    """2,500 allocations as fast as the stand-in goes, each from a stack never seen before:
    every record carries a copy of its stack for user space to unwind (5 KB each in the
    ring, the main thread's frames and room for Python's: 13 MB in all), less than the
    ring and the backlog together (16 + 64 MiB). The reader, gpuleak's main thread, shares the workload's CPU at
    nice 19 (with the sanitizers, it is slow enough as it is), so that the burst outpaces
    it whatever this machine's speed: the thread at the
    ring's mouth copies the records out as they come and they wait in the backlog. None is
    lost, the backlog held a burst, never reached its limit, and gpuleak's peak resident
    memory stays under the 128 MiB its ring alone once took."""
    n = 2500
    wl = Workload("wl_many", "--iters", str(n), tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    peak = 0
    try:
        tr.wait_attached()
        if not SAN:  # under the sanitizers the reader is slower than the burst as it is,
            # and a starved one would leave the instrumented mouth behind the ring
            cpu = min(os.sched_getaffinity(wl.pid))
            os.sched_setaffinity(wl.pid, {cpu})
            os.sched_setaffinity(tr.proc.pid, {cpu})  # the main thread's TID is the PID
            os.setpriority(os.PRIO_PROCESS, tr.proc.pid, 19)
        wl.go()
        while not os.path.exists(wl.truth_path) and wl.proc.poll() is None:
            peak = _peak_kib(tr.proc.pid) or peak
            time.sleep(0.05)
        truth = wl.truth()
        os.setpriority(os.PRIO_PROCESS, tr.proc.pid, 0)
        tr.stop()
        peak = _peak_kib(tr.proc.pid) or peak
    finally:
        wl.release()
        wl.wait()
    check_eq(tr.wait(), 0, "gpuleak exit status")
    rep = tr.report()
    p = process(rep, truth["pid"])
    check_eq(rep["lost_events"], 0, "records lost")
    check(rep["complete"], f"complete: {rep.get('incomplete_why')}")
    check_eq(len(p["stacks"]), n, "distinct stacks booked")
    st = rep["stats"]
    check_eq(st["ring_bytes"], 16 << 20, "the kernel's ring with DWARF stacks")
    check(st["stack_record_ring_bytes"] < 64 << 20,
          f"the burst ({st['stack_record_ring_bytes']} B) fits in the backlog")
    check(st["backlog_peak_bytes"] > 1 << 20,
          f"the backlog held {st['backlog_peak_bytes']} B of the burst")
    check_eq(st["backlog_full"], 0, "the backlog never reached its limit")
    check_eq(st["backlog_limit_bytes"], 64 << 20, "the backlog's limit")
    if not SAN:  # the sanitizers' shadow memory is not gpuleak's
        check(0 < peak <= 128 << 10, f"gpuleak's peak resident size {peak} KiB")


def _nice_of_threads(pid):
    """{thread name: nice value} of every thread of pid (field 19 of its stat)."""
    res = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            stat = f.read()
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        res[f"{name}/{tid}"] = int(stat[stat.rindex(")") + 2:].split()[16])
    return res


def test_an_idle_agent_is_light(tmp):
    """serve with nothing to trace: its whole resident size, the kernel's ring mapped
    twice included, stays within 64 MiB (its DaemonSet asks for 128 MiB: the ring and the
    maps are charged to its cgroup too). The one thread that copies records out of the
    ring runs at nice -10, the rest of the agent as it was started."""
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{free_port()}"])
    try:
        agent.wait_serving()
        time.sleep(1)
        peak = _peak_kib(agent.proc.pid)
        nices = _nice_of_threads(agent.proc.pid)
    finally:
        check_eq(agent.stop(), 0, "serve's exit status")
    ring = [n for t, n in nices.items() if t.startswith("gpuleak-ring/")]
    check(ring == [-10] and sorted(nices.values()).count(-10) == 1 and
          all(n in (0, -10) for n in nices.values()),
          f"the thread gpuleak-ring at nice -10, the others at 0: {nices}")
    if not SAN:
        check(peak and peak <= 64 << 10, f"serve's peak resident size {peak} KiB")
    check(peak and peak > 32 << 10, f"{peak} KiB: the ring's two mappings (32 MiB) are in it")
