# SPDX-License-Identifier: BSD-2-Clause
"""Several GPUs and several ranks, on the stand-in's two devices: DataParallel's
device 0 climbing while device 1 stays (the imbalance and the gathering stack), a
2-rank job launched as torchrun launches one (grouped, ranks from the environment
only when asked, rank 1's leak named), NCCL's communicator counted through its VMM
handle dance, and serve's per-GPU series matched to NVML's GPUs."""
import json
import os
import re
import signal
import subprocess

from harness import (FAKECUDA, GPULEAK, WORKLOADS, Tracer, Workload, agent_on_two_gpus,
                     attach_workload, check, check_books, check_eq, check_sites, finish_attached,
                     process, site_bytes, wait_until)
from test_serve import get


def dp_checks(p, truth):
    by_dev = truth["device_bytes_by_device"]
    gpus = {g["cuda_device"]: g["device_bytes"] for g in p["gpus"]}
    check_eq(gpus, {0: by_dev[0], 1: by_dev[1]}, "device bytes per CUDA ordinal")
    check(by_dev[0] > 2 * by_dev[1], f"the workload's device 0 climbs: {by_dev}")
    gather = truth["sites"]["dp_site_gather"]
    for st in p["stacks"]:
        if any(f.get("function") == "dp_site_gather" for f in st["frames"]):
            check_eq(st["devices"], [{"cuda_device": 0, "bytes": gather}],
                     "the gathering stack holds its bytes on device 0 only")
    return gather


def test_dataparallel_device0_imbalance(tmp):
    """The process's memory per GPU equals the stand-in's per device; the imbalance
    names device 0 against device 1 and the gathering stack as all the difference (the
    replicas' stack holds the same on both devices and is not named)."""
    wl, tr = attach_workload(tmp, "wl_dp")
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    check_books(rep, p, truth)
    check_sites(p, truth)
    gather = dp_checks(p, truth)
    im = p["imbalance"]
    check(im is not None, f"an imbalance is reported: {p['gpus']}")
    check_eq((im["cuda_device"], im["peer_cuda_device"]), (0, 1), "device 0 against device 1")
    check_eq((im["bytes"], im["peer_bytes"]), tuple(truth["device_bytes_by_device"][:2]),
             "the two devices' bytes")
    check_eq([(s["site"].split()[0], s["difference_bytes"]) for s in im["stacks"]],
             [("dp_site_gather", gather)], "the stacks that make the difference")
    text = tr.stdout()
    check(re.search(r"imbalance: cuda 0 holds [\d.]+ MiB, [\d.]+x cuda 1's", text),
          f"the text report has the imbalance line:\n{text}")
    check(re.search(r"\n\s+\+[\d.]+ MiB device at dp_site_gather", text),
          "the text report names the gathering stack")


def test_dataparallel_below_threshold(tmp):
    """--imbalance above the devices' ratio: no imbalance line, the GPUs still listed."""
    wl, tr = attach_workload(tmp, "wl_dp", tracer_args=["--imbalance", "1000"])
    truth, rep = finish_attached(wl, tr)
    p = process(rep, wl.pid)
    dp_checks(p, truth)
    check_eq(p["imbalance"], None, "no imbalance below 10x")
    check("imbalance:" not in tr.stdout(), "no imbalance line in the text report")


def rank_truths(wl):
    return [json.load(open(f"{wl.truth_path}.rank{r}")) for r in range(2)]


