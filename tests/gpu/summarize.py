#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Prints gpuleak's figures beside PyTorch's for each run of run-core.sh."""
import json
import os
import sys

out = sys.argv[1]
for name in ("default", "expandable", "async", "pinned"):
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
    for s in p["stacks"][:2]:
        fr = " <- ".join(f"{f.get('function') or '?'}" for f in s["frames"][:12])
        print(f"   {s['memory']} {s['outstanding_bytes']} x{s['outstanding_allocs']}: {fr}")
