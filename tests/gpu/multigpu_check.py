#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""PASS/FAIL lines for run-multigpu.sh's OUTDIR: gpuleak's figures against PyTorch's
(torch.cuda.memory_stats per device), nvidia-smi's per-process listing, NCCL's own ALLOC
lines (NCCL_DEBUG=INFO) and nvidia-smi's delta around the communicator's creation."""
import json
import os
import re
import sys

out = sys.argv[1]
results = []
MIB = 1 << 20


def say(ok, name, detail):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


def load(name):
    path = os.path.join(out, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        say(False, name, f"cannot read: {e}")
        return None


def smi(name):
    """pid -> {uuid: used bytes} from nvidia-smi --query-compute-apps."""
    apps = {}
    try:
        for ln in open(os.path.join(out, name)):
            f = [x.strip() for x in ln.split(",")]
            if len(f) == 3 and f[0].isdigit() and f[2].isdigit():
                apps.setdefault(int(f[0]), {})[f[1]] = int(f[2]) * MIB
    except OSError:
        pass
    return apps


def proc(rep, pid):
    for p in rep["processes"] if rep else []:
        if p["pid"] == pid:
            return p
    return None


def torch_reserved(p, dev):
    for d in (p.get("memory") or {}).get("devices", []):
        if d["device"] == dev:
            return d["torch_reserved_bytes"]
    return None


def nccl_bytes(p):
    return sum(lib["bytes"] for d in (p.get("memory") or {}).get("devices", [])
               for lib in d["outside_torch_libraries"] if lib["library"] == "nccl")


def check_uuids(name, p, apps):
    listed = apps.get(p["pid"], {})
    named = {g["uuid"]: g["device_bytes"] for g in p["gpus"] if g["uuid"]}
    fits = all(b <= listed.get(u, -1) for u, b in named.items())
    say(bool(named) and set(named) == set(listed) and fits, f"{name} GPUs named as nvidia-smi",
        f"gpuleak {[(g['cuda_device'], g['nvml_index'], g['uuid'], g['device_bytes']) for g in p['gpus']]} "
        f"(match: {p['gpu_match']}), nvidia-smi {listed}")


def dataparallel():
    rep, torch = load("dp.json"), load("dp/done.json")
    if not rep or not torch:
        return
    p = proc(rep, torch["pid"])
    if not p:
        say(False, "dp process", f"PID {torch['pid']} not in the report")
        return
    for dev in (0, 1):
        gl, want = torch_reserved(p, dev), torch["devices"][dev]["reserved"]
        say(gl == want, f"dp device {dev} reserve", f"gpuleak {gl}, torch {want}")
    kept = torch["steps"] * torch["step_bytes"]
    by = {g["cuda_device"]: g["device_bytes"] for g in p["gpus"]}
    say(by.get(0, 0) - by.get(1, 0) >= 0.9 * kept, "dp device 0 climbs, device 1 does not",
        f"gpuleak {by}, gathered outputs kept {kept}, torch {torch['devices']}")
    im = p.get("imbalance")
    site = f"multigpu_dp.py:{torch['mark_line']}"
    say(bool(im) and im["cuda_device"] == 0 and im["peer_cuda_device"] == 1 and
        bool(im["stacks"]) and im["stacks"][0]["site"].startswith(site) and
        im["stacks"][0]["difference_bytes"] >= 0.9 * kept,
        "dp imbalance names the gathering stack", f"want {site}; got {im}")
    check_uuids("dp", p, smi("dp.smi.csv"))
    text = open(os.path.join(out, "dp.txt")).read()
    say("imbalance: cuda 0 holds" in text, "dp text imbalance line",
        next((ln for ln in text.splitlines() if "imbalance:" in ln), "none"))


def nccl_alloc_lines(path, pid):
    """Sizes NCCL_DEBUG=INFO's ALLOC subsystem logged for pid (cuMem and cudaMalloc)."""
    sizes = []
    try:
        for ln in open(path, errors="replace"):
            m = re.match(r"\S+:(\d+):\d+ \[\d+\] NCCL INFO .*?(?:Alloc Size|size) (\d+)", ln)
            if m and int(m.group(1)) == pid:
                sizes.append(int(m.group(2)))
    except OSError:
        pass
    return sizes