def test_ranks_job_leak_and_nccl(tmp):
    """A launcher and two ranks (RANK, LOCAL_RANK, WORLD_SIZE in their environment),
    traced with --ranks-from-env: one job, grouped by the environment, ranks 0 and 1;
    rank 1 out of balance by what ddp_site_leak holds (in the interval summaries too);
    each rank's NCCL communicator
    attributed to nccl with the stack of its creation, equal to what the stand-in's
    ncclCommInitRank allocated, after a second communicator's Retain -> Release ->
    Unmap -> Release left nothing behind."""
    wl, tr = attach_workload(tmp, "wl_ranks", tracer_args=["--ranks-from-env", "-i", "200ms"])
    wl.truth()
    truths = rank_truths(wl)
    # the interval summaries carry the job's block
    wait_until(lambda: re.search(rf"JOB launched by PID {wl.pid}: 2 processes .*\n.*\n.*\n"
                                 rf"  imbalance: rank 1 \(PID {truths[1]['pid']}\)",
                                 tr.stdout()), 20, "a summary with the job's block")
    tr.stop()
    wl.release()
    check_eq(wl.wait(), 0, "the job's exit status")
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep = tr.report()
    ranks = []
    for r, t in enumerate(truths):
        p = process(rep, t["pid"])
        check_books(rep, p, t)
        check_sites(p, t)
        check_eq((p["rank"], p["local_rank"], p["world_size"]), (r, r, 2), "rank from RANK")
        check_eq(p["ppid"], wl.pid, "the launcher is the parent")
        check_eq(p["job"], wl.pid, "the job is named by its launcher")
        check_eq(site_bytes(p, "ncclCommInitRank"), t["nccl_bytes"],
                 "the communicator's bytes under ncclCommInitRank")
        check(site_bytes(p, "ddp_setup") == t["nccl_bytes"],
              "the communicator's creation stack names the caller")
        libs = [lib for d in p["memory"]["devices"] for lib in d["outside_torch_libraries"]
                if lib["library"] == "nccl"]
        check_eq(libs, [{"library": "nccl", "bytes": t["nccl_bytes"]}],
                 "NCCL's memory attributed to nccl, exactly")
        check_eq([g["cuda_device"] for g in p["gpus"]], [r % 2], "each rank on its device")
        ranks.append(p)
    jobs = [j for j in rep["jobs"] if j["job"] == wl.pid]
    check_eq(len(jobs), 1, f"one job of the launcher: {rep['jobs']}")
    j = jobs[0]
    check_eq(j["grouped_by"], "environment", "grouped by RANK")
    check_eq([(m["pid"], m["rank"]) for m in j["members"]],
             [(truths[0]["pid"], 0), (truths[1]["pid"], 1)], "members by rank")
    im = j["imbalance"]
    check(im is not None, f"rank 1 is out of balance: {j}")
    check_eq((im["pid"], im["peer_pid"]), (truths[1]["pid"], truths[0]["pid"]),
             "rank 1 against rank 0")
    check_eq([(s["site"].split()[0], s["difference_bytes"]) for s in im["stacks"]][:1],
             [("ddp_site_leak", truths[1]["sites"]["ddp_site_leak"])],
             "the leak at the marked line makes the difference")
    text = tr.stdout()
    check(re.search(rf"JOB launched by PID {wl.pid}: 2 processes \(ranks from RANK, "
                    r"world size 2\)", text), f"the job's block in the text report:\n{text}")
    check(re.search(rf"imbalance: rank 1 \(PID {truths[1]['pid']}\) holds", text),
          "the job's imbalance names rank 1")


def test_ranks_by_parent_without_environment(tmp):
    """Without --ranks-from-env no environment is read: the ranks are grouped by their
    parent and program, their ranks unknown, the leaking one named by PID."""
    tr = Tracer(["run", "-i", "0", "--", os.path.join(WORKLOADS, "wl_ranks"), "--no-wait",
                 "--truth", os.path.join(tmp, "ranks.json")], tmp)
    check_eq(tr.wait(), 0, "gpuleak run exit status")
    rep = tr.report()
    truths = [json.load(open(os.path.join(tmp, f"ranks.json.rank{r}"))) for r in range(2)]
    launcher = json.load(open(os.path.join(tmp, "ranks.json")))["pid"]
    for t in truths:
        p = process(rep, t["pid"])
        check_books(rep, p, t)
        check_eq((p["rank"], p["local_rank"], p["world_size"]), (None, None, None),
                 "no environment read")
    jobs = [j for j in rep["jobs"] if j["job"] == launcher]
    check_eq(len(jobs), 1, f"one job of the launcher: {rep['jobs']}")
    check_eq(jobs[0]["grouped_by"], "parent", "grouped by parent")
    check_eq(jobs[0]["imbalance"]["pid"], truths[1]["pid"], "the leaking process")
    check(re.search(rf"imbalance: PID {truths[1]['pid']} holds", tr.stdout()),
          "named by PID in the text report")


