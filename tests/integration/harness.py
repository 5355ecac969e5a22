# SPDX-License-Identifier: BSD-2-Clause
"""Helpers for gpuleak's integration tests: start workloads, the tracer and the agent for real,
wait for their handshakes, and compare gpuleak's JSON with the workloads' ground truth.

Every wait has a deadline; every failure raises AssertionError with what was expected
and what was seen, plus the tail of the tracer's stderr.
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPULEAK = os.environ.get("GPULEAK", os.path.join(ROOT, "gpuleak"))
OUTPUT = os.environ.get("OUTPUT", os.path.join(ROOT, ".output"))
WORKLOADS = os.path.join(OUTPUT, "workloads")
FAKECUDA = os.path.join(OUTPUT, "fakecuda", "libcuda.so.1")
# GPULEAK is built with ASan and UBSan (make integration-san): it consumes records
# several times slower, and its sanitizer reports are collected by run.py.
SAN = os.environ.get("GPULEAK_SAN") == "1"
# For tests of exact books under threads allocating in a tight loop: under ASan a ring
# buffer that holds the whole run (lost records are test_load's subject).
SAN_RINGBUF = ("--ringbuf-size", "256M") if SAN else ()

CLASSES = ("device", "managed", "host_pinned")
# The tests this run takes, in order (module.function; run.py sets it): a test may start
# the work of the next one early, to run beside its own.
SELECTED = []


class TestFailure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, want, what):
    if got != want:
        raise TestFailure(f"{what}: got {got!r}, want {want!r}")


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise TestFailure(f"timed out after {timeout} s waiting for {what}")


_live = []


def cleanup():
    """Kills whatever a test left running (it failed half-way)."""
    while _live:
        p = _live.pop()
        if p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


class Workload:
    """A workload from tests/workloads, speaking the ready/go/hold protocol of wl.h."""

    def __init__(self, name, *args, tmp, wait=True, hold=False, env=None):
        self.name = name
        self.truth_path = os.path.join(tmp, f"{name}.{time.monotonic_ns()}.truth.json")
        argv = [os.path.join(WORKLOADS, name), "--truth", self.truth_path, *args]
        if not wait:
            argv.append("--no-wait")
        if hold:
            argv.append("--hold")
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        _live.append(self.proc)
        self.pid = self.proc.pid

    def wait_ready(self, timeout=10):
        line = _readline(self.proc.stdout, timeout, f"{self.name} to say ready")
        check(line.startswith("ready "), f"{self.name} said {line!r}, not 'ready <pid>'")
        return int(line.split()[1])

    def go(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def truth(self, timeout=30):
        wait_until(lambda: os.path.exists(self.truth_path) or self.proc.poll() is not None,
                   timeout, f"{self.name}'s ground truth")
        if not os.path.exists(self.truth_path):
            err = self.proc.stderr.read().decode(errors="replace")
            raise TestFailure(f"{self.name} exited with {self.proc.returncode} without "
                              f"writing its truth: {err}")
        with open(self.truth_path) as f:
            return json.load(f)

    def release(self):
        """Ends --hold: the workload exits."""
        try:
            self.proc.stdin.write(b"exit\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def wait(self, timeout=30):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise TestFailure(f"{self.name} did not exit within {timeout} s")
        return rc

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)


# gpuleak's own lines that say a target is attached: "attached to PID N ..." for a named
# target, "attached: ..." for a library traced with -a; never a warning that only says the
# word (XLA's: "... used CUDA before gpuleak attached: a pool ..."), nor the line of
# PyTorch's probes ("attached PyTorch's allocator probes ...").
_ATTACHED = re.compile(r"^gpuleak: attached(?: to PID (\d+) |: )", re.M)


def attached_targets(stderr):
    """What a tracer's stderr says it attached: (the set of PIDs, the number of -a's
    library lines)."""
    pids, libs = set(), 0
    for m in _ATTACHED.finditer(stderr):
        if m.group(1):
            pids.add(int(m.group(1)))
        else:
            libs += 1
    return pids, libs


def _readline(stream, timeout, what):
    deadline = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            continue
        c = os.read(fd, 1)
        if not c:
            break
        if c == b"\n":
            return buf.decode(errors="replace")
        buf += c
    raise TestFailure(f"timed out after {timeout} s waiting for {what} (read {buf!r})")


class Tracer:
    """A running gpuleak. Its stderr is collected; report() stops it and parses the JSON."""

    def __init__(self, args, tmp, json_report=True, env=None, stdin=None):
        self.json_path = os.path.join(tmp, f"gpuleak.{time.monotonic_ns()}.json")
        argv = [GPULEAK] + list(args)
        if json_report:
            # options go after the subcommand, before any '--'
            argv[2:2] = ["--json", self.json_path]
        self.argv = argv
        self.err_path = self.json_path + ".err"
        self.out_path = self.json_path + ".out"
        self._err = open(self.err_path, "wb")
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=self._err, env=env,
                                     stdin=stdin if stdin is not None else subprocess.DEVNULL)
        _live.append(self.proc)
        self.returncode = None

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stdout(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_attached(self, timeout=20, count=1, pids=()):
        """Until count targets are attached (each PID once, each library of -a once) and,
        with pids, every one of those PIDs."""
        def attached():
            if self.proc.poll() is not None:
                raise TestFailure(f"gpuleak exited with {self.proc.returncode} before "
                                  f"attaching:\n{self.stderr()}")
            got, libs = attached_targets(self.stderr())
            return len(got) + libs >= count and got >= set(pids)
        wait_until(attached, timeout, "gpuleak to attach")

    def wait(self, timeout=30):
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"gpuleak did not exit within {timeout} s:\n{self.stderr()}")
        self._err.close()
        self._out.close()
        return self.returncode

    def stop(self, sig=signal.SIGINT, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def report(self):
        check(os.path.exists(self.json_path),
              f"gpuleak wrote no JSON (exit {self.returncode}):\n{self.stderr()}")
        with open(self.json_path) as f:
            return json.load(f)


def attach_workload(tmp, name, *args, tracer_args=(), hold=True, go=True):
    """Start the workload, attach gpuleak (attach -i 0 TRACER_ARGS PID) while it waits,
    then (go) let it run."""
    wl = Workload(name, *args, tmp=tmp, hold=hold)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", *tracer_args, str(wl.pid)], tmp)
    tr.wait_attached()
    if go:
        wl.go()
    return wl, tr


def stop_attached(wl, tr):
    """Take the workload's ground truth, stop gpuleak, let the workload exit: the truth."""
    truth = wl.truth()
    tr.stop()
    wl.release()
    wl.wait()
    return truth


