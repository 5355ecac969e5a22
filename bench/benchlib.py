# SPDX-License-Identifier: BSD-2-Clause
"""Helpers for gpuleak's benchmarks: where the programs are, running them with
deadlines, parsing their key=value lines, statistics over repeated runs, and a
description of the machine.

Every run has a deadline; a failure raises BenchError saying what ran and what
it printed.
"""
import ctypes
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPULEAK = os.environ.get("GPULEAK", os.path.join(ROOT, "gpuleak"))
OUTPUT = os.path.abspath(os.environ.get("OUTPUT", os.path.join(ROOT, ".output")))
BENCH_OUT = os.path.join(OUTPUT, "bench")
ALLOC_LOOP = os.path.join(BENCH_OUT, "alloc_loop")
BOOKS_BENCH = os.path.join(BENCH_OUT, "books_bench")
ALLOC_LOOP_PY = os.path.join(ROOT, "bench", "alloc_loop.py")
FAKECUDA = os.path.join(OUTPUT, "fakecuda", "libcuda.so.1")


class BenchError(RuntimeError):
    pass


def private_lib():
    """A copy of the stand-in under a name that no other gpuleak's -a recognizes as a
    libcuda, so that tracers of other users of this machine leave the load alone."""
    path = os.path.join(BENCH_OUT, "private", "libbenchcuda.so.1")
    return _copy_lib(path)


def scan_lib():
    """A copy of the stand-in named libcuda.so.1, for -a to find by name."""
    return _copy_lib(os.path.join(BENCH_OUT, "scan", "libcuda.so.1"))


def _copy_lib(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(FAKECUDA):
        shutil.copyfile(FAKECUDA, path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def python_exe():
    """The interpreter for the Python load: $BENCH_PYTHON, the system's, or python3."""
    if os.environ.get("BENCH_PYTHON"):
        return os.environ["BENCH_PYTHON"]
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"


def kv(text, required=()):
    """The key=value pairs of the last line of text that has all required keys."""
    for line in reversed(text.splitlines()):
        pairs = dict(re.findall(r"(\w+)=([^\s]+)", line))
        if all(k in pairs for k in required) and pairs:
            return {k: _num(v) for k, v in pairs.items()}
    raise BenchError(f"no line with {', '.join(required)} in:\n{text[-2000:]}")


def _num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def run(argv, timeout, env=None, stdin=None):
    """Runs argv to completion; returns stdout. Raises BenchError on failure."""
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, env=env,
                           input=stdin, text=True)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"{' '.join(argv)} ran over {timeout} s") from e
    if p.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited with {p.returncode}:\n"
                         f"{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p.stdout + p.stderr


class Proc:
    """A background process whose output goes to files, read as it runs."""

    def __init__(self, argv, tmp, name, stdin=False, env=None):
        self.argv = argv
        self.out_path = os.path.join(tmp, f"{name}.{time.monotonic_ns()}.out")
        self.err_path = self.out_path[:-4] + ".err"
        self._out = open(self.out_path, "w")
        self._err = open(self.err_path, "w")
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdout=self._out, stderr=self._err, env=env,
                                  stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  text=True)
        self.pid = self.p.pid

    def stdout(self):
        with open(self.out_path) as f:
            return f.read()

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_for(self, pattern, timeout, stream="stderr"):
        """Seconds from the start until pattern appears in the stream."""
        deadline = time.monotonic() + timeout
        read = self.stderr if stream == "stderr" else self.stdout
        while time.monotonic() < deadline:
            text = read()
            if re.search(pattern, text):
                return time.monotonic() - self.t0
            if self.p.poll() is not None:
                raise BenchError(f"{self.argv[0]} exited with {self.p.returncode} before "
                                 f"printing {pattern!r}:\n{text[-1500:]}")
            time.sleep(0.002)
        raise BenchError(f"{self.argv[0]} did not print {pattern!r} within {timeout} s")

    def send(self, line):
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def stop(self, sig=signal.SIGINT, timeout=30):
        """Sends sig (None: none) and waits for the exit status."""
        if sig is not None and self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise BenchError(f"{self.argv[0]} did not stop within {timeout} s")
        self._out.close()
        self._err.close()
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self._out.close()
        self._err.close()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError(f"no VmRSS for PID {pid}")


def bpf_maps_memlock(pid):
    """{map name or id: bytes} of the BPF maps pid holds, from fdinfo and bpftool."""
    names = _bpf_map_names()
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-map":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        map_id = int(info["map_id"])
        out[names.get(map_id, str(map_id))] = int(info["memlock"])
    return out


def _bpf_map_names():
    try:
        import json
        p = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, timeout=20)
        return {m["id"]: m.get("name", str(m["id"])) for m in json.loads(p.stdout or b"[]")}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


class Stats:
    """Median and spread of repeated measurements."""

    def __init__(self, values):
        self.values = sorted(values)

    @property
    def n(self):
        return len(self.values)

    @property
    def median(self):
        return statistics.median(self.values)

    def quartiles(self):
        v = self.values
        if len(v) < 4:
            return v[0], v[-1]
        q = statistics.quantiles(v, n=4, method="inclusive")
        return q[0], q[2]

    def fmt(self, digits=0, unit=""):
        lo, hi = self.quartiles()
        return f"{self.median:.{digits}f}{unit} [{lo:.{digits}f}-{hi:.{digits}f}]"

    def as_dict(self):
        lo, hi = self.quartiles()
        return {"median": self.median, "q1": lo, "q3": hi, "min": self.values[0],
                "max": self.values[-1], "n": self.n}


def other_tracers():
    """Other gpuleak and bpftrace processes on this machine: they compete for the CPUs."""
    mine = os.getpid()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm in ("gpuleak", "bpftrace") and int(pid) != mine:
            found.append(int(pid))
    return found


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load_1min": round(load, 2),
        "other_tracers": len(other_tracers()),
    }


def enable_bpf_stats():
    """BPF_ENABLE_STATS: the kernel times every BPF program while the returned fd is open."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint8 * 128)()  # union bpf_attr: enable_stats.type = BPF_STATS_RUN_TIME (0)
    fd = libc.syscall(321, 32, attr, len(attr))  # __NR_bpf (x86-64), BPF_ENABLE_STATS
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def prog_times(pid):
    """{program name: (run_time_ns, run_cnt)} of the BPF programs process pid holds."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    res = {}
    for i in ids:
        info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)],
                                         capture_output=True, text=True, check=True).stdout)
        res[info["name"]] = (info.get("run_time_ns", 0), info.get("run_cnt", 0))
    return res
