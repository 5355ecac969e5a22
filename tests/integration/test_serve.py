# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak serve: a real Prometheus scrapes the agent every second while stand-in
workloads start, leak and exit; the series are checked through Prometheus's HTTP API."""
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

from harness import (FAKECUDA, GPULEAK, ROOT, WORKLOADS, Agent, Workload, check, check_eq,
                     free_port, wait_until)

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
SECRET_ARG = "topsecret-argv-4711"
SECRET_ENV = "topsecret-env-0815"


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def start_prometheus(tmp, targets):
    """A Prometheus of the test's own scraping targets: "HOST:PORT" (job gpuleak) or a
    list of (job, "HOST:PORT"); returns the process and its URL once it is ready."""
    if isinstance(targets, str):
        targets = [("gpuleak", targets)]
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:  # JSON is YAML
        json.dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                   "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [t]}]}
                                      for job, t in targets]}, f)
    log = open(os.path.join(tmp, "prometheus.log"), "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}",
                             f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"

    def ready():
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {proc.returncode}")
        try:
            return get(f"{url}/-/ready", timeout=1) is not None
        except OSError:
            return False
    try:
        wait_until(ready, 20, "Prometheus to be ready")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url


def query(prom, q):
    body = json.loads(get(f"{prom}/api/v1/query?query={urllib.parse.quote(q)}"))
    check_eq(body["status"], "success", f"query {q}")
    return body["data"]["result"]


def value(prom, q):
    r = query(prom, q)
    return float(r[0]["value"][1]) if r else None


def test_serve_prometheus_sees_the_leak_and_the_exit(tmp):
    """Prometheus scrapes the agent every second: the leaking process's bytes climb, an
    exited process's series are gone within a scrape interval, health counters are there,
    labels survive escaping, and no command line or environment leaks into the metrics."""
    port = free_port()
    state = os.path.join(tmp, "st")
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--state-dir", state,
                        "--profile-dir", "profiles", "--profile-every", "1s",
                        "--profile-keep", "3"])
    prom, jobs = None, []
    try:
        agent.wait_serving()
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        prom, prom_url = start_prometheus(tmp, f"127.0.0.1:{port}")
        # a comm that needs escaping: quote and backslash
        odd = os.path.join(tmp, 'wl"q\\x')
        os.symlink(os.path.join(WORKLOADS, "wl_leak"), odd)
        env = dict(os.environ, GPULEAK_TEST_SECRET=SECRET_ENV)
        leaker = subprocess.Popen([odd, "--no-wait", "--iters", "0", "--interval-ms", "150",
                                   "--truth", os.path.join(tmp, SECRET_ARG)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        jobs.append(leaker)
        steady = subprocess.Popen([os.path.join(WORKLOADS, "wl_basic"), "--no-wait", "--hold"],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        jobs.append(steady)
        short = subprocess.Popen([os.path.join(WORKLOADS, "wl_leak"), "--no-wait", "--iters",
                                  "3", "--interval-ms", "100", "--hold"],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        jobs.append(short)

        def series(pid):
            return f'gpuleak_process_memory_bytes{{pid="{pid}",class="device"}}'

        wait_until(lambda: value(prom_url, series(leaker.pid)) is not None, 20,
                   "Prometheus to have the leaking process's series")
        wait_until(lambda: value(prom_url, series(short.pid)) is not None, 10,
                   "Prometheus to have the short-lived process's series")
        seen = []
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and len(set(seen)) < 4:
            seen.append(value(prom_url, series(leaker.pid)))
            time.sleep(0.5)
        check(len(set(seen)) >= 3 and seen == sorted(seen),
              f"the leaking process's device bytes climb scrape after scrape: {seen}")
        check_eq(value(prom_url, f'gpuleak_process_memory_bytes{{pid="{steady.pid}",'
                       'class="device"}'), 5605632.0, "the steady process's bytes")
        r = query(prom_url, f'gpuleak_process_memory_bytes{{pid="{leaker.pid}",class="device"}}')
        check_eq(r[0]["metric"]["comm"], 'wl"q\\x', "comm label after escaping and ingestion")
        # the verdict needs some history: the leak is named within ~10 s, the steady one not
        wait_until(lambda: (value(prom_url, f'gpuleak_process_leak_bytes{{pid="{leaker.pid}",'
                                  'class="device"}') or 0) > 0, 20,
                   "the leaking process's leak bytes > 0 in Prometheus")
        check_eq(value(prom_url, f'gpuleak_process_leak_bytes{{pid="{steady.pid}",'
                       'class="device"}'), 0.0, "the steady process's leak bytes")
        # the README's query, over this test's processes (others may run beside it)
        ours = "|".join(str(j.pid) for j in jobs)
        pods = query(prom_url, 'sum by (pid) (gpuleak_process_leak_bytes{class="device",'
                     f'pid=~"{ours}"}}) > 0')
        check_eq([r["metric"]["pid"] for r in pods], [str(leaker.pid)],
                 "the README's query names the leaking process alone")

        # an exited process is gone from the next scrape, and stale in Prometheus
        short.stdin.write(b"exit\n")
        short.stdin.close()
        short.wait(10)
        t_exit = time.monotonic()
        wait_until(lambda: f'pid="{short.pid}"' not in get(metrics_url), 1.5,
                   "the exited process to leave /metrics")
        check(time.monotonic() - t_exit < 1.5, "gone within one scrape interval")
        wait_until(lambda: value(prom_url, series(short.pid)) is None, 5,
                   "Prometheus to mark the exited process's series stale")

        for name in ("gpuleak_events_lost_total", "gpuleak_processes_tracked",
                     "gpuleak_probes_attached", "gpuleak_cap_hits_total",
                     "gpuleak_unmatched_frees_total", "gpuleak_build_info"):
            check(query(prom_url, name), f"health series {name} in Prometheus")
        wait_until(lambda: (value(prom_url, "gpuleak_probes_attached") or 0) > 0, 5,
                   "probes attached, in Prometheus")
        check_eq(sorted(r["metric"]["record"] for r in query(prom_url,
                                                              "gpuleak_events_lost_total")),
                 ["call", "proc", "stack"], "lost records counted per record type")
        check_eq(value(prom_url, f'gpuleak_process_books_consistent{{pid="{steady.pid}"}}'), 1.0,
                 "the steady process's books equal the kernel's")
        wait_until(lambda: (value(prom_url, "gpuleak_processes_forgotten_total") or 0) >= 1, 5,
                   "the exited process counted as forgotten, in Prometheus")

        text = get(metrics_url)
        for secret in (SECRET_ARG, SECRET_ENV, "--interval-ms", "--truth", "GPULEAK_TEST"):
            check(secret not in text, f"{secret!r} appears in /metrics")
        scrape = os.path.join(tmp, "scrape.txt")
        with open(scrape, "w") as f:
            f.write(text)
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=20)
        check_eq(p.returncode, 0, f"promtool check metrics: {p.stdout!r} {p.stderr!r}")

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/pprof/gpu_heap",
                                    timeout=10) as r:
            check_eq(r.status, 200, "pprof endpoint")
            check_eq(r.read()[:2], b"\x1f\x8b", "the profile is gzipped")
        check_eq(sorted(os.listdir(state)), ["incidents", "profiles"],
                 "the state dir holds the profiles and the incidents alone")
        profiles = os.listdir(os.path.join(state, "profiles"))
        check(1 <= len(profiles) <= 3, f"profiles rotated to --profile-keep 3: {profiles}")
        for name in profiles:
            st = os.lstat(os.path.join(state, "profiles", name))
            check_eq(oct(st.st_mode & 0o777), oct(0o600), f"mode of {name}")
    finally:
        for j in jobs:
            if j.poll() is None:
                j.kill()
            j.wait()
        if prom:
            prom.kill()
            prom.wait()
        rc = agent.stop()
    check_eq(rc, 0, f"exit status on SIGTERM:\n{agent.stderr()}")


def listening(port):
    """Local addresses listening on port, from /proc/net/tcp and tcp6."""
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if state == "0A" and int(p, 16) == port:
                    found.append(addr)
    return found


def test_serve_defaults_and_hostile_clients(tmp):
    """The default address is loopback only; garbage, slow clients and a flood of
    connections do not stop the agent; usage errors are refused."""
    rc = subprocess.run([GPULEAK, "serve", "1234"], capture_output=True, timeout=10)
    check_eq(rc.returncode, 2, "serve takes no PIDs")
    rc = subprocess.run([GPULEAK, "serve", "--state-dir", "/var/lib/x", "--profile-dir",
                         "/tmp/elsewhere"], capture_output=True, timeout=10)
    check_eq(rc.returncode, 2, "a profile dir outside the state dir")
    rc = subprocess.run([GPULEAK, "attach", "--listen", "127.0.0.1:1", "1"],
                        capture_output=True, timeout=10)
    check_eq(rc.returncode, 2, "--listen belongs to serve")

    agent = Agent(tmp, [])
    try:
        agent.wait_serving()
        addrs = listening(9464)
        check_eq(addrs, ["0100007F"], "the default listens on 127.0.0.1:9464 alone")
        url = "http://127.0.0.1:9464/metrics"
        socks = []
        for payload in (b"\x16\x03\x01\x00\xff garbage\r\n\r\n", b"GET /metr",
                        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
                        b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n"):
            s = socket.create_connection(("127.0.0.1", 9464), timeout=5)
            s.sendall(payload)
            socks.append(s)
        for _ in range(40):  # more than the client table holds
            socks.append(socket.create_connection(("127.0.0.1", 9464), timeout=5))
        text = get(url)
        check("gpuleak_build_info" in text, "the agent still answers")
        answers = []
        for s in socks[:4]:
            s.settimeout(5)
            try:
                answers.append(s.recv(100).split(b"\r\n")[0])
            except OSError as e:
                answers.append(repr(e).encode())
        check_eq(answers[0], b"HTTP/1.1 400 Bad Request", "garbage")
        check_eq(answers[2], b"HTTP/1.1 400 Bad Request", "POST with a body")
        check(answers[3] in (b"HTTP/1.1 414 URI Too Long", b""), f"a huge target: {answers[3]}")
        for s in socks:
            s.close()
        head = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(head, timeout=5) as r:
            check_eq(r.status, 200, "HEAD /metrics")
            check_eq(r.read(), b"", "HEAD has no body")
        try:
            get("http://127.0.0.1:9464/nope")
            check(False, "an unknown path is 404")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 404, "unknown path")
    finally:
        rc = agent.stop()
    check_eq(rc, 0, f"exit status on SIGTERM:\n{agent.stderr()}")
    check("capabilities kept: " in agent.stderr(), "capabilities given up after attaching")


def test_deploy_manifests(tmp):
    """deploy/: the Kubernetes manifests agree with each other (selectors, ports,
    security context), the systemd unit is hardened, the image is the static binary."""
    # Debian's python3 (python3-yaml), whichever python3 runs the tests
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "deploy", "validate.py")],
                       capture_output=True, timeout=30)
    out = p.stdout.decode() + p.stderr.decode()
    check_eq(p.returncode, 0, f"deploy/validate.py:\n{out}")
    check("deploy: ok" in out, f"deploy/validate.py said: {out}")


