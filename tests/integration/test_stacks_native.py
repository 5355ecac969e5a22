# SPDX-License-Identifier: BSD-2-Clause
"""Native stacks through code built without frame pointers, as the CUDA and PyTorch
libraries are: complete with --stacks dwarf (CFI unwinding of a stack copy in user
space), truncated with --stacks fp. Dwarf mode keeps the books exact, and a stack deeper
than --stack-bytes is cut cleanly: a correct innermost part, no made-up frames."""
import os
import re

from harness import (SAN_RINGBUF, Tracer, Workload, attach_workload, check, check_books,
                     check_eq, check_sites, finish_attached, process, stop_attached)

SIZE = 1 << 20
KEPT = 3  # wl_nofp keeps 3 allocations, then allocates and frees --iters more

# innermost first, as wl_nofp.c calls them
LIBS = [("cuMemAlloc_v2", "libcuda.so.1"), ("nofp_inner_site", "libnofp_inner.so"),
        ("nofp_inner_call", "libnofp_inner.so"), ("nofp_outer_step", "libnofp_outer.so"),
        ("nofp_outer_entry", "libnofp_outer.so")]


def expected(depth):
    """wl_nofp's stack at --depth: nofp_deep runs depth + 1 times."""
    return [f for f, _ in LIBS] + ["nofp_deep"] * (depth + 1) + ["nofp_phase", "main"]


