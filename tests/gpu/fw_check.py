#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks one case of tests/gpu/frameworks.sh: reads DIR/gpuleak.json, DIR/gpuleak.txt,
DIR/done.json (the workload's own figures) and DIR/nvidia-smi.csv, and prints one PASS or
FAIL line per check with gpuleak's figure beside the framework's.
    fw_check.py CASE DIR"""
import json
import os
import sys

MIB = 1 << 20


def mib(b):
    return "null" if b is None else f"{b / MIB:.1f} MiB"


class Case:
    def __init__(self, name, d):
        self.name, self.d, self.fails = name, d, 0
        self.done = json.load(open(os.path.join(d, "done.json")))
        self.text = open(os.path.join(d, "gpuleak.txt")).read()
        g = json.load(open(os.path.join(d, "gpuleak.json")))
        found = [p for p in g["processes"] if p["pid"] == self.done["pid"]]
        self.p = found[0] if found else None
        self.g = g
        self.nvsmi = None
        try:
            for line in open(os.path.join(d, "nvidia-smi.csv")):
                pid, used = [x.strip() for x in line.split(",")]
                if int(pid) == self.done["pid"]:
                    self.nvsmi = int(used) * MIB
        except (OSError, ValueError):
            pass

    def check(self, ok, what):
        print(f"{'PASS' if ok else 'FAIL'} {self.name}: {what}")
        self.fails += not ok

    @staticmethod
    def named(f, fn):
        """fn, or a C++ name of it: 'leak_vmm(unsigned long) [clone .isra.0]'."""
        name = f.get("function") or ""
        return name == fn or name.startswith(fn + "(") or name.startswith(fn + " ")

    def stacks_at(self, fn, memory=None):
        return [s for s in self.p["stacks"]
                if any(self.named(f, fn) for f in s["frames"]) and
                (memory is None or s["memory"] == memory)]

    def line_of(self, st, fn):
        for f in st["frames"]:
            if self.named(f, fn) and f["kind"] == "python":
                return f"{os.path.basename(f.get('file', '?'))}:{f.get('line')}" + \
                    (" (inferred)" if f.get("inferred") else "")
        for f in st["frames"]:
            if self.named(f, fn):
                return f"{fn} ({os.path.basename(f.get('module') or '?')})"
        return None

    def leak_at(self, fn, want_bytes, memory=None, native_to=None):
        """A leak verdict on a stack through fn, with its bytes beside want_bytes."""
        sts = self.stacks_at(fn, memory)
        leaks = [s for s in sts if s["verdict"] == "leak"]
        got = sum(s["outstanding_bytes"] for s in sts)
        where = self.line_of(leaks[0], fn) if leaks else None
        extra = ""
        if native_to and leaks:
            names = [f.get("function") for f in leaks[0]["frames"]]
            ok = any(self.named(f, native_to) for f in leaks[0]["frames"])
            extra = (f", native stack to {native_to}: {ok} ({len(names)} frames), site "
                     f"{leaks[0].get('site')}")
            if not ok:
                extra += f": {names}"
        else:
            ok = True
        self.check(bool(leaks) and ok,
                   f"leak at {fn}: {where or 'not named'}; gpuleak {mib(got)} vs the "
                   f"workload's {mib(want_bytes)}{extra}")
        if not leaks:
            self.show_top()

    def no_leak(self):
        leaks = [(s.get("site"), mib(s["outstanding_bytes"]), s.get("why"))
                 for s in self.p["stacks"] if s["verdict"] == "leak"]
        self.check(not leaks, f"no leak verdict (got {leaks[:3]})")

    def show_top(self, n=4):
        for s in self.p["stacks"][:n]:
            notes = [f["function"] for f in s["frames"]
                     if (f.get("function") or "").startswith("[")]
            print(f"    {s['memory']} {mib(s['outstanding_bytes'])} {s['verdict']} at "
                  f"{s.get('site')} {notes[:1]}")
            print(f"      frames: {[f.get('function') or f.get('module') for f in s['frames']]}")

    def figures(self, **kw):
        print(f"     {self.name}: " + ", ".join(f"{k} {v}" for k, v in kw.items()))

    def nvml_line(self):
        m = self.p.get("memory") or {}
        self.figures(nvidia_smi=mib(self.nvsmi), gpuleak_nvml=mib(m.get("nvml_bytes")),
                     gpuleak_seen=mib(m.get("seen_bytes")),
                     context_and_pre_attach=mib(m.get("context_and_pre_attach_bytes")))


def jax_default(c):
    pools = c.p["memory"]["pools"] if c.p["memory"] else []
    d = c.done
    c.check(pools and pools[0]["framework"] == "XLA",
            f"XLA's pool named: {mib(pools[0]['bytes']) if pools else 'none'} vs JAX's "
            f"bytes_limit {mib(d.get('bytes_limit'))}, pool_bytes {mib(d.get('pool_bytes'))}")
    c.check("XLA_PYTHON_CLIENT_PREALLOCATE=false" in c.text and
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in c.text,
            "the text names both settings")
    c.check(not pools or all(s["verdict"] != "leak" for s in c.p["stacks"]
                             if s["stack_id"] == pools[0]["stack_id"]),
            "no leak verdict from the pool's one block")
    c.figures(kept=mib(d["kept_bytes"]), jax_bytes_in_use=mib(d.get("bytes_in_use")))
    c.nvml_line()


def jax_platform(c):
    d = c.done
    c.leak_at("keep_result", d["kept_bytes"])
    c.check(not (c.p["memory"] or {}).get("pools"), "no pool with preallocation off")
    notes = {f["function"] for s in c.p["stacks"] for f in s["frames"]
             if (f.get("function") or "").startswith("[")}
    c.figures(kept=mib(d["kept_bytes"]), jax_bytes_in_use=mib(d.get("bytes_in_use")),
              notes=sorted(notes) or "none")
    c.nvml_line()


def cupy_case(c):
    s = c.done["sites"]
    c.leak_at("keep_pool", s["keep_pool"], "device")
    c.leak_at("keep_raw", s["keep_raw"], "device")
    c.leak_at("keep_pinned", s["keep_pinned"], "host_pinned")
    c.figures(cupy_used=mib(c.done["pool_used_bytes"]), cupy_total=mib(c.done["pool_total_bytes"]),
              gpuleak_device=mib(c.p["device_bytes"]),
              gpuleak_pinned=mib(c.p["host_pinned_bytes"]),
              pinned_free_blocks=c.done["pinned_free_blocks"])
    c.nvml_line()


def raw(c):
    s = c.done["sites"]
    for fn in ("leak_malloc", "leak_async", "leak_vmm"):
        c.leak_at(fn, s[fn], "device", native_to="main")
    c.leak_at("leak_host", s["leak_host"], "host_pinned", native_to="main")
    c.nvml_line()


def torch_figures(c):
    d = c.done
    c.figures(torch_allocated=mib(d["memory_allocated"]),
              gpuleak_torch_allocated=mib(c.p.get("torch_allocated_bytes")),
              torch_reserved=mib(d["memory_reserved"]),
              gpuleak_torch_reserved=mib(c.p.get("torch_reserved_bytes")))


def graphs(c):
    sts = c.stacks_at("capture_graph")
    c.check(any(s["verdict"] == "leak" for s in sts),
            f"the kept graphs' pools leak at capture_graph: "
            f"{[(s['memory'], mib(s['outstanding_bytes']), s['verdict']) for s in sts][:3]}")
    c.check(c.p.get("torch_reserved_bytes") == c.done["memory_reserved"],
            f"reserve: gpuleak {mib(c.p.get('torch_reserved_bytes'))} vs "
            f"memory_reserved() {mib(c.done['memory_reserved'])}")
    torch_figures(c)
    c.nvml_line()


def compile_case(c):
    """The pool's growth is put at the line that called the compiled model; the graph
    trees grow the pool in a few segments to the largest shape, so a verdict is not
    asked for (it is printed)."""
    d = c.done
    sts = c.stacks_at("run_new_shape")
    got = sum(s["outstanding_bytes"] for s in sts if s["memory"] == "device")
    sites = sorted({s.get("site") for s in sts if s["memory"] == "device"})
    c.check(got >= 0.75 * d["growth_bytes"] and
            all(x.startswith("fw_compile.py:") for x in sites),
            f"the pool's growth at run_new_shape: gpuleak {mib(got)} of the reserve's growth "
            f"{mib(d['growth_bytes'])} after the first shape, sites {sites}, verdicts "
            f"{[(mib(s['outstanding_bytes']), s['verdict']) for s in sts if s['memory'] == 'device']}"
            f" ({d['backend']}{', Inductor failed: ' + d['inductor_error'] if d['inductor_error'] else ''})")
    rest = [(s.get("site"), mib(s["outstanding_bytes"]), s["verdict"]) for s in c.p["stacks"]
            if s["memory"] == "device" and s not in sts]
    c.figures(other_device_stacks=rest[:6])
    st = c.stacks_at("run_steady")
    c.check(all(s["verdict"] != "leak" for s in st),
            f"no leak at run_steady (the first shape's warm-up and recording): "
            f"{[(s['memory'], mib(s['outstanding_bytes']), s['verdict']) for s in st][:3]}")
    c.check(c.p.get("torch_reserved_bytes") == d["memory_reserved"],
            f"reserve: gpuleak {mib(c.p.get('torch_reserved_bytes'))} vs "
            f"memory_reserved() {mib(d['memory_reserved'])}")
    torch_figures(c)
    c.nvml_line()


def late_minutes(c):
    late(c)
    d = c.done
    c.figures(leaked_before_attach_s=d.get("leaked_before_attach_s"),
              kept_before_attach=d["kept_before_attach"],
              reserved_before_attach=mib(d["reserved_before_attach"]),
              tensor_level=(c.p.get("tensor_level") or {}).get("coverage"))


def mixed(c):
    s = c.done["sites"]
    c.leak_at("keep_torch", s["keep_torch"], "torch_block")
    c.leak_at("keep_cupy", s["keep_cupy"], "device")
    torch_figures(c)
    c.figures(cupy_used=mib(c.done["cupy_used_bytes"]), cupy_total=mib(c.done["cupy_total_bytes"]))
    c.nvml_line()


def steady(c):
    c.no_leak()
    torch_figures(c)
    c.figures(max_reserved=mib(c.done["max_memory_reserved"]),
              peak_device_gpuleak=mib(c.p.get("peak_device_bytes")))
    c.nvml_line()


def late(c):
    d = c.done
    c.leak_at("keep_output", d["kept_bytes_after_attach"], "torch_block")
    m = c.p["memory"] or {}
    pre = m.get("context_and_pre_attach_bytes")
    c.check(pre is not None and pre >= d["reserved_before_attach"],
            f"before attach: gpuleak {mib(pre)} >= PyTorch's reserve then "
            f"{mib(d['reserved_before_attach'])} (+ the context)")
    c.check(c.p["unmatched_frees"] == 0, f"unmatched frees {c.p['unmatched_frees']}")
    torch_figures(c)
    c.nvml_line()


def jax_late(c):
    err = open(os.path.join(c.d, "gpuleak.err")).read()
    c.check("has XLA loaded" in err and "XLA_PYTHON_CLIENT_ALLOCATOR=platform" in err,
            "the warning: XLA's pool from before attach is not seen")
    c.check(not (c.p["memory"] or {}).get("pools"), "no pool claimed from what was not seen")
    c.check(all(s["verdict"] != "leak" for s in c.p["stacks"]),
            "no leak verdict from inside the pool")
    c.nvml_line()


CASES = {"jax_late": jax_late, "jax_default": jax_default, "jax_platform": jax_platform,
         "cupy": cupy_case,
         "raw": raw, "graphs": graphs, "compile": compile_case, "mixed": mixed, "steady": steady,
         "late": late, "late_minutes": late_minutes}


def main():
    name, d = sys.argv[1], sys.argv[2]
    try:
        c = Case(name, d)
    except (OSError, ValueError, KeyError) as e:
        print(f"FAIL {name}: no report to check ({e})")
        return 1
    if c.p is None and name == "jax_late":
        # nothing allocated after attach: the process is left out of the report
        c.p = {"comm": "?", "device_bytes": 0, "host_pinned_bytes": 0, "stacks": [],
               "memory": None}
    if c.p is None:
        print(f"FAIL {name}: PID {c.done['pid']} is not in gpuleak's report")
        return 1
    print(f"     {name}: {c.done.get('framework')}; gpuleak {c.p['comm']}: device "
          f"{mib(c.p['device_bytes'])}, pinned {mib(c.p['host_pinned_bytes'])}, "
          f"{len(c.p['stacks'])} stacks, complete {c.g.get('complete')}")
    CASES[name](c)
    return 1 if c.fails else 0


if __name__ == "__main__":
    sys.exit(main())