def test_serve_opens_a_tensor_window_on_post(tmp):
    """POST /tensors/arm opens a tensor window at once in every PyTorch process (windows
    are each process's: a process's first opens when it is found); GET there is refused."""
    port = free_port()
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--tensor-window", "300ms",
                        "--tensor-duty", "10"])
    wl = None
    try:
        agent.wait_serving()
        wl = Workload("wl_torch", "--iters", "1", tmp=tmp, hold=True)
        wl.wait_ready()
        wait_until(lambda: f"PID {wl.pid}: tensor window 1 closed" in agent.stderr(), 30,
                   "the process's first tensor window to close")
        check(f"PID {wl.pid}: tensor window 2" not in agent.stderr(),
              "no second window unasked")
        req = urllib.request.Request(f"http://127.0.0.1:{port}/tensors/arm", data=b"",
                                     method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            check_eq(r.status, 202, "POST /tensors/arm")
        wait_until(lambda: f"PID {wl.pid}: tensor window 2 (request)" in agent.stderr(), 10,
                   "the requested window to open")
        metrics = get(f"http://127.0.0.1:{port}/metrics")
        # every process's windows are counted (the host's other PyTorch processes too)
        total = [int(l.split()[1]) for l in metrics.splitlines()
                 if l.startswith("gpuleak_tensor_windows_total ")]
        check(total and total[0] >= 2 and "gpuleak_tensor_probes_armed 1" in metrics,
              f"the metrics count the windows: {[l for l in metrics.splitlines() if 'tensor' in l]}")
        try:
            get(f"http://127.0.0.1:{port}/tensors/arm")
            check(False, "GET /tensors/arm is refused")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 405, "GET /tensors/arm")
    finally:
        agent.stop()
        if wl:
            wl.go()
            wl.release()
            wl.wait()