def ddp():
    rep = load("ddp.json")
    ranks = [load(f"ddp/rank{r}.json") for r in (0, 1)]
    if not rep or not all(ranks):
        return
    agent = int(open(os.path.join(out, "ddp", "agent")).read().split()[-1])
    apps = smi("ddp.smi.csv")
    jobs = [j for j in rep.get("jobs", []) if j["job"] == agent]
    say(len(jobs) == 1 and jobs[0]["grouped_by"] == "environment" and
        [(m["pid"], m["rank"]) for m in jobs[0]["members"]] ==
        [(r["pid"], r["rank"]) for r in ranks],
        "ddp job grouped by RANK", f"agent {agent}, jobs {rep.get('jobs')}")
    for r in ranks:
        p = proc(rep, r["pid"])
        if not p:
            say(False, f"ddp rank {r['rank']}", f"PID {r['pid']} not in the report")
            continue
        gl = torch_reserved(p, r["local_rank"])
        say(gl == r["reserved"], f"ddp rank {r['rank']} reserve", f"gpuleak {gl}, torch {r['reserved']}")
        say((p["rank"], p["local_rank"]) == (r["rank"], r["local_rank"]),
            f"ddp rank {r['rank']} read", f"gpuleak rank {p['rank']} local {p['local_rank']}")
        nb = nccl_bytes(p)
        lines = nccl_alloc_lines(os.path.join(out, "ddp", "torchrun.err"), r["pid"])
        delta = r["nccl_smi_delta"]
        say(bool(lines) and nb == sum(lines), f"ddp rank {r['rank']} NCCL bytes = NCCL's ALLOC lines",
            f"gpuleak nccl {nb}, NCCL logged {len(lines)} allocations of {sum(lines)} "
            f"(allocations only: frees are not logged)")
        say(nb > 0 and delta is not None and nb <= delta, f"ddp rank {r['rank']} NCCL bytes within nvidia-smi's delta",
            f"gpuleak nccl {nb}, nvidia-smi delta around init {delta} (includes NCCL's kernels)")
        made = [s for s in p["stacks"] if any("libnccl" in (f.get("module") or "") for f in s["frames"])
                and any((f.get("file") or "").endswith("multigpu_ddp.py") for f in s["frames"])]
        say(bool(made), f"ddp rank {r['rank']} NCCL stacks reach the communicator's creation",
            f"{len(made)} stacks with libnccl and multigpu_ddp.py frames, sites "
            f"{sorted({s['site'] for s in made})[:3]}")
        check_uuids(f"ddp rank {r['rank']}", p, apps)
    leak = ranks[1]
    im = jobs[0]["imbalance"] if jobs else None
    site = f"multigpu_ddp.py:{leak['mark_line']}"
    say(bool(im) and im["pid"] == leak["pid"] and bool(im["stacks"]) and
        im["stacks"][0]["site"].startswith(site) and
        im["stacks"][0]["difference_bytes"] >= 0.9 * leak["leak_bytes"],
        "ddp rank 1's leak named", f"want {site} ~{leak['leak_bytes']}; got {im}")
    p0 = proc(rep, ranks[0]["pid"])
    say(bool(p0) and not any(s["site"].startswith(site) for s in p0["stacks"]),
        "ddp rank 0 has no stack at the marked line", "")


def serve():
    try:
        text = open(os.path.join(out, "metrics.txt")).read()
    except OSError as e:
        say(False, "serve metrics", str(e))
        return
    dp, ranks = load("sdp/done.json"), [load(f"sddp/rank{r}.json") for r in (0, 1)]
    apps = smi("serve.smi.csv")
    uuids = {ln.split(",")[1].strip() for ln in open(os.path.join(out, "gpus.csv"))}

    def lines(name, pid):
        return [ln for ln in text.splitlines() if ln.startswith(name + "{") and f'pid="{pid}"' in ln]
    if dp:
        dev = lines("gpuleak_process_device_memory_bytes", dp["pid"])
        got = set(re.findall(r'UUID="([^"]+)"', "\n".join(dev)))
        say(len(dev) == 2 and got == set(apps.get(dp["pid"], {})) and got <= uuids,
            "serve dp per-GPU series joinable on UUID", f"{dev}; nvidia-smi {apps.get(dp['pid'])}")
        im = lines("gpuleak_process_device_imbalance_bytes", dp["pid"])
        say(len(im) == 1 and 'cuda_device="0"' in im[0], "serve dp imbalance series", f"{im}")
        unnamed = [ln for ln in text.splitlines() if f'pid="{dp["pid"]}"' in ln and "cuda_device=" in ln
                   and 'cuda_device="unknown"' not in ln and "UUID=" not in ln]
        say(not unnamed, "serve every per-device series of dp named", f"{unnamed[:3]}")
    for r in ranks:
        if not r:
            continue
        dev = lines("gpuleak_process_device_memory_bytes", r["pid"])
        say(bool(dev) and f'rank="{r["rank"]}",local_rank="{r["local_rank"]}"' in dev[0] and "UUID=" in dev[0],
            f"serve rank {r['rank']} series", f"{dev}")
    if all(ranks):
        job = [ln for ln in text.splitlines() if ln.startswith("gpuleak_job_device_memory_bytes{")]
        jim = lines("gpuleak_job_imbalance_bytes", ranks[1]["pid"])
        say(bool(job) and bool(jim), "serve job series and rank 1's imbalance", f"{job} {jim}")


dataparallel()
ddp()
serve()
print(f"RESULT: {results.count(True)} PASS, {results.count(False)} FAIL")
sys.exit(0 if results and all(results) else 1)
