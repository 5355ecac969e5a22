# SPDX-License-Identifier: BSD-2-Clause
"""Faults: targets and the tracer killed, code that misbehaves inside driver calls,
libraries loaded late, unloaded and copied. Nothing may crash the tracer, nothing may
disturb the target, and no number may be wrong without the report saying so."""
import json
import os
import shutil
import signal
import subprocess
import time

from harness import (FAKECUDA, WORKLOADS, Tracer, Workload, bpf_objects, check, check_books,
                     check_eq, live_link_ids, process, wait_until)

SIZE = 64 * 1024


def _alloc_entries_of(tracer_pid, pid):
    """Entries of the tracer's kernel allocation table that belong to pid: the full slots
    of its front (allocs_fast, an array) and the entries of allocs (a hash map)."""
    def name(map_id):
        out = subprocess.run(["bpftool", "-j", "map", "show", "id", str(map_id)],
                             capture_output=True, timeout=20, check=True)
        return json.loads(out.stdout).get("name")

    def dump(m):
        out = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(m["id"])],
                             capture_output=True, timeout=20, check=True)
        return json.loads(out.stdout or b"[]")

    def u32(raw, at):
        return int.from_bytes(bytes(int(b, 16) for b in raw[at:at + 4]), "little")

    maps = bpf_objects(tracer_pid)["maps"]
    allocs = [m for m in maps if m["type"] == 1 and m["key_size"] == 16 and
              name(m["id"]) == "allocs"]
    fast = [m for m in maps if m["type"] == 2 and m["key_size"] == 4 and
            name(m["id"]) == "allocs_fast"]
    check_eq((len(allocs), len(fast)), (1, 1), "the tracer holds one allocation table")
    total = 0
    for e in dump(allocs[0]):
        key = e.get("key")
        total += (key["tgid"] if isinstance(key, dict) else u32(key, 0)) == pid
    for e in dump(fast[0]):
        v = e.get("value")
        if isinstance(v, dict):  # {"state", "k": {"tgid", ...}, "v"}
            total += v["state"] & 3 == 2 and v["k"]["tgid"] == pid
        else:  # bytes: the state word, then the key's tgid
            total += u32(v, 0) & 3 == 2 and u32(v, 8) == pid
    return total


def _uprobe_links(tracer_pid):
    return [i for i, t in bpf_objects(tracer_pid)["links"].items() if t != "raw_tracepoint"]


def _run_nest(tmp, mode, *args):
    truth_path = os.path.join(tmp, f"nest-{mode}.json")
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_nest"), "--mode", mode,
                 "--no-wait", "--size", str(SIZE), "--truth", truth_path, *args], tmp)
    check_eq(tr.wait(), 0, f"gpuleak run exit status ({mode})")
    return json.load(open(truth_path)), tr.report(), tr


def test_nesting_deeper_than_the_kernel_keeps_return_probes(tmp):
    """70 nested driver calls on one thread: the kernel keeps 64 return probes per task.
    The calls beyond cannot be booked; the counters say how many, the report says the
    figures are incomplete, and everything else stays exact."""
    truth, rep, tr = _run_nest(tmp, "nest", "--depth", "70", "--iters", "8")
    p = process(rep, truth["pid"])
    missed = rep["stats"]["nested_overflow"]
    check_eq(missed, 70 - 64, "calls beyond 64 nested return probes are counted")
    check_eq(p["device_bytes"], truth["device_bytes"] - missed * SIZE,
             "everything else is booked exactly")
    check_eq(p["outstanding_allocs"], truth["outstanding_allocs"] - missed, "allocations")
    check(p["consistent"], "user space agrees with BPF")
    check_eq(rep["complete"], False, "the report says it is incomplete")
    check("incomplete" in tr.stdout() or "incomplete" in tr.stderr(),
          "the text report says so too")


def test_longjmp_out_of_the_driver(tmp):
    """A callback longjmps out of a driver call: entry seen, return never. The dead entry
    is dropped at the next call on that thread; later calls stay exact."""
    truth, rep, _ = _run_nest(tmp, "longjmp", "--iters", "8")
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check(rep["stats"]["stale_entries"] >= 7, f"dead entries counted: {rep['stats']}")
    check_eq(rep["stats"]["unpaired_returns"], 0, "no return is left without its entry")
    check_eq(rep["complete"], True, "nothing was lost")


def test_thread_exits_inside_a_driver_call(tmp):
    truth, rep, _ = _run_nest(tmp, "thread-exit", "--iters", "8")
    p = process(rep, truth["pid"])
    check_books(rep, p, truth)
    check_eq(rep["complete"], True, "nothing was lost")


