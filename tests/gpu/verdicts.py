#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Prints each case's most suspicious stack from run-verdicts.sh and checks the verdicts.

    verdicts.py REPORT.json PIDS   (PIDS: lines "case pid")

Exit status 1 when a leak case's top stack is not a leak or the healthy loop has one.
"""
import json
import sys

EXPECT = {"outputs": "leak", "loss": "leak", "rnn": "leak", "activations": "leak",
          "pinned": "leak", "healthy": "no leak"}
MIB = 1 << 20


def frames(st, n=6):
    names = [f.get("function") or "?" for f in st["frames"]]
    return " <- ".join(names[:n])


def main():
    rep = json.load(open(sys.argv[1]))
    cases = dict(line.split() for line in open(sys.argv[2]) if line.strip())
    procs = {p["pid"]: p for p in rep["processes"]}
    bad = 0
    print(f"lost_events={rep['lost_events']} complete={rep['complete']} "
          f"duration={rep['duration_s']:.0f} s")
    for case, pid in cases.items():
        p = procs.get(int(pid))
        if not p:
            print(f"{case:12} pid {pid} not in the report")
            bad += 1
            continue
        stacks = p["stacks"]
        counts = {v: sum(s["verdict"] == v for s in stacks) for v in ("leak", "unknown", "steady")}
        oom = p["projected_oom_s"]
        print(f"{case:12} pid {pid}: device {p['device_bytes'] / MIB:.0f} MiB, host_pinned "
              f"{p['host_pinned_bytes'] / MIB:.0f} MiB, device growth "
              f"{p['device_growth_bytes_per_s'] / MIB:.2f} MiB/s, projected_oom_s "
              f"{'null' if oom is None else f'{oom:.0f}'}, pre_attach "
              f"{p.get('pre_attach_bytes', 'n/a')}; stacks {counts}")
        if not stacks:
            print(f"{'':12} no stacks")
            bad += 1
            continue
        top = stacks[0]
        print(f"{'':12} top: {top['verdict']}: {top.get('why')} [{top['memory']} "
              f"{top['outstanding_bytes'] / MIB:.0f} MiB in {top['outstanding_allocs']}]")
        print(f"{'':12}      {frames(top)}")
        if EXPECT[case] == "leak":
            ok = top["verdict"] == "leak"
        else:
            ok = counts["leak"] == 0
        print(f"{'':12} expected {EXPECT[case]}: {'OK' if ok else 'MISMATCH'}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