def test_a_recorded_job_keeps_its_parent(tmp):
    """A recording is read with no /proc of its processes: the ranks' parent comes from
    the fork records, so the report of the recording groups them as the live one does.
    The same holds live for ranks already reaped when their first records are read."""
    rec = os.path.join(tmp, "ranks.rec")
    rc = subprocess.run([GPULEAK, "record", "-q", "-o", rec, "--",
                         os.path.join(WORKLOADS, "wl_ranks"), "--no-wait",
                         "--truth", os.path.join(tmp, "ranks.json")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    check_eq(rc.returncode, 0, f"record's exit status: {rc.stderr.decode(errors='replace')}")
    out = os.path.join(tmp, "report.json")
    rc = subprocess.run([GPULEAK, "report", rec, "--json", out], stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, timeout=60)
    check_eq(rc.returncode, 0, f"report's exit status: {rc.stderr.decode(errors='replace')}")
    with open(out) as f:
        rep = json.load(f)
    launcher = json.load(open(os.path.join(tmp, "ranks.json")))["pid"]
    ranks = sorted(json.load(open(os.path.join(tmp, f"ranks.json.rank{r}")))["pid"]
                   for r in range(2))
    for pid in ranks:
        check_eq(process(rep, pid)["ppid"], launcher, f"PID {pid}'s parent")
    jobs = [j for j in rep["jobs"] if j["job"] == launcher]
    check_eq(len(jobs), 1, f"one job of the launcher: {rep['jobs']}")
    check_eq(jobs[0]["grouped_by"], "parent", "grouped by parent")


def metric_lines(text, name, pid):
    return [ln for ln in text.splitlines()
            if ln.startswith(name + "{") and f'pid="{pid}"' in ln]


def test_serve_per_gpu_series_and_ranks(tmp):
    """serve with an NVML of two GPUs that lists the DataParallel process on both, its
    device 0 on GPU 1 and device 1 on GPU 0 (only the bytes allow that order): every
    per-device series carries gpu and UUID as dcgm-exporter spells them, the imbalance
    series names device 0; a job's ranks carry rank and local_rank labels and the job its
    own series."""
    agent, port, nvml = agent_on_two_gpus(tmp, "--ranks-from-env")
    base = f"http://127.0.0.1:{port}"
    dp = ranks = None
    try:
        agent.wait_serving()
        dp = Workload("wl_dp", tmp=tmp, wait=False, hold=True)
        truth = dp.truth()
        by_dev = truth["device_bytes_by_device"]
        with open(nvml, "a") as f:
            # GPU 0's figure is below device 0's bytes: ascending order is ruled out
            f.write(f"proc 0 {dp.pid} {by_dev[1] + (1 << 20)}\n")
            f.write(f"proc 1 {dp.pid} {by_dev[0] + (300 << 20)}\n")
        ranks = Workload("wl_ranks", tmp=tmp, wait=False, hold=True)
        ranks.truth()
        rtruths = rank_truths(ranks)
        want = {f'cuda_device="0",gpu="1",UUID="GPU-fake-1"': by_dev[0],
                f'cuda_device="1",gpu="0",UUID="GPU-fake-0"': by_dev[1]}
        text = [""]

        def labelled():
            try:
                text[0] = get(f"{base}/metrics", timeout=20)
            except OSError:
                return False
            lines = metric_lines(text[0], "gpuleak_process_device_memory_bytes", dp.pid)
            return len(lines) == 2 and all(any(k in ln for ln in lines) for k in want)
        # NVML is sampled every 10 s
        wait_until(labelled, 60, f"the DataParallel process's two device series {want}")
        t = text[0]
        for ln in metric_lines(t, "gpuleak_process_device_memory_bytes", dp.pid):
            key = next(k for k in want if k in ln)
            check_eq(int(ln.split()[-1]), want[key], f"bytes of {key}")
        im = metric_lines(t, "gpuleak_process_device_imbalance_bytes", dp.pid)
        check_eq(len(im), 1, f"one imbalance series: {im}")
        check('cuda_device="0",gpu="1",UUID="GPU-fake-1",peer_cuda_device="1"' in im[0],
                f"the imbalance names device 0 on GPU 1: {im[0]}")
        check_eq(int(im[0].split()[-1]), by_dev[0] - by_dev[1], "the imbalance's bytes")
        for r, rt in enumerate(rtruths):
            lines = metric_lines(t, "gpuleak_process_device_memory_bytes", rt["pid"])
            check(lines and f'rank="{r}",local_rank="{r}"' in lines[0],
                  f"rank {r}'s device series carry rank and local_rank: {lines}")
            nccl = metric_lines(t, "gpuleak_process_outside_torch_bytes", rt["pid"])
            check_eq([int(ln.split()[-1]) for ln in nccl if 'library="nccl"' in ln],
                     [rt["nccl_bytes"]], f"rank {r}'s NCCL bytes")
            check(f'cuda_device="{r % 2}"' in nccl[0], "NCCL's series is per device")
        job = [ln for ln in t.splitlines()
               if ln.startswith("gpuleak_job_device_memory_bytes{") and
               f'job="{ranks.pid}"' in ln]
        check_eq(len(job), 1, "the job's series")
        check('grouped_by="environment"' in job[0], f"grouped by RANK: {job[0]}")
        jim = metric_lines(t, "gpuleak_job_imbalance_bytes", rtruths[1]["pid"])
        check(jim and f'job="{ranks.pid}"' in jim[0], f"rank 1 out of balance: {jim}")
        for ln in t.splitlines():
            if ln.startswith("gpuleak_") and f'pid="{dp.pid}"' in ln and "cuda_device=" in ln \
                    and 'cuda_device="unknown"' not in ln:
                check('UUID="GPU-fake-' in ln, f"every per-device series is named: {ln}")
    finally:
        for w in (dp, ranks):
            if w:
                w.release()
                w.wait()
        check_eq(agent.stop(), 0, "serve's exit status")


def test_top_plain_shows_gpus_and_the_job(tmp):
    """top (stdout not a terminal: plain blocks) over every process: the DataParallel
    process's row splits its memory per GPU; a line for the job with its ranks and rank
    1's leak at the marked line."""
    out, err = os.path.join(tmp, "top.out"), os.path.join(tmp, "top.err")
    with open(out, "wb") as f, open(err, "wb") as e:
        top = subprocess.Popen([GPULEAK, "top", "--libcuda", FAKECUDA, "--ranks-from-env",
                                "-i", "500ms"], stdout=f, stderr=e, stdin=subprocess.DEVNULL)
        wait_until(lambda: "tracing every process" in open(err).read() or
                   top.poll() is not None, 120, "top to attach")
        dp = Workload("wl_dp", tmp=tmp, wait=False, hold=True)
        ranks = Workload("wl_ranks", tmp=tmp, wait=False, hold=True)
        by_dev = dp.truth()["device_bytes_by_device"]
        ranks.truth()
        truths = rank_truths(ranks)
        want = (rf"JOB {ranks.pid}: 2 ranks, device [\d.]+ MiB; imbalance: rank 1 "
                rf"\(PID {truths[1]['pid']}\) \+[\d.]+ MiB over the next, at ddp_site_leak")
        row = rf"\n\s*{dp.pid} wl_dp .*  cuda0 {by_dev[0] >> 20}.00 MiB cuda1 " \
              rf"{by_dev[1] >> 20}.00 MiB\n"
        try:
            wait_until(lambda: re.search(want, open(out).read()) and
                       re.search(row, open(out).read()), 60, "top's job line and GPU split")
        finally:
            text = open(out).read()
            top.send_signal(signal.SIGINT)
            check_eq(top.wait(30), 0, f"top's exit status at SIGINT: {open(err).read()}")
            for w in (dp, ranks):
                w.release()
                w.wait()
    check(re.search(want, text), f"top's job line:\n{text[-2000:]}")
    check(re.search(row, text), "the DataParallel row splits its memory per GPU")


def test_explain_names_the_imbalance(tmp):
    """explain's answer carries the GPUs and the imbalance line too."""
    wl = Workload("wl_dp", "--interval-ms", "50", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["explain", "-d", "3s", str(wl.pid)], tmp, json_report=False)
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    check_eq(tr.wait(30), 0, "explain's exit status")
    wl.release()
    wl.wait()
    text = tr.stdout()
    by_dev = truth["device_bytes_by_device"]
    check(f"GPUs: cuda 0 {by_dev[0] >> 20}.00 MiB; cuda 1 {by_dev[1] >> 20}.00 MiB" in text,
          f"explain lists the GPUs:\n{text}")
    check(re.search(r"imbalance: cuda 0 holds .*\n\s+\+[\d.]+ MiB device at dp_site_gather",
                    text), "explain names the gathering stack")