def test_serve_census_endpoint(tmp):
    """GET /census?pid=N: the census of a process the agent traces, joined with its books
    (a real PyTorch program, CPU, whose tensors' storages the allocator stand-in declares
    as blocks), read without pausing it; pausing takes POST with pause=1; a process the
    agent does not trace is refused."""
    port = free_port()
    truth_path = os.path.join(tmp, "join.json")
    script = os.path.join(ROOT, "tests", "workloads", "py_census_join.py")
    faketorch = os.path.join(os.path.dirname(os.path.dirname(FAKECUDA)), "faketorch",
                             "libc10_cuda.so")
    agent = Agent(tmp, ["--listen", f"127.0.0.1:{port}", "--tensors", "full"])
    wl = None
    try:
        agent.wait_serving()
        wl = subprocess.Popen(["/usr/bin/python3", script, "--lib", FAKECUDA, "--torch-lib",
                               faketorch, "--truth", truth_path, "--libdir", tmp, "--steps", "20",
                               "--interval-ms", "20"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        check_eq(wl.stdout.readline().decode().strip(), f"ready {wl.pid}", "the workload")
        with open(truth_path) as f:
            truth = json.load(f)
        wait_until(lambda: f'pid="{wl.pid}"' in get(f"http://127.0.0.1:{port}/metrics"), 20,
                   "the agent to trace the workload")
        wl.stdin.write(b"go\n")
        wl.stdin.flush()
        url = f"http://127.0.0.1:{port}/census?pid={wl.pid}"
        check_eq(wl.stdout.readline().decode().strip(), "grown", "the workload's 20 steps")
        # unpaused: read uncached while the program runs, within the time asked for
        rep = json.loads(get(url + "&max_ms=60000", timeout=90))
        check_eq((rep["paused"], rep["may_be_torn"]), (False, True), "read without pausing")
        check_eq(rep["caps"]["max_ms"], 60000, "the time cap asked for")
        check(rep["join"]["books"], f"joined with the agent's books: {rep['join']}")
        # paused: a consistent read; every step's tensor joined with its block and line
        req = urllib.request.Request(url + "&pause=1", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            rep = json.loads(r.read().decode())
        check(rep["paused"] and rep["pause_ns"] > 0 and not rep["may_be_torn"],
              f"POST pause=1 pauses the process for the read: {rep['pause_ns']}")
        held = [t for t in rep["tensors"] if any(h.startswith("__main__.HISTORY[")
                                                 for h in t["holders"])]
        check_eq(len(held), 20, "the 20 steps' tensors")
        for t in rep["tensors"]:
            if any(h.startswith("__main__.HISTORY[") for h in t["holders"]):
                check_eq((t["allocation"]["join"], t["allocation"]["site"]),
                         ("block", truth["alloc_site"]), f"a step's block and line: {t}")
        # the agent traced the program from its start: `early` was declared while traced
        early = [t for t in rep["tensors"] if "__main__.early" in t["holders"]]
        check(early and early[0]["allocation"]["join"] == "block" and
              early[0]["allocation"]["site"].startswith("declare (") and
              not early[0]["allocation"]["leak"], f"early's block and line: {early}")
        plain = [t for t in rep["tensors"] if "__main__.plain" in t["holders"]]
        check(plain and plain[0]["allocation"]["join"] == "cpu" and
              "CPU memory" in plain[0]["allocation"]["why"],
              f"a tensor never declared: CPU memory, no line, and why: {plain}")
        try:
            get(url + "&pause=1")
            check(False, "GET with pause=1 is refused")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 405, "GET /census?pause=1")
        check("/census: PID" in agent.stderr() and ", paused" in agent.stderr(),
              "the agent logs each census and whether it paused")
        try:
            get(f"http://127.0.0.1:{port}/census?pid={os.getpid()}")
            check(False, "a process the agent does not trace is refused")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 404, "/census of an untraced PID")
        try:
            get(f"http://127.0.0.1:{port}/census")
            check(False, "/census without a pid is refused")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 400, "/census without ?pid=")
        wl.stdin.close()
        check_eq(wl.wait(30), 0, "the workload runs on unharmed")
    finally:
        if wl and wl.poll() is None:
            wl.kill()
            wl.wait()
        agent.stop()