def finish_attached(wl, tr):
    """The same, and gpuleak's exit status checked: (truth, gpuleak's JSON report)."""
    truth = stop_attached(wl, tr)
    check_eq(tr.returncode, 0, "gpuleak exit status")
    return truth, tr.report()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """gpuleak serve with the stand-in as its libcuda, its stderr in a file of tmp."""

    def __init__(self, tmp, args, env=None):
        self.err_path = os.path.join(tmp, f"serve.{time.monotonic_ns()}.err")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([GPULEAK, "serve", "--libcuda", FAKECUDA] + args,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._err, env=env)

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_said(self, phrase, what):
        """Waits until serve's stderr says phrase (or serve exits), then checks it runs."""
        wait_until(lambda: phrase in self.stderr() or self.proc.poll() is not None, 20, what)
        check(self.proc.poll() is None, f"serve runs: {self.stderr()}")

    def wait_serving(self):
        def serving():
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited with {self.proc.returncode}:\n"
                                     f"{self.stderr()}")
            return "serving http://" in self.stderr()
        wait_until(serving, 20, "gpuleak serve to listen")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "hung"
        self._err.close()
        return rc


def build_fake_nvml(tmp):
    """The NVML stand-in (fake_nvml.c) built into a folder of tmp, which it returns: put it on
    LD_LIBRARY_PATH and name its figures' file in FAKE_NVML_FILE."""
    lib = os.path.join(tmp, "nvml", "libnvidia-ml.so.1")
    os.makedirs(os.path.dirname(lib))
    p = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", lib,
                        os.path.join(ROOT, "tests", "integration", "fake_nvml.c")],
                       capture_output=True, timeout=120)
    check_eq(p.returncode, 0, f"building the NVML stand-in: {p.stderr.decode()}")
    return os.path.dirname(lib)


