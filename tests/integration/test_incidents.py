# SPDX-License-Identifier: BSD-2-Clause
"""The flight recorder: a bundle for each out-of-memory failure that reaches the program,
each traced process killed by a signal and each that exits holding memory where it
leaked, written by gpuleak from its books at once, so that a job killed right after its
failure still leaves one; bounded in count and bytes, readable by gpuleak report, listed
by serve."""
import json
import os
import signal
import stat
import subprocess
import urllib.request

from test_node_safety import _guard_of, _proc_state
from harness import (FAKECUDA, GPULEAK, OUTPUT, ROOT, Agent, Tracer, Workload,
                     build_fake_nvml, check, check_eq, free_port, process, wait_until,
                     _readline)

PYTHON = "/usr/bin/python3"
OOM_SCRIPT = os.path.join(ROOT, "tests", "workloads", "py_oom_census.py")
FAKETORCH = os.path.join(OUTPUT, "faketorch", "libc10_cuda.so")

FILES = ("incident.json", "report.txt", "report.json", "profile.pb.gz", "flame.svg",
         "history.trace.json", "report.html")


def _bundles(d):
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def _check_bundle(d, name, cause, pid):
    """A whole bundle: its files, 0600 in a 0700 directory; incident.json says what and
    who. Returns (incident, report's process)."""
    path = os.path.join(d, name)
    check_eq(stat.S_IMODE(os.stat(path).st_mode), 0o700, f"{name}: the directory's mode")
    check_eq(sorted(os.listdir(path)), sorted(FILES), f"{name}: its files")
    for f in FILES:
        check_eq(stat.S_IMODE(os.stat(os.path.join(path, f)).st_mode), 0o600, f"{f}'s mode")
        check(os.path.getsize(os.path.join(path, f)) > 0, f"{f} is not empty")
    with open(os.path.join(path, "incident.json")) as f:
        inc = json.load(f)
    check_eq((inc["cause"], inc["process"]["pid"]), (cause, pid), f"the incident: {inc}")
    check(inc["complete"], f"{name}: complete (its books agree with the kernel's counters)")
    with open(os.path.join(path, "report.json")) as f:
        rep = json.load(f)
    check_eq([p["pid"] for p in rep["processes"]], [pid], "the report is the process's")
    with open(os.path.join(path, "history.trace.json")) as f:
        check(json.load(f)["traceEvents"], "the history is a trace")
    return inc, rep["processes"][0]


