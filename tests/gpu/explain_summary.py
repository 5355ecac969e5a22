#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Prints gpuleak's breakdown and out-of-memory causes beside PyTorch's, CuPy's and
nvidia-smi's figures for each case of explain.sh, with PASS/FAIL per expectation."""
import json
import os
import sys

MIB = 1 << 20
out = sys.argv[1]
fails = 0


def verdict(ok, what):
    global fails
    fails += not ok
    print(f"  {'PASS' if ok else 'FAIL'} {what}")


def load(name):
    try:
        g = json.load(open(os.path.join(out, name + ".json")))
        t = json.load(open(os.path.join(out, name + ".torch.json")))
    except (OSError, ValueError) as e:
        print(f"{name}: missing output ({e})")
        return None, None, None
    p = [p for p in g["processes"] if p["pid"] == t["pid"]]
    smi = open(os.path.join(out, name + ".smi")).read().strip()
    print(f"{name}: torch {json.dumps(t.get('at_oom') or t.get('after'))}; steps "
          f"{t.get('steps')}; error {t.get('error')!r}; nvidia-smi [{smi}]")
    if not p:
        print(f"  FAIL pid {t['pid']} not in gpuleak's report")
        return None, t, g
    p = p[0]
    m = p.get("memory") or {}
    print(f"  gpuleak: complete {g['complete']} ({g.get('incomplete_why', '')!r}); device_bytes "
          f"{p['device_bytes']}; memory " + json.dumps({k: v for k, v in m.items()
                                                        if not isinstance(v, (list, dict))}))
    for f in p.get("failures_list", []):
        if f.get("oom"):
            o = f["oom"]
            print(f"  oom: {f['api']} {f['bytes']} B cause {o['cause']}: {o['why']} | action: "
                  f"{o['action']} | retry {o.get('torch_retry')} is_retry {o.get('is_torch_retry')}")
    return p, t, g


def causes(p):
    return [f["oom"]["cause"] for f in p.get("failures_list", []) if f.get("oom")]


p, t, g = load("leak")
if p:
    verdict("leak" in causes(p), f"the leak's OOM is caused by 'leak': {causes(p)}")
    verdict(abs(p["device_bytes"] - t["at_oom"]["reserved"]) <= 64 * MIB,
            f"device bytes {p['device_bytes']} ~ PyTorch's reserve {t['at_oom']['reserved']} "
            "(within the context's and pre-attach few MiB)")
p, t, g = load("frag")
frag_steps = t.get("steps") if t else None
if p:
    verdict("fragmentation" in causes(p), f"the split reserve's OOM is 'fragmentation': "
            f"{causes(p)}")
    m = p.get("memory") or {}
    verdict(m.get("torch_cached_bytes") is not None and
            abs(m["torch_cached_bytes"] - (t["at_oom"]["reserved"] - t["at_oom"]["allocated"]))
            <= 64 * MIB, f"cached {m.get('torch_cached_bytes')} ~ reserved - allocated "
            f"{t['at_oom']['reserved'] - t['at_oom']['allocated']}")
p, t, g = load("frag_expandable")
if p:
    verdict("fragmentation" not in causes(p), f"expandable segments: no fragmentation OOM: "
            f"{causes(p)}")
    # the split halves of the default allocator's reserve are usable again: nothing is
    # stranded at the failure, by PyTorch's count and gpuleak's, and it ran no fewer steps
    m = p.get("memory") or {}
    stranded = t["at_oom"]["reserved"] - t["at_oom"]["allocated"]
    verdict(stranded == 0 and m.get("torch_cached_bytes") == 0,
            f"expandable segments: no reserve stranded at the failure (PyTorch {stranded}, "
            f"gpuleak {m.get('torch_cached_bytes')})")
    verdict(frag_steps is not None and (t.get("steps") or 0) >= frag_steps,
            f"expandable segments ran {t.get('steps')} steps, the default allocator "
            f"{frag_steps}")
p, t, g = load("libraries")
if p:
    libs = {}
    for d in (p.get("memory") or {}).get("devices", []):
        for lib in d.get("outside_torch_libraries", []):
            libs[lib["library"]] = libs.get(lib["library"], 0) + lib["bytes"]
    print(f"  outside PyTorch by library: {libs}; CuPy's pool used {t.get('cupy_pool_used')} "
          f"total {t.get('cupy_pool_total')} ({t.get('cupy', 'imported')})")
    if isinstance(t.get("cupy_pool_total"), int):
        verdict(libs.get("cupy", 0) >= t["cupy_pool_total"],
                f"cupy's memory {libs.get('cupy', 0)} >= its pool's {t['cupy_pool_total']}")
    verdict(libs.get("cublas", 0) > 0 or any("cublas" in k for k in libs),
            f"cuBLAS's memory named (or PyTorch holds its workspace): {libs}")
print(f"explain: {'PASS' if not fails else f'{fails} FAIL'}")
sys.exit(1 if fails else 0)