def agent_on_two_gpus(tmp, *args):
    """serve ARGS on a free port with the NVML stand-in listing two GPUs of 141 GiB, 140 and
    136 GiB free; returns the agent, its port and the stand-in's file (append "proc" lines)."""
    libdir = build_fake_nvml(tmp)
    nvml = os.path.join(tmp, "nvml.txt")
    with open(nvml, "w") as f:
        f.write(f"device {141 << 30} {140 << 30} GPU-fake-0\n")
        f.write(f"device {141 << 30} {136 << 30} GPU-fake-1\n")
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, FAKE_NVML_FILE=nvml)
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", *args], env=env)
    return agent, port, nvml


def run_gpuleak(args, timeout=30, env=None):
    """Runs gpuleak to completion; returns (exit status, stdout, stderr)."""
    p = subprocess.run([GPULEAK] + list(args), capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def process(report, pid):
    found = [p for p in report["processes"] if p["pid"] == pid]
    check(found, f"PID {pid} is not in the report (processes: "
                 f"{[p['pid'] for p in report['processes']]})")
    return found[0]


def check_books(report, proc, truth, extra=("unmatched_frees",)):
    """gpuleak's per-process figures equal the workload's ground truth, to the byte."""
    check_eq(report["lost_events"], 0, "lost_events")
    for cls in CLASSES:
        check_eq(proc[f"{cls}_bytes"], truth[f"{cls}_bytes"], f"{cls}_bytes")
    check_eq(proc["outstanding_allocs"], truth["outstanding_allocs"], "outstanding_allocs")
    for key in extra:
        check_eq(proc[key], truth[key], key)
    check(proc["consistent"], f"user-space books differ from BPF's: {proc['bpf']}")


def site_bytes(proc, site):
    """Outstanding bytes of every stack that passes through the function `site`."""
    total = 0
    for st in proc["stacks"]:
        if any(f.get("function") == site for f in st["frames"]):
            total += st["outstanding_bytes"]
    return total


def check_sites(proc, truth):
    for site, want in truth.get("sites", {}).items():
        check_eq(site_bytes(proc, site), want, f"outstanding bytes under {site}")


def tmpdir():
    return tempfile.mkdtemp(prefix="gpuleak-test-")


def enable_bpf_stats():
    """BPF_ENABLE_STATS: the kernel times every BPF program while the returned fd is open
    (the benchmarks' helper)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "benchlib", os.path.join(ROOT, "bench", "benchlib.py"))
    benchlib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchlib)
    return benchlib.enable_bpf_stats()


def bpf_objects(pid):
    """The BPF links, maps and programs a process holds, from /proc/PID/fdinfo:
    {"links": {id: type}, "maps": [{"id", "type", "key_size", "value_size"}],
     "progs": {id: instructions the verifier walked}}."""
    links, maps, progs = {}, [], {}
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        if target == "anon_inode:bpf_link":
            links[int(info["link_id"])] = info.get("link_type", "")
        elif target == "anon_inode:bpf-map":
            maps.append({"id": int(info["map_id"]), "type": int(info["map_type"]),
                         "key_size": int(info["key_size"]),
                         "value_size": int(info["value_size"])})
        elif target == "anon_inode:bpf-prog":
            progs[int(info["prog_id"])] = int(info.get("verified_insns", -1))
    return {"links": links, "maps": maps, "progs": progs}


def live_link_ids():
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, timeout=20)
    return {lk["id"] for lk in json.loads(out.stdout or b"[]")}