def _oom_workload(tmp, incident_dir, *tracer_args):
    """wl_oom under attach --incident-dir: three quarters of the stand-in's capacity held,
    then a request beyond it fails (not PyTorch's: no retry)."""
    wl = Workload("wl_oom", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--incident-dir", incident_dir, *tracer_args,
                 str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    return wl, tr


def test_oom_then_sigkill_leaves_both_bundles(tmp):
    """The job runs out of memory and is killed at once (SIGKILL, as the OOM killer or a
    scheduler would): the out-of-memory bundle holds the books at the failure (the bytes
    the workload held then, the failure with its site), the second says it was killed;
    gpuleak report reads either."""
    d = os.path.join(tmp, "incidents")
    wl, tr = _oom_workload(tmp, d)
    truth = wl.truth()
    wl.kill(signal.SIGKILL)
    wl.wait()
    wait_until(lambda: os.path.isdir(d) and any(n.endswith("-killed") for n in _bundles(d)),
               10, "the bundle of the killed process")
    tr.stop()
    check_eq(tr.returncode, 0, f"gpuleak's exit status:\n{tr.stderr()}")
    names = _bundles(d)
    oom = [n for n in names if n.endswith("-oom")]
    killed = [n for n in names if n.endswith("-killed")]
    check_eq((len(oom), len(killed), len(names)),
             (truth["expect"]["oom_failures"], 1, truth["expect"]["oom_failures"] + 1),
             f"a bundle per out-of-memory failure (device, pinned host), one killed: {names}")
    inc, p = _check_bundle(d, oom[0], "oom", wl.pid)
    check("out of memory" in inc["what"] and "oom_site_too_big" in inc["what"],
          f"what happened, and where: {inc['what']}")
    check_eq(p["device_bytes"], truth["device_bytes"], "device bytes held at the failure")
    check(any(f["error"] == "CUDA_ERROR_OUT_OF_MEMORY" for f in p["failures_list"]),
          "the failure is in the report")
    inc, p = _check_bundle(d, killed[0], "killed", wl.pid)
    check("signal 9" in inc["what"], f"the signal: {inc['what']}")
    check_eq(p["state"], "exited", "killed: the process had exited")
    out = subprocess.run([GPULEAK, "report", os.path.join(d, oom[0])], capture_output=True,
                         text=True, timeout=60)
    check_eq(out.returncode, 0, f"report of a bundle ({out.stderr})")
    check("oom_site_too_big" in out.stdout and "also in the bundle: report.json" in out.stdout,
          out.stdout)
    check(f"its incident is in {d}/{oom[0]}" in tr.stderr(), "the log names the bundle")


def test_a_job_killed_before_its_records_are_read_keeps_its_sites(tmp):
    """attach PID, then gpuleak stopped (as a busy or frozen agent) while the job runs out
    of memory and is killed: its records are read once it is gone, and its bundles still
    name the failing call's site and the process, from what gpuleak read of it at the
    attach."""
    d = os.path.join(tmp, "incidents")
    wl = Workload("wl_oom", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--incident-dir", d, str(wl.pid)], tmp)
    tr.wait_attached()
    thaw = _frozen([tr.proc.pid, _guard_of(tr.proc.pid)])
    try:
        wl.go()
        truth = wl.truth()
        wl.kill(signal.SIGKILL)
        wl.wait()
        check(not (os.path.isdir(d) and _bundles(d)), "no bundle while gpuleak is stopped")
    finally:
        thaw()
    wait_until(lambda: os.path.isdir(d) and any(n.endswith("-killed") for n in _bundles(d)),
               10, "the bundle of the killed process")
    tr.stop()
    oom = [n for n in _bundles(d) if n.endswith("-oom")]
    check_eq(len(oom), truth["expect"]["oom_failures"], f"the out-of-memory bundles: {oom}")
    for name in oom:
        inc, p = _check_bundle(d, name, "oom", wl.pid)
        check("at oom_site_too_big" in inc["what"], f"{name}: the site: {inc['what']}")
        check_eq(inc["process"]["comm"], "wl_oom", f"{name}: the process's name")
        check_eq(p["comm"], "wl_oom", f"{name}: the report's process")


def test_a_python_job_killed_before_any_record_is_read(tmp):
    """The same with a Python job (py_oom_census.py) and gpuleak stopped from before its
    first step until it is killed: its code objects were never read while it lived, and
    the bundle says that the Python frame of the failing call could not be read, with the
    process's name, rather than print question marks for a file and a line."""
    d = os.path.join(tmp, "incidents")
    wl = subprocess.Popen([PYTHON, OOM_SCRIPT, "--lib", FAKECUDA, "--torch-lib", FAKETORCH,
                           "--truth", os.path.join(tmp, "oom.json"), "--steps", "3"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        check_eq(_readline(wl.stdout, 60, "py_oom_census.py to say ready"),
                 f"ready {wl.pid}", "py_oom_census.py's first line")
        tr = Tracer(["attach", "-i", "0", "--incident-dir", d, str(wl.pid)], tmp)
        tr.wait_attached()
        thaw = _frozen([tr.proc.pid, _guard_of(tr.proc.pid)])
        try:
            wl.stdin.write(b"go\n")
            wl.stdin.flush()
            _readline(wl.stdout, 60, "py_oom_census.py to say failed")
            wl.kill()
            wl.wait()
        finally:
            thaw()
        wait_until(lambda: os.path.isdir(d) and any(n.endswith("-killed") for n in _bundles(d)),
                   10, "the bundle of the killed process")
        tr.stop()
    finally:
        if wl.poll() is None:
            wl.kill()
            wl.wait()
    oom = [n for n in _bundles(d) if n.endswith("-oom")]
    check_eq(len(oom), 1, f"the out-of-memory bundle: {_bundles(d)}")
    inc, _ = _check_bundle(d, oom[0], "oom", wl.pid)
    check(inc["what"].endswith("at a Python frame whose code gpuleak could not read"),
          f"the site: {inc['what']}")
    check_eq(inc["process"]["comm"], "python3", "the process's name")


def test_a_normal_exit_after_the_oom_and_a_saved_retry(tmp):
    """A job that runs out of memory and exits normally leaves the out-of-memory bundle
    only; a PyTorch request that its own retry saves (a cached segment freed, the retry
    succeeds) leaves none."""
    d = os.path.join(tmp, "incidents")
    wl, tr = _oom_workload(tmp, d)
    wl.truth()
    wl.release()
    check_eq(wl.wait(), 0, "the workload's exit status")
    tr.stop()
    names = _bundles(d)
    check(names and all(n.endswith("-oom") for n in names),
          f"the out-of-memory bundles alone: {names}")

    d2 = os.path.join(tmp, "retry")
    libdir = build_fake_nvml(tmp)
    env = dict(os.environ, LD_LIBRARY_PATH=libdir,
               FAKE_NVML_FILE=os.path.join(tmp, "nvml.txt"))
    with open(env["FAKE_NVML_FILE"], "w") as f:
        f.write(f"device {60 << 20} {4 << 20} GPU-fake-0\n")
    wl = Workload("wl_explain", "--scenario", "retry_ok", tmp=tmp, hold=True)
    wl.wait_ready()
    # held at its first failure (--census-on-oom), let go at once: PyTorch's retry follows
    tr = Tracer(["attach", "-i", "0", "--incident-dir", d2, "--census-on-oom", str(wl.pid)],
                tmp, env=env)
    tr.wait_attached()
    wl.go()
    truth = wl.truth()
    wl.release()
    wl.wait()
    tr.stop()
    p = process(tr.report(), wl.pid)
    ooms = [f for f in p["failures_list"] if f["error"] == "CUDA_ERROR_OUT_OF_MEMORY"]
    check_eq(len(ooms), truth["expect"]["oom_failures"], "the failure was booked")
    check_eq(ooms[0]["oom"]["torch_retry"], "succeeded", "PyTorch's retry saved it")
    check_eq(_bundles(d2), [], "no incident")


def test_retention_and_a_full_disk(tmp):
    """Three incidents with --incident-max 2: the oldest goes. On a file system with no
    room the bundle is not written, no partial one is left, the log says so once, and the
    tracing and its report go on."""
    d = os.path.join(tmp, "incidents")
    for _ in range(3):
        wl, tr = _oom_workload(tmp, d, "--incident-max", "2")
        wl.truth()
        wl.release()
        wl.wait()
        tr.stop()
    names = _bundles(d)
    check_eq(len(names), 2, f"two bundles kept of the six written: {names}")
    full = os.path.join(tmp, "full")
    os.makedirs(full)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", full], check=True)
    try:
        wl, tr = _oom_workload(tmp, os.path.join(full, "incidents"))
        truth = wl.truth()
        wl.release()
        wl.wait()
        tr.stop()
        check_eq(tr.returncode, 0, "gpuleak's exit status")
        err = tr.stderr()
        check("cannot write the incident" in err and "it is lost" in err, err)
        check_eq(os.listdir(os.path.join(full, "incidents")), [], "nothing partial left")
        p = process(tr.report(), wl.pid)
        check_eq(p["device_bytes"], truth["device_bytes"], "the report goes on, exact")
    finally:
        subprocess.run(["umount", full], check=False)


def test_serve_keeps_incidents_in_its_state_dir(tmp):
    """serve writes the bundles under --state-dir/incidents, counts them by cause in
    gpuleak_incidents_total, lists them at /incidents and serves their files."""
    state = os.path.join(tmp, "state")
    os.makedirs(state, mode=0o700)
    port = free_port()
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--state-dir", state])
    try:
        agent.wait_serving()
        wl = Workload("wl_oom", tmp=tmp, wait=False)
        wl.truth()
        wl.wait()
        d = os.path.join(state, "incidents")
        wait_until(lambda: os.path.isdir(d) and len(_bundles(d)) == 2, 10, "the bundles")
        name = _bundles(d)[0]
        _check_bundle(d, name, "oom", wl.pid)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        check('gpuleak_incidents_total{cause="oom"} 2' in metrics, "the counter")
        with urllib.request.urlopen(f"{base}/incidents", timeout=10) as r:
            listed = json.loads(r.read())
        check_eq(sorted(i["name"] for i in listed["incidents"]), _bundles(d),
                 "/incidents lists them")
        link = next(f for i in listed["incidents"] if i["name"] == name
                    for f in i["files"] if f.endswith("report.txt"))
        with urllib.request.urlopen(f"{base}{link}", timeout=10) as r:
            text = r.read().decode()
        check("oom_site_too_big" in text, f"its text report is served:\n{text}")
        for bad in ("/incidents/../state", f"/incidents/{name}/../../x", "/incidents/x/y"):
            try:
                urllib.request.urlopen(f"{base}{bad}", timeout=10)
                check(False, f"{bad} is refused")
            except urllib.error.HTTPError as e:
                check_eq(e.code, 404, f"{bad}")
        # an out-of-memory failure followed at once by SIGKILL: both bundles, the first
        # with the books as they were at the failure
        wl = Workload("wl_oom", tmp=tmp, wait=False, hold=True)
        truth = wl.truth()
        wl.kill(signal.SIGKILL)
        wl.wait()
        wait_until(lambda: any(n.endswith(f"-pid{wl.pid}-killed") for n in _bundles(d)), 10,
                   "the killed process's bundle")
        mine = [n for n in _bundles(d) if f"-pid{wl.pid}-" in n]
        check_eq(sorted(n.rsplit("-", 1)[1] for n in mine), ["killed", "oom", "oom"],
                 f"its bundles: {mine}")
        _, p = _check_bundle(d, next(n for n in mine if n.endswith("-oom")), "oom", wl.pid)
        check_eq(p["device_bytes"], truth["device_bytes"], "device bytes at the failure")
        out = subprocess.run([GPULEAK, "report", os.path.join(d, mine[0])],
                             capture_output=True, text=True, timeout=60)
        check_eq(out.returncode, 0, f"gpuleak report reads it: {out.stderr}")
    finally:
        check(agent.stop() != "hung", "serve stops on SIGTERM")


def test_exit_holding_leaked_memory(tmp):
    """A loop that keeps a buffer every step (20 steps of 50 ms, judged at 50 ms) and exits
    normally: a leak_at_exit bundle, its report naming the leaking line."""
    d = os.path.join(tmp, "incidents")
    wl = Workload("wl_leak", "--iters", "20", "--interval-ms", "50", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--resolution", "50ms", "--incident-dir", d,
                 str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    wl.truth()
    wl.release()
    check_eq(wl.wait(), 0, "the workload's exit status")
    wait_until(lambda: os.path.isdir(d) and _bundles(d), 10, "the bundle")
    tr.stop()
    names = _bundles(d)
    check_eq(len(names), 1, f"one bundle: {names}")
    inc, p = _check_bundle(d, names[0], "leak_at_exit", wl.pid)
    check("exited (status 0) holding" in inc["what"], inc["what"])
    leak = [s for s in p["stacks"] if s["verdict"] == "leak"]
    check(leak and any(f.get("function") == "leak_site_staircase"
                       for f in leak[0]["frames"]), f"the leaking line: {leak[:1]}")


def _frozen(pids):
    """The processes stopped (as a cgroup freezer stops them) while the host is kept busy
    (a spinning process per CPU: the kernel sends a BPF timer's signal only while a user
    task runs on its CPU, as on a GPU node); a function that thaws them."""
    spinners = [subprocess.Popen([PYTHON, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)

    def thaw():
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        for p in spinners:
            p.kill()
            p.wait()
    return thaw


def _python_oom(tmp, tracer_args, steps=24, interval_ms=10, freeze=False):
    """py_oom_census.py (Debian's PyTorch, the CUDA stand-ins) under attach: a list that
    gains a declared tensor a step, then a request the stand-in cannot meet (with freeze,
    gpuleak and its guard are stopped meanwhile). Returns (the bundles' directory, its one
    oom bundle, the truth, the program's "failed" line, the tracer)."""
    d = os.path.join(tmp, "incidents")
    truth_path = os.path.join(tmp, "oom.json")
    wl = subprocess.Popen([PYTHON, OOM_SCRIPT, "--lib", FAKECUDA, "--torch-lib", FAKETORCH,
                           "--truth", truth_path, "--steps", str(steps),
                           "--interval-ms", str(interval_ms)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        check_eq(_readline(wl.stdout, 60, "py_oom_census.py to say ready"),
                 f"ready {wl.pid}", "py_oom_census.py's first line")
        tr = Tracer(["attach", "-i", "0", "--tensors", "full", "--incident-dir", d,
                     *tracer_args, str(wl.pid)], tmp)
        tr.wait_attached()
        thaw = _frozen([tr.proc.pid, _guard_of(tr.proc.pid)]) if freeze else None
        try:
            wl.stdin.write(b"go\n")
            wl.stdin.flush()
            failed = _readline(wl.stdout, 60, "py_oom_census.py to say failed").split()
        finally:
            if thaw:
                thaw()
        wait_until(lambda: os.path.isdir(d) and _bundles(d), 10, "the bundle")
        with open(truth_path) as f:
            truth = json.load(f)
        wl.stdin.close()
        check_eq(wl.wait(timeout=30), 0, "the program ran on and exited normally")
        tr.stop()
        check_eq(tr.returncode, 0, f"gpuleak's exit status:\n{tr.stderr()}")
        # the list's line may leave a leak_at_exit bundle too, as the program exits
        names = [n for n in _bundles(d) if n.endswith("-oom")]
        check_eq(len(names), 1, f"one bundle for the failure: {_bundles(d)}")
        return d, names[0], truth, failed, tr
    finally:
        if wl.poll() is None:
            wl.kill()
            wl.wait()


def test_census_on_oom_names_the_list_that_holds_the_tensors(tmp):
    """--census-on-oom: the process is held as its failing call returns, before the
    program sees the error; its census, joined with the books, goes into the bundle: the
    list that gained a tensor a step is named with every tensor, beside the line that made
    them; the pause is written into the bundle and bounded, and the program ran on."""
    # a step every 50 ms, judged at 50 ms: the list's line is judged to leak
    d, name, truth, failed, tr = _python_oom(tmp, ["--census-on-oom", "--hold-timeout", "4s",
                                                  "--resolution", "50ms"], interval_ms=50)
    path = os.path.join(d, name)
    check_eq(sorted(os.listdir(path)), sorted(FILES + ("census.json", "census.txt")),
             f"{name}: the census's files too")
    for f in ("census.json", "census.txt"):
        check_eq(stat.S_IMODE(os.stat(os.path.join(path, f)).st_mode), 0o600, f"{f}'s mode")
    with open(os.path.join(path, "incident.json")) as f:
        inc = json.load(f)
    c = inc["census"]
    check(c["taken"] and c["held"] and not c["past_deadline"], f"the census was taken: {c}")
    check_eq(failed[:2], ["failed", "2"], "the program saw CUDA_ERROR_OUT_OF_MEMORY")
    # the program's own clock saw the pause: at least what gpuleak says it held it
    check(0 < c["held_ms"] <= float(failed[2]) + 1 and c["held_ms"] < 4000,
          f"the pause, bounded and written: {c['held_ms']} ms held, the call took "
          f"{failed[2]} ms")
    check("held" in c["note"], c["note"])
    with open(os.path.join(path, "census.json")) as f:
        census = json.load(f)
    check_eq(census["pid"], inc["process"]["pid"], "the census is the process's")
    group = [g for g in census["groups"] if g["holder"] == "__main__.results"]
    check(group, f"the list is named: {[g['holder'] for g in census['groups']]}")
    check_eq((group[0]["kind"], group[0]["length"], group[0]["tensors"]),
             ("list", truth["length"], truth["length"]), "every tensor of the list")
    held = {t["data"] for t in census["tensors"]
            if any(h.startswith("__main__.results[") for h in t["holders"])}
    check_eq(held, set(truth["data"]), "the list's tensors are the program's")
    leaks = census["join"]["leaks"]
    check(any("__main__.results" in l["holders"] and "step (" in l["site"] and
              l["tensors"] == truth["length"] for l in leaks),
          f"the line that made them, beside the list: {leaks}")
    # one sentence: what holds them, the pattern, the usual fix
    check(leaks[0]["reading"].startswith(f"__main__.results, a list of {truth['length']}, "
                                         f"holds all of its {truth['length']} tensors") and
          ".item()" in leaks[0]["reading"], f"the leak's reading: {leaks[0]['reading']}")
    with open(os.path.join(path, "report.txt")) as f:
        report = f.read()
        check("the usual fix: keep .item() of numbers" in report,
              f"the report's leak entry says what usually fixes it:\n{report}")
    with open(os.path.join(path, "census.txt")) as f:
        check("held by __main__.results (a list of" in f.read(), "the census's text")
    with open(os.path.join(path, "report.html")) as f:
        page = f.read()
    data = json.loads(page.split('<script id="gl-data" type="application/json">\n', 1)[1]
                      .split("</script>", 1)[0])
    check_eq([(h["holder"], h["kind"], h["tensors"]) for h in data["processes"][0]["holders"]],
             [("__main__.results", "list", truth["length"])],
             "the bundle's HTML report names the holder beside the leak")
    out = subprocess.run([GPULEAK, "report", path], capture_output=True, text=True,
                         timeout=60)
    check_eq(out.returncode, 0, f"gpuleak report reads it: {out.stderr}")


def test_without_census_on_oom_the_bundle_says_how_to_have_one(tmp):
    """Without --census-on-oom the process is not held: the bundle has no census, and says
    how to have one next time."""
    d, name, _, failed, _ = _python_oom(tmp, [], steps=4)
    check_eq(sorted(os.listdir(os.path.join(d, name))), sorted(FILES), "no census files")
    with open(os.path.join(d, name, "incident.json")) as f:
        c = json.load(f)["census"]
    check(not c["taken"] and not c["held"] and "--census-on-oom" in c["note"], f"{c}")
    check_eq(failed[:2], ["failed", "2"], "the program saw the failure")


def test_a_frozen_agent_holds_a_failing_job_only_until_the_deadline(tmp):
    """--census-on-oom, and the agent and its guard frozen at the failure: the kernel's
    timer lets the job go at --hold-timeout (a hold made in a uprobe, which may not start
    a timer, has its deadline started as the SIGSTOP is taken). Thawed, gpuleak writes the
    bundle; its census says the deadline ended the hold, and was read as the job ran on
    (within the deadline's time again: 2 s, which a busy machine under ASan needs)."""
    d, name, _, failed, tr = _python_oom(tmp, ["--census-on-oom", "--hold-timeout", "2s"],
                                         steps=4, freeze=True)
    check_eq(failed[:2], ["failed", "2"], "the program saw the failure")
    check(1900 <= float(failed[2]) < 4000,
          f"the job was held about 2 s, then ran: {failed[2]} ms")
    with open(os.path.join(d, name, "incident.json")) as f:
        c = json.load(f)["census"]
    check(c["held"] and c["past_deadline"] and c["held_ms"] is None,
          f"held until the deadline, for a time not measured: {c}")
    check("deadline" in c["note"] and "may be torn" in c["note"], c["note"])


def _environ(pid):
    """/proc/PID/environ, b"" where it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_every_rank_of_a_killed_job_leaves_a_bundle_grouped_by_job(tmp):
    """A launcher and two ranks under serve --ranks-from-env, both ranks killed (as a
    scheduler kills a job) while the agent is stopped, so that it reads their records only
    once they are dead (unreaped: no environment left in /proc): a bundle per rank, each
    named and marked with its job (the launcher's PID) and its rank, as the environment
    said when the rank mapped libcuda; /incidents groups them by job."""
    state = os.path.join(tmp, "state")
    os.makedirs(state, mode=0o700)
    port = free_port()
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--state-dir", state,
                        "--ranks-from-env"])
    ranks = None
    try:
        agent.wait_serving()
        thaw = _frozen([agent.proc.pid, _guard_of(agent.proc.pid)])
        try:
            # names that start like the three; the three again after the ranks' own
            # (wl_ranks puts the launcher's after: the first of a name is getenv()'s),
            # an int, a value that is no int and an empty one; and a variable that
            # puts the ranks' own past the first chunks of the environment BPF reads
            env = dict(os.environ, RANK="7", LOCAL_RANK="x1", WORLD_SIZE="", RANKX="9",
                       LOCAL_RANKS="5", WORLD="3", R="", PAD="a" * 3000)
            ranks = Workload("wl_ranks", tmp=tmp, wait=False, hold=True, env=env)
            ranks.truth()
            pids = [json.load(open(f"{ranks.truth_path}.rank{r}"))["pid"] for r in range(2)]
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: all(_proc_state(pid) in ("Z", None) for pid in pids), 10,
                       "the ranks dead")
            for pid in pids:
                check_eq(_environ(pid), b"", "a dead rank's environment is gone from /proc")
        finally:
            thaw()
        d = os.path.join(state, "incidents")
        wait_until(lambda: os.path.isdir(d) and
                   len([n for n in _bundles(d) if n.endswith("-killed")]) == 2, 10,
                   "a bundle per killed rank")
        names = sorted(n for n in _bundles(d) if n.endswith("-killed"))
        for r, pid in enumerate(pids):
            name = next((n for n in names if f"-pid{pid}-" in n), None)
            check(name and f"-job{ranks.pid}-rank{r}-pid{pid}-killed" in name,
                  f"rank {r}'s bundle names its job and rank: {names}")
            with open(os.path.join(d, name, "incident.json")) as f:
                inc = json.load(f)
            check_eq((inc["process"]["rank"], inc["process"]["local_rank"],
                      inc["process"]["world_size"], inc["job"]["launcher_pid"],
                      inc["job"]["basis"], sorted(inc["job"]["member_pids"])),
                     (r, r, 2, ranks.pid, "environment", sorted(pids)), f"rank {r}'s job")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/incidents", timeout=10) as r:
            listed = json.loads(r.read())
        jobs = [j for j in listed["jobs"] if j["job"] == ranks.pid]
        check(len(jobs) == 1 and set(names) <= set(jobs[0]["incidents"]),
              f"/incidents groups the ranks' bundles by job: {listed['jobs']}")
        check(all(i["job"] == ranks.pid for i in listed["incidents"] if i["name"] in names),
              "each listed bundle names its job")
    finally:
        if ranks:
            ranks.release()
            ranks.wait()
        check(agent.stop() != "hung", "serve stops on SIGTERM")
