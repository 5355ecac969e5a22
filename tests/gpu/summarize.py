#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Prints gpuleak's figures beside PyTorch's for each run of run-core.sh."""
import json
import os
import sys

out = sys.argv[1]
for name in ("default", "expandable", "async", "pinned", "multi"):
    if name == "multi" and not os.path.exists(os.path.join(out, name + ".torch.json")):
        continue
    try:
        g = json.load(open(os.path.join(out, name + ".json")))
        t = json.load(open(os.path.join(out, name + ".torch.json")))
    except (OSError, ValueError) as e:
        print(f"{name}: missing output ({e})")
        continue
    p = [p for p in g["processes"] if p["pid"] == t["pid"]]
    if not p:
        print(f"{name}: pid {t['pid']} not in report")
        continue
    p = p[0]
    print(f"{name}: gpuleak device_bytes={p['device_bytes']} host_pinned={p['host_pinned_bytes']} "
          f"address_space={p['address_space_bytes']} allocs={p['outstanding_allocs']} "
          f"lost={g['lost_events']} consistent={p['consistent']} unmatched={p['unmatched_frees']} | "
          f"torch reserved={t['memory_reserved']} allocated={t['memory_allocated']} "
          f"segments={t['segments']} pinned={t['pinned_bytes']} diff={p['device_bytes'] - t['memory_reserved']}")
    devs = {d["device"]: d["device_bytes"] for d in p.get("devices", [])}
    print(f"   devices {devs}; pre_attach_bytes {p.get('pre_attach_bytes', 'absent')}, "
          f"projected_oom_s {p.get('projected_oom_s')}")
    for d in t.get("per_device", []) if name == "multi" else []:
        g_bytes = devs.get(d["device"], 0)
        print(f"   device {d['device']}: gpuleak {g_bytes} | torch reserved {d['memory_reserved']} "
              f"allocated {d['memory_allocated']} | diff {g_bytes - d['memory_reserved']}")
    if "torch_allocated_bytes" in p and name != "async":
        print(f"   torch_allocated_bytes={p['torch_allocated_bytes']} (PyTorch's "
              f"memory_allocated {t['memory_allocated']}, diff "
              f"{p['torch_allocated_bytes'] - t['memory_allocated']})")
    for s in p["stacks"][:2]:
        fr = " <- ".join(f"{f.get('function') or '?'}" for f in s["frames"][:12])
        print(f"   {s['memory']} {s['outstanding_bytes']} x{s['outstanding_allocs']}: {fr}")