def trace_nofp(tmp, mode, *args, tracer_args=()):
    """wl_nofp under gpuleak attach --stacks mode; held alive until the report is taken
    (its maps must stay readable). Returns (truth, process report, tracer)."""
    wl = Workload("wl_nofp", *args, tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--stacks", mode, *tracer_args, str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    return truth, p, tr


def kept_stack(p):
    """The stack holding wl_nofp's kept allocations (the only one with memory)."""
    held = [s for s in p["stacks"] if s["outstanding_bytes"]]
    check_eq(len(held), 1, f"stacks holding memory: {[names(s) for s in held]}")
    check_eq(held[0]["outstanding_bytes"], KEPT * SIZE, "bytes held by the kept stack")
    return held[0]


def names(stack):
    return [f.get("function") for f in stack["frames"]]


def test_dwarf_stack_is_complete_without_frame_pointers(tmp):
    truth, p, _ = trace_nofp(tmp, "dwarf", "--depth", "2")
    st = kept_stack(p)
    want = expected(2)
    got = names(st)
    check_eq(got[:len(want)], want, "frames innermost first, up to main")
    for i, (fn, lib) in enumerate(LIBS):
        check_eq(os.path.basename(st["frames"][i]["module"]), lib, f"module of {fn}")
    # source lines from the workloads' DWARF line tables: each caller's line is its call
    for i, f in enumerate(st["frames"][1:len(want)], 1):
        callee = st["frames"][i - 1]["function"]
        check(f.get("file") and f.get("line"), f"{f['function']} has a source line: {f}")
        with open(f["file"]) as src:
            text = src.read().splitlines()[f["line"] - 1]
        check(callee in text, f"{f['function']} at {os.path.basename(f['file'])}:{f['line']} "
              f"calls {callee}: {text.strip()!r}")
    # the keeping loop and the alloc/free loop call from two places in nofp_phase:
    # two stacks, each with its own calls, however often the unwinding was reused
    check_eq(st["allocs"], KEPT, "allocations made at the kept call site")
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")


def test_fp_stack_is_truncated_without_frame_pointers(tmp):
    _, p, _ = trace_nofp(tmp, "fp", "--depth", "2")
    got = names(kept_stack(p))
    check_eq(got[:2], ["cuMemAlloc_v2", "nofp_inner_site"],
             "the driver call and its caller (the return address at sp)")
    check("main" not in got and got[:len(expected(2))] != expected(2),
          f"a frame-pointer walk cannot cross code without frame pointers: {got}")


def test_dwarf_deeper_than_stack_bytes_is_cut_cleanly(tmp):
    """40 frames of 560 bytes do not fit in a 4 KiB copy: the stack ends where the copy
    ends, every frame in it right. With 32 KiB it is whole."""
    _, p, _ = trace_nofp(tmp, "dwarf", "--depth", "40", "--iters", "20",
                         tracer_args=("--stack-bytes", "4096"))
    got = names(kept_stack(p))
    lib_part = [f for f, _ in LIBS]
    check_eq(got[:len(lib_part)], lib_part, "the innermost frames")
    rest = got[len(lib_part):]
    check(rest and all(f == "nofp_deep" for f in rest),
          f"only nofp_deep frames follow, at least one: {rest}")
    check(len(rest) < 41, f"the stack is cut: {len(rest)} nofp_deep frames of 41")

    _, p, _ = trace_nofp(tmp, "dwarf", "--depth", "40", "--iters", "20",
                         tracer_args=("--stack-bytes", "32k"))
    want = expected(40)
    check_eq(names(kept_stack(p))[:len(want)], want, "the whole stack in a 32 KiB copy")


def test_dwarf_unwinds_each_stack_once(tmp):
    """300 allocations from two call sites: two unwindings, the rest from the cache."""
    truth, p, tr = trace_nofp(tmp, "dwarf", "--iters", "300", tracer_args=("-v",))
    m = re.search(r"unwinder: (\d+) DWARF stacks: (\d+) from the cache .*?(\d+) unwound "
                  r"\(.*?, (\d+) not cacheable\)", tr.stderr())
    check(m, f"the unwinder's statistics are logged with -v:\n{tr.stderr()}")
    stacks, hits, misses, uncached = (int(x) for x in m.groups())
    check_eq(stacks, truth["alloc_calls"], "stacks unwound")
    check(misses <= 4, f"{misses} unwindings for 2 call sites")
    check_eq(uncached, 0, "unwindings whose dependencies were not worked out")
    check_eq(hits + misses, stacks, "every other stack came from the cache")


def trace_dwarf(tmp, name, *args, tracer_args=()):
    """A core workload under --stacks dwarf: (truth, report, process report)."""
    wl, tr = attach_workload(tmp, name, *args, tracer_args=("--stacks", "dwarf", *tracer_args))
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    return truth, rep, p


# The ground-truth checks of test_core.py, with DWARF stacks.

def test_dwarf_books_exact_every_family(tmp):
    truth, _, p = trace_dwarf(tmp, "wl_basic")
    check_sites(p, truth)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")
    check_eq(p["free_calls"], truth["free_calls"], "free_calls")

    truth, _, p = trace_dwarf(tmp, "wl_vmm")
    check_sites(p, truth)
    check_eq(p["address_space_bytes"], truth["reserved_bytes"], "address space reserved")

    truth, _, p = trace_dwarf(tmp, "wl_oom")
    check_eq(p["oom_failures"], truth["oom_failures"], "oom_failures")
    check_eq(p["failures"], truth["oom_failures"] + truth["other_failures"], "failures")
    check_eq(p["failed_frees"], truth["free_failures"], "failed frees")
    ooms = [f for f in p["failures_list"] if f["error"] == "CUDA_ERROR_OUT_OF_MEMORY"]
    check(ooms and ooms[0]["frames"][0]["function"].startswith("cuMem"),
          "an OOM keeps the failing call's stack")


def test_dwarf_books_exact_threads(tmp):
    truth, rep, p = trace_dwarf(tmp, "wl_threads", "--threads", "8", "--iters", "3000",
                                tracer_args=SAN_RINGBUF)
    check_sites(p, truth)
    check_eq(p["alloc_calls"], truth["alloc_calls"], "alloc_calls")
    check_eq(p["free_calls"], truth["free_calls"], "free_calls")
    check_eq(rep["stats"]["lost_call_records"] + rep["stats"]["lost_stack_records"], 0,
             "ring-buffer records lost")


def test_dwarf_books_exact_context_and_preattach(tmp):
    truth, rep, p = trace_dwarf(tmp, "wl_ctx")
    check_eq(p["context_dropped_bytes"], truth["ctx_dropped_bytes"], "context_dropped_bytes")
    truth, rep, p = trace_dwarf(tmp, "wl_preattach")
    check_eq(rep["unmatched_frees"], truth["unmatched_frees"], "top-level unmatched_frees")


def test_dwarf_through_deleted_libraries(tmp):
    """Libraries deleted after they were loaded (an upgrade under a running job) are
    read through the process's own mappings: the stack is still complete."""
    import shutil
    from harness import OUTPUT, WORKLOADS
    copy = os.path.join(tmp, "workloads")
    os.mkdir(copy)
    os.symlink(os.path.join(OUTPUT, "fakecuda"), os.path.join(tmp, "fakecuda"))
    for f in ("wl_nofp", "libnofp_outer.so", "libnofp_inner.so"):
        shutil.copy2(os.path.join(WORKLOADS, f), copy)
    wl = Workload(os.path.join(copy, "wl_nofp"), "--depth", "1", tmp=tmp, hold=True)
    wl.wait_ready()
    for f in ("wl_nofp", "libnofp_outer.so", "libnofp_inner.so"):
        os.unlink(os.path.join(copy, f))
    tr = Tracer(["attach", "-i", "0", "--stacks", "dwarf", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    truth = stop_attached(wl, tr)
    rep = tr.report()
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    want = expected(1)
    check_eq(names(kept_stack(p))[:len(want)], want, "frames through deleted files")


def stack_table(p):
    """Every stack of a process report: (frames, outstanding bytes and allocations, calls)."""
    return sorted((tuple((f.get("function"), f.get("line")) for f in s["frames"]),
                   s["outstanding_bytes"], s["outstanding_allocs"], s["allocs"], s["frees"])
                  for s in p["stacks"])


def test_dwarf_stack_cache_holds_six_sites_of_one_key(tmp):
    """Six call sites of one function, in turn: six stacks under one key of BPF's stack
    cache (one ip, sp and word at sp), more than a key has ways for shapes, that differ
    deeper, in the return address into the function, and unwind the same way: one shape,
    and six stacks under it, found by their words. Once the tracer has caught up (the
    workload's pause after the first twelve), every stack is sent by id, not copied (with
    a way per stack, two sites in six would be copied); each site's stack is exact, and
    the books are the same as with every stack copied."""
    n, size = 120, 1 << 16
    args = ("--spread", str(n), "--iters", "0", "--size", str(size))
    tables = []
    for extra in ((), ("--no-stack-cache",)):
        truth, p, tr = trace_nofp(tmp, "dwarf", *args, tracer_args=("--top", "0", *extra))
        st = tr.report()["stats"]
        sites = [s for s in p["stacks"] if "nofp_spread" in names(s)]
        check_eq(len(sites), 6, f"stacks through nofp_spread: {[names(s) for s in sites]}")
        for s in sites:
            check_eq(s["outstanding_allocs"], n // 6, "allocations held by each site")
            check_eq(s["outstanding_bytes"], n // 6 * size, "bytes held by each site")
        if not extra:
            check(st["stack_cache_hits"] >= n - 12, f"every site by id after the pause: {st}")
        tables.append(stack_table(p))
    check_eq(tables[0], tables[1], "every stack, with the cache and without")


def test_dwarf_stack_cache_holds_a_thousand_paths_to_one_call(tmp):
    """One call reached by a thousand paths at one depth (wl_many: a recursion that
    spells the path in binary), five turns of them: a thousand stacks under one key of
    BPF's stack cache and one shape. Once the tracer has caught up with the first turn,
    the other four are sent by id, not copied (a key's four ways held four stacks of a
    thousand before the shapes: almost every record was copied and unwound again). The
    books are exact: each stack holds its five allocations, nothing is lost."""
    stacks, turns, size = 1000, 5, 4096
    wl = Workload("wl_many", "--iters", str(stacks * turns), "--stacks", str(stacks),
                  "--pause", "1500", "--size", str(size), tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--top", "0", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_eq(rep["lost_events"], 0, "records lost")
    check(rep["complete"], f"complete: {rep.get('incomplete_why')}")
    check_eq(len(p["stacks"]), stacks, "distinct stacks booked")
    for s in p["stacks"]:
        check_eq((s["outstanding_allocs"], s["outstanding_bytes"]), (turns, turns * size),
                 f"allocations and bytes of one stack: {names(s)}")
    st = rep["stats"]
    check(st["stack_cache_hits"] >= (turns - 1) * stacks * 9 // 10,
          f"the later turns by id: {st['stack_cache_hits']} of {(turns - 1) * stacks} "
          f"({st['stack_cache_misses']} misses)")


def test_dwarf_main_thread_copy_ends_at_its_first_frame(tmp):
    """Above the main thread's first frame lie its arguments, its environment and a random
    gap of up to 8 KiB: no unwinding reads them, and a copy of them costs the traced call
    and the ring. With a 24 KiB environment each copy would be the whole 16 KiB asked for;
    it ends at the first frame, a few hundred bytes past it (wl_many's 20 frames: a
    record of 5 KB in the ring, room for Python's frames included), and the stack is
    still whole, main and the C library's start included."""
    n = 200
    env = dict(os.environ, GPULEAK_TEST_PADDING="x" * (24 << 10))
    wl = Workload("wl_many", "--iters", str(n), tmp=tmp, hold=True, env=env)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--top", "0", "--full-stacks", str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    st = rep["stats"]
    check_eq(st["stack_records"], n, "stack records")
    per = st["stack_record_ring_bytes"] // st["stack_records"]
    check(per < 8 << 10, f"{per} ring bytes a stack record: the frames, not the environment")
    for s in p["stacks"]:
        fr = names(s)
        check("main" in fr and fr[-1] == "_start", f"the stack reaches _start: {fr}")


def test_dwarf_stack_cache_holds_both_sites_of_one_key(tmp):
    """Two call sites of one function: at the driver call their stacks have the same sp
    and the same words near it, and differ deeper, in the return address into the
    caller. BPF's stack cache keys on (ip, sp, the word at sp), holds an entry for each
    (ways of one key) and checks the words the unwinding read: once both are known,
    every switch from one site to the other is still sent by id; each site's stack is
    exact, and the books are the same as with every stack copied."""
    alt, size = 160, 1 << 16
    args = ("--alternate", str(alt), "--iters", "0", "--size", str(size))
    tables = []
    for extra in ((), ("--no-stack-cache",)):
        truth, p, tr = trace_nofp(tmp, "dwarf", *args, tracer_args=("--top", "0", *extra))
        st = tr.report()["stats"]
        sites = [s for s in p["stacks"] if "nofp_alternate" in names(s)]
        check_eq(len(sites), 2, f"stacks through nofp_alternate: {[names(s) for s in sites]}")
        for s in sites:
            f = next(f for f in s["frames"] if f.get("function") == "nofp_alternate")
            with open(f["file"]) as src:
                line = src.read().splitlines()[f["line"] - 1]
            kept = "/* kept */" in line
            check(kept or "/* mostly freed */" in line,
                  f"nofp_alternate:{f['line']} is a call: {line}")
            want = alt // 2 if kept else alt // 16  # the other keeps one in each run of 8
            check_eq(s["allocs"], alt // 2, f"allocations made at the {'kept' if kept else 'other'} "
                     f"site")
            check_eq(s["outstanding_allocs"], want,
                     f"allocations held by the {'kept' if kept else 'other'} site")
            check_eq(s["outstanding_bytes"], want * size,
                     f"bytes held by the {'kept' if kept else 'other'} site")
        if extra:
            check_eq(st["stack_cache_hits"] + st["stack_cache_misses"], 0,
                     "no stack cache with --no-stack-cache")
        else:
            # after the first 16 (the tracer catching up), both sites by id, switches too;
            # a tracer still behind after the pause (a loaded machine) misses one run of 8
            # (one entry a key, as before the ways: 56 of 149 missed)
            check(st["stack_cache_hits"] >= alt - 24, f"both sites are sent by id: {st}")
            check(st["stack_cache_misses"] <= 12, f"switches are not misses: {st}")
        tables.append(stack_table(p))
    check_eq(tables[0], tables[1], "every stack, with the cache and without")
