# SPDX-License-Identifier: BSD-2-Clause
"""An agent on every node must never harm the jobs it watches, nor another agent: no hold
outlives its deadline, two gpuleaks side by side both work, and every cap that bites is
named (the log, gpuleak_cap_hits_total, `complete`)."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

from harness import (FAKECUDA, ROOT, SAN, WORKLOADS, Agent, Tracer, check, check_eq, free_port,
                     process, wait_until)

PYTHON = "/usr/bin/python3"
PYTHON_STACKS = os.path.join(ROOT, "tests", "workloads", "py_stacks.py")


def _copy(tmp, name):
    """A copy of the stand-in that no tracer has seen: mapping it is held."""
    lib = os.path.join(tmp, name, "libcuda.so.1")
    os.makedirs(os.path.dirname(lib))
    shutil.copy(FAKECUDA, lib)
    return lib


def _run_dlopen(tmp, lib, timeout):
    """wl_dlopen loading lib and allocating at once; returns (seconds taken, its truth)."""
    truth_path = os.path.join(tmp, f"dl.{time.monotonic_ns()}.json")
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(WORKLOADS, "wl_dlopen"), "--lib", lib, "--no-wait",
                        "--truth", truth_path], timeout=timeout, capture_output=True,
                       start_new_session=True)
    took = time.monotonic() - t0
    check_eq(p.returncode, 0, f"the workload's exit status ({p.stderr!r})")
    with open(truth_path) as f:
        return took, json.load(f)


def _metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def _metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_two_agents_and_a_job_mapping_a_new_libcuda(tmp):
    """Two serves side by side (a rolling update with surge): a job that maps a libcuda
    neither has seen is held by both; each gpuleak reads the file to attach it and must not
    be held by the other's BPF for doing so. The job runs at once and both agents keep
    answering; each attaches the new file or, when the other's release let the short job
    run and end before it could, names the job as run before its probes were in (the
    report's unheld_mappings, complete: false), never silently."""
    ports = [free_port(), free_port()]
    agents = [Agent(tmp, ["--listen", f"127.0.0.1:{p}"]) for p in ports]
    try:
        for a in agents:
            a.wait_serving()
        lib = _copy(tmp, "new")
        took, truth = _run_dlopen(tmp, lib, timeout=30)
        check(took < 4, f"the job ran within the hold's deadline: {took:.1f} s")
        named = f"PID {truth['pid']} (wl_dlopen) maps libcuda.so.1 and was held, but ran on"
        for a, port in zip(agents, ports):
            wait_until(lambda a=a: f"functions in {lib}" in a.stderr() or named in a.stderr(),
                       10, "each agent to attach the new file or name the job")
            text = _metrics(port)  # it answers
            if f"functions in {lib}" in a.stderr():
                check(_metric(text, "gpuleak_libraries_attached") >= 2,
                      "an agent that attached the new file counts it")
        check(sum(f"functions in {lib}" in a.stderr() for a in agents) >= 1,
              "one agent at least attached the new file")
        for a in agents:
            check("past the hold's deadline" not in a.stderr(),
                  f"no hold had to expire:\n{a.stderr()}")
        check(truth["alloc_calls"] > 0, "the job made its calls")
    finally:
        for a in agents:
            check(a.stop() != "hung", "serve stops on SIGTERM")


def _guard_of(pid):
    """The PID of a gpuleak's guard (its child named gpuleak-guard)."""
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except (OSError, ValueError):
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        if comm == "gpuleak-guard" and int(st[st.rindex(")") + 2:].split()[1]) == pid:
            return int(d)
    raise AssertionError(f"gpuleak {pid} has no guard")


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return None
    return st[st.rindex(")") + 2]


def test_two_tracers_both_trace_a_job_from_its_first_call(tmp):
    """Two gpuleaks side by side meet a job that maps a libcuda neither has attached, one
    of them slow for a moment (stopped 0.5 s: a starved cgroup). Both hold the job; the
    one done attaching first finds the other's entry in the book of holds they share and
    leaves the job stopped; the slow one, done in turn, continues it. Each books every
    call of the job, its figures complete, and neither says the job ran before its
    probes."""
    trs = [Tracer(["attach", "-a", "-i", "0"], tmp) for _ in range(2)]
    for tr in trs:
        wait_until(lambda tr=tr: "tracing every process" in tr.stderr(), 20,
                   "each tracer to start")
    lib = _copy(tmp, "both")
    truth_path = os.path.join(tmp, "both.truth.json")
    slow = trs[1].proc.pid
    os.kill(slow, signal.SIGSTOP)
    try:
        job = subprocess.Popen([os.path.join(WORKLOADS, "wl_dlopen"), "--lib", lib,
                                "--no-wait", "--truth", truth_path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
        wait_until(lambda: f"functions in {lib}" in trs[0].stderr(), 10,
                   "the tracer that runs to attach the new file")
        time.sleep(0.5)
        check_eq(_proc_state(job.pid), "T",
                 "the job stays held while the slow tracer has not attached")
    finally:
        os.kill(slow, signal.SIGCONT)
    check_eq(job.wait(20), 0, "the job's exit status")
    with open(truth_path) as f:
        truth = json.load(f)
    for tr in trs:
        wait_until(lambda tr=tr: f"functions in {lib}" in tr.stderr(), 10,
                   "each tracer to attach the new file")
        tr.stop()
        err = tr.stderr()
        check("before its probes were in" not in err and "deadline" not in err, err)
        rep = tr.report()
        p = process(rep, truth["pid"])
        check_eq(p["alloc_calls"], truth["alloc_calls"], "the job's calls, in each tracer")
        check_eq(p["free_calls"], truth["free_calls"], "the job's frees, in each tracer")
        check(rep["complete"] is True,
              f"the figures complete in each tracer: {rep.get('incomplete_why')}")


def test_a_frozen_agent_beside_a_live_one_holds_a_job_only_until_the_deadline(tmp):
    """Two agents, one frozen with its guard (a cgroup freezer stops both): the live one
    attaches the new file and leaves the job to the other's hold, which its own guard
    ends at the deadline. The job runs after about --hold-timeout, traced from its first
    call by the live agent."""
    trs = [Tracer(["attach", "-a", "-i", "0", "--hold-timeout", "1s"], tmp) for _ in range(2)]
    for tr in trs:
        wait_until(lambda tr=tr: "tracing every process" in tr.stderr(), 20,
                   "each tracer to start")
    frozen = [trs[1].proc.pid, _guard_of(trs[1].proc.pid)]
    lib = _copy(tmp, "frozen")
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        took, truth = _run_dlopen(tmp, lib, timeout=30)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    check(0.9 < took < 3.5, f"the job was held about 1 s, then ran: {took:.1f} s")
    live = trs[0]
    wait_until(lambda: f"functions in {lib}" in live.stderr(), 10,
               "the live tracer to attach the new file")
    wait_until(lambda: "past the hold's deadline" in trs[1].stderr(), 10,
               "the thawed tracer to name its expired hold")
    for tr in trs:
        tr.stop()
    check("before its probes were in" not in live.stderr(), live.stderr())
    p = process(live.report(), truth["pid"])
    check_eq(p["alloc_calls"], truth["alloc_calls"], "the job's calls, in the live tracer")


def test_a_hold_of_a_killed_agent_counts_for_nothing(tmp):
    """An agent killed with its guard (SIGKILL to the pod) while it holds a job beside a
    live one: its entry stays in the shared book, but the live agent's guard sees that its
    gpuleak is gone and continues the job at once, long before the deadline."""
    trs = [Tracer(["attach", "-a", "-i", "0", "--hold-timeout", "20s"], tmp)
           for _ in range(2)]
    for tr in trs:
        wait_until(lambda tr=tr: "tracing every process" in tr.stderr(), 20,
                   "each tracer to start")
    doomed = [trs[1].proc.pid, _guard_of(trs[1].proc.pid)]
    for pid in doomed:
        os.kill(pid, signal.SIGSTOP)
    lib = _copy(tmp, "killed")
    truth_path = os.path.join(tmp, "killed.truth.json")
    job = subprocess.Popen([os.path.join(WORKLOADS, "wl_dlopen"), "--lib", lib, "--no-wait",
                            "--truth", truth_path], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_until(lambda: f"functions in {lib}" in trs[0].stderr(), 10,
                   "the live tracer to attach the new file")
        time.sleep(0.3)
        check_eq(_proc_state(job.pid), "T", "the job stays held while the other holds it")
    finally:
        for pid in doomed:
            os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    check_eq(job.wait(10), 0, "the job's exit status")
    check(time.monotonic() - t0 < 2, f"the job went on soon after the agent was killed: "
                                     f"{time.monotonic() - t0:.1f} s")
    trs[1].proc.wait(10)
    trs[0].stop()
    with open(truth_path) as f:
        truth = json.load(f)
    p = process(trs[0].report(), truth["pid"])
    check_eq(p["alloc_calls"], truth["alloc_calls"], "the job's calls, in the live tracer")


def test_stopped_agent_holds_a_job_only_until_the_deadline(tmp):
    """An agent that cannot run (SIGSTOP here; a starved cgroup or a debugger alike) while
    a job maps a new libcuda: the job is held no longer than --hold-timeout, then runs; once
    the agent runs again it names the process and the library, and its books say the
    process's first calls may be missing."""
    port = free_port()
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--hold-timeout", "1s"])
    try:
        agent.wait_serving()
        lib = _copy(tmp, "late")
        os.kill(agent.proc.pid, signal.SIGSTOP)
        try:
            took, truth = _run_dlopen(tmp, lib, timeout=30)
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        check(0.9 < took < 3.5, f"the job was held about 1 s, then ran: {took:.1f} s")
        pid = truth["pid"]
        wait_until(lambda: "past the hold's deadline" in agent.stderr(), 10,
                   "the agent to name the expired hold")
        err = agent.stderr()
        check(f"PID {pid} (wl_dlopen) maps libcuda.so.1 and was held" in err, err)
        text = _metrics(port)
        check_eq(_metric(text, 'gpuleak_cap_hits_total{cap="hold_timeout"}'), 1.0,
                 "the expired hold is counted")
        check_eq(_metric(text, 'gpuleak_cap_limit{cap="hold_timeout"}'), 1000.0,
                 "the deadline in force, in ms")
    finally:
        check(agent.stop() != "hung", "serve stops on SIGTERM")


def test_a_frozen_agent_and_its_guard_hold_a_job_only_until_the_deadline(tmp):
    """The agent and its guard stopped together (a cgroup freezer stops both), no other
    gpuleak on the host: the kernel side keeps the deadline. A BPF timer continues the job
    at --hold-timeout. The kernel sends that signal only while a user task runs on the
    timer's CPU, so the host here is kept busy, as a GPU node is (a spinning process per
    CPU). Once thawed, the agent names the hold and says the kernel ended it."""
    tr = Tracer(["attach", "-a", "-i", "0", "--hold-timeout", "1s"], tmp)
    wait_until(lambda: "tracing every process" in tr.stderr(), 20, "the tracer to start")
    frozen = [tr.proc.pid, _guard_of(tr.proc.pid)]
    spinners = [subprocess.Popen([PYTHON, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]
    lib = _copy(tmp, "kernel")
    try:
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            took, truth = _run_dlopen(tmp, lib, timeout=30)
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    check(0.9 < took < 3, f"the job was held about 1 s, then ran: {took:.1f} s")
    wait_until(lambda: "past the hold's deadline" in tr.stderr(), 10,
               "the thawed tracer to name the expired hold")
    tr.stop()
    err = tr.stderr()
    check(f"PID {truth['pid']} (wl_dlopen) maps libcuda.so.1 and was held" in err, err)
    check("the kernel side (a BPF timer) let it go" in err, err)
    check(tr.report()["caps"]["hold_timeout"]["expired_holds"] == 1,
          f"the expired hold is counted: {tr.report()['caps']['hold_timeout']}")


# Forks n Python processes that never touch CUDA, batch at a time, each batch alive for
# hold seconds (across a rescan), then killed; prints their PIDs.
_FORKER = r"""
import json, os, sys, time
n, batch, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
done = []
while len(done) < n:
    kids = []
    for _ in range(min(batch, n - len(done) - len(kids))):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    time.sleep(hold)
    for k in kids:
        os.kill(k, 9)
    for k in kids:
        os.waitpid(k, 0)
    done += kids
print(json.dumps(done))
"""


def test_python_processes_that_never_use_cuda_take_no_entry(tmp):
    """4,200 short-lived Python processes that never touch CUDA (DataLoader workers, cron
    jobs, probes), more than the table of Python processes holds (4,096), each alive
    across a rescan of attach -a, then gone; a CUDA Python job started after them still
    gets its Python frames, and nothing was logged about the others."""
    tr = Tracer(["attach", "-a", "-i", "0", "-v", "--rescan", "1s", "--libcuda", FAKECUDA],
                tmp)
    tr.wait_attached()
    forker = subprocess.run([PYTHON, "-c", _FORKER, "4200", "700", "1.6"],
                            capture_output=True, text=True, timeout=120)
    check_eq(forker.returncode, 0, f"the forker's exit status ({forker.stderr[-500:]})")
    idle = json.loads(forker.stdout)
    check_eq(len(idle), 4200, "Python processes that came and went")
    truth_path = os.path.join(tmp, "py.json")
    wl = subprocess.Popen([PYTHON, PYTHON_STACKS, "--lib", FAKECUDA, "--truth", truth_path,
                           "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        wait_until(lambda: f"PID {wl.pid} runs CPython" in tr.stderr(), 20,
                   "the CUDA Python job's frames to be enabled")
        wl.stdin.write(b"go\n")
        wl.stdin.flush()
        wait_until(lambda: os.path.exists(truth_path), 30, "the job's ground truth")
    finally:
        try:
            wl.stdin.write(b"exit\n")
            wl.stdin.close()
        except BrokenPipeError:
            pass
        wl.wait(30)
    tr.stop()
    err = tr.stderr()
    check(f"PID {wl.pid} runs CPython" in err and "Python frames enabled" in err, err)
    said = set(re.findall(r"PID (\d+)", err))
    check(not said & {str(p) for p in idle},
          f"nothing said of non-CUDA PIDs: {sorted(said & {str(p) for p in idle})[:5]}")
    check("table of Python processes is full" not in err, err)
    rep = tr.report()
    p = process(rep, wl.pid)
    kinds = {f["kind"] for s in p["stacks"] for f in s["frames"]}
    check("python" in kinds, f"the job's stacks have Python frames: {kinds}")
    caps = rep["caps"]["max_python_procs"]
    check_eq((caps["limit"], caps["reached"]), (4096, False), "the cap, not reached")


def test_python_table_full_is_named(tmp):
    """More CUDA Python processes at once than --max-python-procs: the ones past it get
    native stacks, the log says so once, the report counts them and is not complete."""
    tr = Tracer(["attach", "-a", "-i", "0", "--max-python-procs", "1", "--libcuda",
                 FAKECUDA], tmp)
    tr.wait_attached()
    jobs = []
    try:
        for i in range(3):
            jobs.append(subprocess.Popen(
                [PYTHON, PYTHON_STACKS, "--lib", FAKECUDA, "--truth",
                 os.path.join(tmp, f"py{i}.json"), "--hold"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        wait_until(lambda: "table of Python processes is full" in tr.stderr(), 20,
                   "the full table to be named")
    finally:
        for j in jobs:
            j.kill()
            j.wait()
    tr.stop()
    check_eq(tr.stderr().count("table of Python processes is full"), 1, "said once")
    rep = tr.report()
    caps = rep["caps"]["max_python_procs"]
    check(caps["reached"] and caps["refused_procs"] >= 1, f"the cap is reported: {caps}")
    check_eq(rep["complete"], False, "the report is not complete")
    check("table of Python processes" in rep["incomplete_why"], rep["incomplete_why"])


def test_libcuda_files_past_the_cap_are_named(tmp):
    """70 copies of libcuda mapped one after another (cuda-compat copies, one per container,
    driver upgrades): the files past the cap of attached files are not traced, and that is
    said in the log, counted in the report, and the report is not complete."""
    tr = Tracer(["attach", "-a", "-i", "0", "--libcuda", FAKECUDA], tmp)
    tr.wait_attached()
    pids = []
    for i in range(70):
        _, truth = _run_dlopen(tmp, _copy(tmp, f"c{i}"), timeout=30)
        pids.append(truth["pid"])
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep, err = tr.report(), tr.stderr()
    caps = rep["caps"]["max_libraries"]
    traced = {p["pid"] for p in rep["processes"]}
    untraced = [pid for pid in pids if pid not in traced]
    check(untraced, "some copies are past the cap")
    check_eq(caps["refused_mappings"] >= len(untraced), True,
             f"every untraced process is counted: {caps}, {len(untraced)} untraced")
    for pid in untraced:
        check(f"(PID {pid}) is not traced" in err, f"PID {pid} is named:\n{err[-3000:]}")
    check(caps["reached"] and caps["limit"] == 64, f"the cap: {caps}")
    check_eq(rep["complete"], False, "the report is not complete")
    check("libcuda files" in rep["incomplete_why"], rep["incomplete_why"])


def test_two_records_to_one_path(tmp):
    """Two `record -o F` started at once, four times over: one is refused with one line, the
    other's recording is whole (gpuleak report reads it to its end)."""
    from harness import GPULEAK, run_gpuleak
    wl = os.path.join(WORKLOADS, "wl_basic")
    for i in range(4):
        path = os.path.join(tmp, f"job{i}.glr")
        procs = [subprocess.Popen([GPULEAK, "record", "-q", "-o", path, "--", wl, "--no-wait"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(2)]
        res = [(p.wait(60), p.stderr.read().decode()) for p in procs]
        codes = sorted(rc for rc, _ in res)
        check_eq(codes, [0, 1], f"round {i}: one recorded, one refused: {res}")
        err = [e for rc, e in res if rc == 1][0]
        check(err.count("\n") == 1 and ("cannot record to" in err or "exists" in err),
              f"round {i}: one line says why: {err!r}")
        rc, out, rerr = run_gpuleak(["report", path])
        check_eq(rc, 0, f"round {i}: the recording is whole ({rerr!r})")
        check("truncated" not in out and "damaged" not in rerr, f"round {i}: {out}{rerr}")


def test_failed_force_keeps_the_recording(tmp):
    """record --force whose command cannot run records nothing: the recording it was to
    replace is left as it was, and no temporary file stays beside it."""
    from harness import run_gpuleak
    path = os.path.join(tmp, "job.glr")
    rc, _, err = run_gpuleak(["record", "-q", "-o", path, "--",
                              os.path.join(WORKLOADS, "wl_basic"), "--no-wait"])
    check_eq(rc, 0, f"the first recording ({err!r})")
    with open(path, "rb") as f:
        before = f.read()
    rc, _, err = run_gpuleak(["record", "-q", "-o", path, "--force", "--",
                              os.path.join(tmp, "no-such-program")])
    check_eq(rc, 127, f"a command that cannot be found ({err!r})")
    with open(path, "rb") as f:
        check(f.read() == before, "the old recording is intact")
    check_eq([n for n in os.listdir(tmp) if n.startswith(".job.glr.")], [],
             "no temporary file left")


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_serve_at_its_file_limit_rests_instead_of_spinning(tmp):
    """serve with a low file limit and idle clients holding every descriptor: accept fails
    with EMFILE while the listener stays readable. serve must not spin a CPU on it, must say
    so once, and answers /metrics once the idle clients time out."""
    import resource
    import socket
    from harness import GPULEAK
    port = free_port()
    err_path = os.path.join(tmp, "serve.err")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (72, 72))
    with open(err_path, "wb") as err:
        serve = subprocess.Popen([GPULEAK, "serve", "--libcuda", FAKECUDA, "--listen",
                                  f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=err, preexec_fn=low_limit)
    idle = []
    try:
        wait_until(lambda: "serving http://" in open(err_path).read() or
                   serve.poll() is not None, 20, "serve to listen")
        check(serve.poll() is None, open(err_path).read())
        # idle clients until serve runs out of descriptors (the rest would wait in the
        # backlog ahead of the request below)
        for _ in range(60):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            time.sleep(0.05)
            if "cannot accept an HTTP connection" in open(err_path).read():
                break
        check("cannot accept an HTTP connection" in open(err_path).read(),
              f"serve ran out of descriptors with {len(idle)} idle clients")
        t0, c0 = time.monotonic(), _cpu_seconds(serve.pid)
        time.sleep(3)
        share = (_cpu_seconds(serve.pid) - c0) / (time.monotonic() - t0)
        check(share < 0.3, f"serve rests at EMFILE: {share:.0%} of a CPU")
        t0, text = time.monotonic(), ""
        # answered once the idle clients time out (10 s); a request that comes while every
        # descriptor is taken may be closed unanswered, and is asked again
        while not text and time.monotonic() - t0 < 15:
            try:
                text = _metrics(port)
            except OSError:
                time.sleep(0.5)
        check("gpuleak_http_errors_total" in text, "metrics answered")
        check(time.monotonic() - t0 < 15, "within the idle clients' timeout")
        check('kind="out_of_descriptors"} 0' not in text, "the rests are counted")
        check_eq(open(err_path).read().count("cannot accept an HTTP connection"), 1,
                 "said once")
    finally:
        for s in idle:
            s.close()
        serve.send_signal(signal.SIGTERM)
        serve.wait(15)


def test_sighup_ends_attach_with_its_report(tmp):
    """SIGHUP (a closed terminal, a supervisor's reload) ends attach as SIGTERM does: its
    JSON report is written and it exits 0."""
    from harness import attach_workload
    wl, tr = attach_workload(tmp, "wl_basic")
    wl.truth()
    check_eq(tr.stop(signal.SIGHUP), 0, f"attach's exit status:\n{tr.stderr()}")
    rep = tr.report()
    check(process(rep, wl.pid)["alloc_calls"] > 0, "the report has the process")
    wl.release()
    wl.wait()


def test_kill_int_of_run_ends_its_command(tmp):
    """`kill -INT` of `gpuleak run` (not the terminal's Ctrl-C, which reaches the command
    too) passes the signal on: run ends with its command instead of waiting for it."""
    tr = Tracer(["run", "-i", "0", "--", "sleep", "60"], tmp)

    def child_runs():
        try:
            with open(f"/proc/{tr.proc.pid}/task/{tr.proc.pid}/children") as f:
                kids = f.read().split()
            for k in kids:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "sleep":
                        return True
        except OSError:
            pass
        return False
    wait_until(child_runs, 20, "run to start its command")
    t0 = time.monotonic()
    rc = tr.stop(signal.SIGINT, timeout=20)
    check(time.monotonic() - t0 < 10, "run ends at once")
    check_eq(rc, 128 + signal.SIGINT, "run exits with its command's status (killed by SIGINT)")


def test_memory_cgroup_too_small_is_said_before_loading(tmp):
    """gpuleak in a 160 MB memory cgroup with a 128 MiB ring (the default until the ring's
    mouth, now 8 MiB): the kernel kills it soon after it attaches, with no word of its own
    and an empty report. It says so first, naming the limit and what to lower. With the
    default ring it fits, says nothing of the kind and runs to its end."""
    from harness import GPULEAK
    cg = f"/sys/fs/cgroup/memory/gpuleak-test-{os.getpid()}"
    v2 = not os.path.isdir("/sys/fs/cgroup/memory")
    if v2:
        cg = f"/sys/fs/cgroup/gpuleak-test-{os.getpid()}"
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "memory.max" if v2 else "memory.limit_in_bytes"), "w") as f:
            f.write(str(160 << 20))

        def enter():
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        p = subprocess.run([GPULEAK, "attach", "-a", "--duration", "1", "--ringbuf-size",
                            "128M", "--libcuda", FAKECUDA],
                           preexec_fn=enter, capture_output=True, timeout=60)
        err = p.stderr.decode(errors="replace")
        first = err.splitlines()[0] if err else ""
        check("this memory cgroup allows 160.00 MiB" in first and "--ringbuf-size" in first,
              f"said before anything else: {err!r}")
        if SAN:  # the sanitizers' own memory does not fit in 160 MB
            return
        p = subprocess.run([GPULEAK, "attach", "-a", "--duration", "1", "--libcuda", FAKECUDA],
                           preexec_fn=enter, capture_output=True, timeout=60)
        err = p.stderr.decode(errors="replace")
        check_eq(p.returncode, 0, f"the default ring fits: {err}")
        check("memory cgroup" not in err, f"and nothing is said of the limit: {err!r}")
    finally:
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def test_libcuda_files_no_process_maps_are_let_go(tmp):
    """70 copies of libcuda mapped in batches, each batch's processes gone before the next
    (images with their own cuda-compat copy, over months): a file no process maps for a
    whole --rescan is detached, its slot serves a new file, and every process is traced,
    books exact; the report is complete."""
    from harness import check_books
    tr = Tracer(["attach", "-a", "-i", "0", "-v", "--rescan", "1s", "--libcuda", FAKECUDA],
                tmp)
    tr.wait_attached()
    truths = []
    let_go = lambda: sum(int(n) for n in re.findall(r"let go of (\d+) libcuda file",
                                                   tr.stderr()))
    for batch in range(7):
        for i in range(10):
            truths.append(_run_dlopen(tmp, _copy(tmp, f"c{batch}-{i}"), timeout=30)[1])
        # a whole rescan after its processes are gone, the batch's files are let go
        wait_until(lambda: let_go() >= 10 * (batch + 1), 30,
                   f"batch {batch}'s libcuda files let go")
    tr.stop()
    check_eq(tr.returncode, 0, "gpuleak exit status")
    rep, err = tr.report(), tr.stderr()
    check("no process maps" in err and "is not traced" not in err, err[-3000:])
    for truth in truths:
        check_books(rep, process(rep, truth["pid"]), truth)
    caps = rep["caps"]["max_libraries"]
    check_eq(caps["reached"], False, f"the cap never bit: {caps}")
    check(rep["complete"], rep["incomplete_why"])