def test_target_killed_inside_a_call_with_memory_outstanding(tmp):
    """A target is SIGKILLed while one thread is inside a traced call and memory is
    outstanding: its books are dropped, the kernel side forgets it, the tracer goes on
    exactly with its other target."""
    victim = Workload("wl_nest", "--mode", "block", "--iters", "4", "--size", str(SIZE),
                      tmp=tmp, hold=True)
    other = Workload("wl_basic", tmp=tmp, hold=True)
    victim.wait_ready()
    other.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(victim.pid), str(other.pid)], tmp)
    tr.wait_attached(count=2)
    victim.go()
    victim.truth()
    line = victim.proc.stdout.readline().decode().strip()
    check_eq(line, "blocked", "a thread of the victim is inside cuMemAlloc_v2")
    check(_alloc_entries_of(tr.proc.pid, victim.pid) > 0,
          "the kernel's books hold the victim's memory")
    victim.kill(signal.SIGKILL)
    victim.wait()
    wait_until(lambda: "exited" in tr.stderr(), 10, "gpuleak to see the victim exit")
    check_eq(_alloc_entries_of(tr.proc.pid, victim.pid), 0,
             "the kernel's books of the victim are dropped")
    other.go()
    truth = other.truth()
    tr.stop()
    other.release()
    other.wait()
    rep = tr.report()
    check_books(rep, process(rep, other.pid), truth)
    v = process(rep, victim.pid)
    check_eq(v["state"], "exited", "the victim is reported as exited")
    check_eq(v["device_bytes"], 4 * SIZE, "with what it held when it died")


def test_tracer_killed_leaves_no_probe_and_target_unaffected(tmp):
    wl = Workload("wl_leak", "--iters", "0", "--interval-ms", "10", tmp=tmp)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    links = set(bpf_objects(tr.proc.pid)["links"])
    check(_uprobe_links(tr.proc.pid), "gpuleak's uprobes are in the kernel")
    check(links <= live_link_ids(), "the kernel lists them")
    time.sleep(0.3)
    tr.proc.send_signal(signal.SIGKILL)
    tr.wait()
    wait_until(lambda: not links & live_link_ids(), 10, "the kernel to drop every link")
    time.sleep(0.3)
    check(wl.proc.poll() is None, "the target keeps running")
    wl.kill(signal.SIGTERM)
    check_eq(wl.wait(), 0, "the target ends normally")
    truth = wl.truth()
    check(truth["alloc_calls"] > 20, "it kept allocating after the tracer died")


def test_sigterm_flushes_the_report_and_detaches(tmp):
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    tr.wait_attached()
    links = set(bpf_objects(tr.proc.pid)["links"])
    wl.go()
    truth = wl.truth()
    check_eq(tr.stop(signal.SIGTERM), 0, "exit status after SIGTERM")
    check(not links & live_link_ids(), "probes detached")
    wl.release()
    wl.wait()
    rep = tr.report()
    check_books(rep, process(rep, wl.pid), truth)


def test_dlopen_after_attach_reload_and_a_second_copy(tmp):
    """run mode: the program loads a copy of libcuda (another inode) with dlopen after
    gpuleak attached; gpuleak sees it being mapped and attaches before the program
    allocates; the library is unloaded and loaded again; a second program on the
    original library is traced in the same run (-a)."""
    copy_dir = os.path.join(tmp, "copy")
    os.makedirs(copy_dir)
    copy = os.path.join(copy_dir, "libcuda.so.1")
    shutil.copy(FAKECUDA, copy)
    check(os.stat(copy).st_ino != os.stat(FAKECUDA).st_ino, "the copy is another inode")
    tr = Tracer(["attach", "-a", "-i", "0"], tmp)
    time.sleep(0.5)
    dl = Workload("wl_dlopen", "--lib", copy, tmp=tmp, hold=True)
    dl.wait_ready()
    wait_until(lambda: f"functions in {copy}" in tr.stderr(), 5, "the copy to be attached")
    basic = Workload("wl_basic", tmp=tmp, hold=True)
    basic.wait_ready()
    wait_until(lambda: f"functions in {FAKECUDA}" in tr.stderr() or
               f"functions in {os.path.realpath(FAKECUDA)}" in tr.stderr(), 5,
               "the original library to be attached")
    dl.go()
    basic.go()
    t_dl, t_basic = dl.truth(), basic.truth()
    tr.stop()
    for w in (dl, basic):
        w.release()
        w.wait()
    rep = tr.report()
    check_books(rep, process(rep, dl.pid), t_dl)
    check_books(rep, process(rep, basic.pid), t_basic)
    check_eq(t_dl["loads"], 2, "the workload loaded the library twice")
