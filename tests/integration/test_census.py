# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak census: a real PyTorch program (Debian's python3-torch, CPU, under
/usr/bin/python3) holds tensors in a module attribute, an object attribute, a list, a
dict, a closure, a thread's local variable, views of one storage and a loss summed
across steps; the census read from outside names each holder with the storages and
bytes the program itself reports, pauses and releases the program unharmed, stops at
its caps, and finds nothing in a program that freed its tensors."""
import json
import os
import re
import subprocess
import time

from harness import (FAKECUDA, GPULEAK, OUTPUT, ROOT, Tracer, check, check_eq, run_gpuleak,
                     wait_until, _readline)

PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(ROOT, "tests", "workloads", "py_census.py")


class CensusWorkload:
    def __init__(self, tmp, *args):
        self.truth_path = os.path.join(tmp, f"census.{time.monotonic_ns()}.json")
        self.proc = subprocess.Popen([PYTHON, SCRIPT, "--truth", self.truth_path, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        line = _readline(self.proc.stdout, 60, "py_census.py to say ready")
        check(line == f"ready {self.pid}", f"py_census.py said {line!r}")
        with open(self.truth_path) as f:
            self.truth = json.load(f)

    def state(self):
        with open(f"/proc/{self.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def finish(self):
        """The program goes on after the census: its tensors intact, it says ok."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        out, err = self.proc.communicate(timeout=60)
        check(self.proc.returncode == 0 and out.decode().strip() == "ok",
              f"the program runs on unharmed after the census: status {self.proc.returncode}, "
              f"stdout {out!r}, stderr {err[-2000:]!r}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def census(pid, *args, status=0):
    rc, out, err = run_gpuleak(["census", "--json", "-", *args, str(pid)], timeout=120)
    check_eq(rc, status, f"gpuleak census's exit status (stderr {err!r})")
    return json.loads(out) if out.strip() else None


def held_by(rep, path):
    found = [t for t in rep["tensors"] if path in t["holders"]]
    check(len(found) == 1, f"one tensor held by {path}: {found}")
    return found[0]


def check_storage(t, want, what):
    check_eq(t["data"], want["data"], f"{what}: the storage's data pointer")
    check_eq(t["storage_bytes"], want["bytes"], f"{what}: the storage's bytes")
    check_eq(t["shape"], want["shape"], f"{what}: shape")
    check_eq(t["dtype"], want["dtype"], f"{what}: dtype")
    check_eq(t["device"], "cpu", f"{what}: device")


def test_census_names_holders_and_bytes(tmp):
    wl = CensusWorkload(tmp)
    try:
        rep = census(wl.pid)
        tr = wl.truth
        check(rep["layout"]["verified"], f"the layout is verified: {rep['layout']}")
        check(rep["paused"] and rep["threads_paused"] >= 2 and rep["pause_ns"] > 0,
              f"both threads were paused and the pause measured: {rep}")
        check(not rep["may_be_torn"] and rep["truncated_by"] is None,
              f"a paused read within the caps: {rep}")
        check(wl.state() not in ("t", "T"), f"the program runs again: state {wl.state()}")
        for path, want in tr["named"].items():
            check_storage(held_by(rep, path), want, path)
        check_storage(held_by(rep, tr["local"]["path"]), tr["local"], "the thread's local")
        for i, want in enumerate(tr["history"]):
            check_storage(held_by(rep, f"__main__.model.history[{i}]"), want, f"history[{i}]")
        groups = {g["holder"]: g for g in rep["groups"]}
        hist = groups.get("__main__.model.history")
        check(hist, f"a group for the list: {list(groups)}")
        check_eq((hist["kind"], hist["length"], hist["tensors"], hist["storages"]),
                 ("list", len(tr["history"]), len(tr["history"]), len(tr["history"])),
                 "the list's group")
        check_eq(hist["bytes"], sum(t["bytes"] for t in tr["history"]), "the list's bytes")
        for i, want in enumerate(tr["batches"]):
            check_storage(held_by(rep, f"__main__.batches[{i}]"), want, f"batches[{i}]")
        bat = groups.get("__main__.batches")
        check(bat and (bat["kind"], bat["length"], bat["tensors"]) == ("list", 3, 3) and
              bat["bytes"] == sum(t["bytes"] for t in tr["batches"]),
              f"the global list's group: {bat}")
        res = groups.get("__main__.results")
        check(res and res["kind"] == "dict" and res["tensors"] == 2 and res["length"] == 2,
              f"the dict's group: {res}")
        check_eq(groups["census_cache.table"]["kind"], "global", "a module attribute")
        check_eq(groups["__main__.model.w"]["kind"], "attribute", "an object attribute")
        # views: one storage, counted once
        views = [held_by(rep, p) for p in ("__main__.base", "__main__.v1", "__main__.v2")]
        check(len({v["storage"] for v in views}) == 1, f"views share one storage: {views}")
        # the graph: every step's x but the last is held by the autograd graph only
        graph = {g["data"]: g for g in tr["graph_only"]}
        orphans = [t for t in rep["tensors"] if not t["holders"]]
        check_eq(sorted(t["data"] for t in orphans), sorted(graph), "tensors no Python "
                 "object holds: the graph's")
        for t in orphans:
            check(t["cpp_owned"] and t["storage_bytes"] == graph[t["data"]]["bytes"],
                  f"a tensor kept from C++ with its bytes: {t}")
        check_eq(rep["no_holder"]["tensors"], len(graph), "no_holder.tensors")
        check("__main__.total.grad_fn" in rep["no_holder"]["graphs"],
              f"the graph is named: {rep['no_holder']}")
        # what the walk did not enter is named, so that "no Python holder" means it
        skipped = {t["type"]: t["references"] for t in rep["not_entered"]["types"]}
        check(skipped.get("Slotted", 0) >= 1 and skipped.get("set", 0) >= 1,
              f"a class with __slots__ and a set are said not entered: {rep['not_entered']}")
        check_eq(held_by(rep, "__main__.param")["type"], "Parameter", "nn.Parameter's type")
        check_eq(held_by(rep, "__main__.x")["type"], "Tensor", "a tensor's type")
        total = held_by(rep, "__main__.total")
        check(total["requires_grad"] is True and total["grad_fn"], f"total: {total}")
        # leaves: requires_grad_ read from their autograd metadata, its offset proved
        check(rep["layout"]["autogradmeta_requires_grad"] in (136, 144),
              f"requires_grad_'s offset: {rep['layout']}")
        for path, want in (("__main__.w", True), ("__main__.param", True),
                           ("__main__.unset", False), ("__main__.base", False),
                           ("__main__.model.history[0]", False)):
            t = held_by(rep, path)
            check(t["requires_grad"] is want and not t["grad_fn"],
                  f"{path}: a leaf, requires_grad {want}: {t}")
        # every tensor, and the bytes of the distinct storages
        every = (list(tr["named"].values()) + tr["history"] + tr["batches"] + [tr["local"]] +
                 tr["graph_only"])
        check_eq(rep["tensors_found"], len(every), "tensors found")
        distinct = {t["data"]: t["bytes"] for t in every}
        check_eq(rep["storages"], len(distinct), "storages")
        check_eq(rep["bytes"], sum(distinct.values()), "bytes of the distinct storages")
        # the text says the same
        rc, out, err = run_gpuleak(["census", str(wl.pid)], timeout=120)
        check_eq(rc, 0, f"text census's status ({err!r})")
        check(re.search(r"^  60 tensors, [\d.]+ KiB, held by __main__\.model\.history "
                        r"\(a list of 60\)$", out, re.M), f"the list's line: {out}")
        check(re.search(r"^  4 tensors, [\d.]+ B: no Python holder found; may be held by "
                        r"an autograd graph \(graphs reachable from Python: "
                        r"__main__\.total\.grad_fn\)$", out, re.M), f"the graph's line: {out}")
        check(re.search(r"^  paused [\d.]+ ms \(\d+ threads held with ptrace\)$", out, re.M),
              f"the pause is reported: {out}")
        check(re.search(r"^      held by __main__\.param\n", out, re.M) and
              re.search(r"Parameter float32 \[20\] cpu, storage \S+ of 80 B at \S+, "
                        r"requires_grad yes\n      held by __main__\.param$", out, re.M),
              f"the text gives a leaf's requires_grad: {out}")
        wl.finish()
    finally:
        wl.kill()


def test_census_freed_shows_none(tmp):
    wl = CensusWorkload(tmp, "--freed")
    try:
        rep = census(wl.pid)
        check_eq(rep["tensors_found"], 0, "tensors of a program that freed them all")
        check_eq(rep["groups"], [], "groups")
        check(rep["objects_visited"] > 1000, f"the heap was walked: {rep['objects_visited']}")
        # --json FILE as the other subcommands': the JSON there, the text on stdout
        path = os.path.join(tmp, "census.json")
        rc, out, err = run_gpuleak(["census", "--json", path, str(wl.pid)], timeout=120)
        check_eq(rc, 0, f"census --json FILE's status ({err!r})")
        check(out.startswith(f"census of PID {wl.pid}: CPython 3."), f"text on stdout: {out!r}")
        with open(path) as f:
            check_eq(json.load(f)["tensors_found"], 0, "the JSON in FILE")
        wl.finish()
    finally:
        wl.kill()


def test_census_caps_and_no_pause(tmp):
    wl = CensusWorkload(tmp)
    try:
        rep = census(wl.pid, "--max-objects", "2000")
        check_eq(rep["truncated_by"], "objects", "the object cap stops the walk")
        check(rep["objects_visited"] <= 2000, f"within the cap: {rep['objects_visited']}")
        check_eq(rep["caps"]["max_objects"], 2000, "the cap is reported")
        rc, out, err = run_gpuleak(["census", "--json", "-", "--max-read", "64K", str(wl.pid)])
        rep = json.loads(out)
        check_eq(rep["truncated_by"], "bytes read", "the read cap stops the walk")
        check(rc == 0 if rep["layout"]["verified"] or not rep["tensors_found"] else
              rc == 1 and "stopped at the cap on bytes read" in rep["layout"]["error"],
              f"tensors found but left unread for the cap say so: {rc} {rep['layout']}")
        check(rep["bytes_read"] <= 65536, f"within the cap: {rep['bytes_read']}")
        # gpuleak killed while the threads are held: the kernel lets them go
        for delay in (0.05, 0.15, 0.3):
            killed = subprocess.Popen([GPULEAK, "census", str(wl.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            killed.kill()
            killed.wait()
            wait_until(lambda: wl.state() not in ("t", "T"), 5,
                       "the program to run again after gpuleak was killed mid-pause")
        rep = census(wl.pid, "--no-pause")
        check(not rep["paused"] and rep["may_be_torn"] and rep["pause_ns"] == 0,
              f"an unpaused read says it may be torn: {rep}")
        check(rep["layout"]["verified"] and rep["tensors_found"] == len(wl.truth["named"]) +
              len(wl.truth["history"]) + len(wl.truth["batches"]) + 1 +
              len(wl.truth["graph_only"]),
              f"and still finds the tensors of a quiet program: {rep['tensors_found']}")
        wl.finish()
    finally:
        wl.kill()


def test_census_changing_heap(tmp):
    """A thread makes and drops tensors and containers without pause: read while it runs,
    the census stays within its caps, says its figures may be torn, never harms the
    program, and still names the tensors that do not change; paused, it is exact for them."""
    wl = CensusWorkload(tmp, "--churn")
    try:
        for i in range(3):
            rc, out, err = run_gpuleak(["census", "--json", "-", "--no-pause", str(wl.pid)],
                                       timeout=120)
            check(rc in (0, 1) and out, f"an unpaused read of a changing heap: status {rc}, "
                  f"{err!r}")
            rep = json.loads(out)
            check(rep["may_be_torn"] and rep["objects_visited"] <= rep["caps"]["max_objects"]
                  and rep["bytes_read"] <= rep["caps"]["max_read_bytes"],
                  f"within its caps and said to be torn: {rep}")
            check(wl.proc.poll() is None, "the program still runs")
        rep = census(wl.pid)
        for i, want in enumerate(wl.truth["history"]):
            check_storage(held_by(rep, f"__main__.model.history[{i}]"), want, f"history[{i}]")
        # a tensor the churning thread has just made may sit on its evaluation stack only,
        # or be caught half made, with no storage yet (then no figures are given for it)
        orphans = {t["data"] for t in rep["tensors"] if not t["holders"] and "data" in t}
        check({g["data"] for g in wl.truth["graph_only"]} <= orphans,
              f"paused: the graph's tensors have no Python holder: {orphans}")
        wl.finish()
    finally:
        wl.kill()


def test_attach_census(tmp):
    """attach --census: after the final report, the census of each target still alive."""
    wl = CensusWorkload(tmp)
    try:
        rc, out, err = run_gpuleak(["attach", "-d", "1", "--census", str(wl.pid)],
                                   timeout=120)
        check_eq(rc, 0, f"attach --census's status ({err!r})")
        report, _, census_text = out.partition(f"\ncensus of PID {wl.pid}: CPython 3.11, ")
        check(census_text and "no cuda allocations seen" in report.lower(),
              f"the report, then the census: {out!r}")
        check(re.search(r"^  60 tensors, [\d.]+ KiB, held by __main__\.model\.history "
                        r"\(a list of 60\)$", census_text, re.M), f"the census: {out}")
        rc, out, err = run_gpuleak(["attach", "-d", "1", "--census", "--json", "-",
                                    str(wl.pid)])
        check(rc == 2 and "--census prints its text on stdout" in err,
              f"--census with a report on stdout is refused: {rc} {err!r}")
        wl.finish()
    finally:
        wl.kill()


JOIN_SCRIPT = os.path.join(ROOT, "tests", "workloads", "py_census_join.py")
FAKETORCH = os.path.join(OUTPUT, "faketorch", "libc10_cuda.so")


def tensor_block(text, holder):
    """The lines of the census's tensor held by holder (its own line onwards)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == f"      held by {holder}":
            block = [line]
            for nxt in lines[i + 1:]:
                if not nxt.startswith("      "):
                    break
                block.append(nxt)
            return "\n".join(block)
    raise AssertionError(f"no tensor held by {holder} in:\n{text}")


def test_attach_census_joins_books(tmp):
    """attach --census joins each tensor with gpuleak's books by its storage's address: a
    real PyTorch program (CPU) declares each step's tensor to the allocator stand-in as a
    block at the storage's own address, and keeps it in a list: the census names the
    line that made the block beside the list that holds it, and the stack is judged to
    leak. A tensor declared before attach, and one never declared, are CPU memory in no
    block: the census says the join cannot be made for them, and why."""
    truth_path = os.path.join(tmp, "join.json")
    wl = subprocess.Popen([PYTHON, JOIN_SCRIPT, "--lib", FAKECUDA, "--torch-lib", FAKETORCH,
                           "--truth", truth_path, "--libdir", tmp], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = _readline(wl.stdout, 60, "py_census_join.py to say ready")
        check_eq(line, f"ready {wl.pid}", "py_census_join.py's first line")
        with open(truth_path) as f:
            truth = json.load(f)
        svg = os.path.join(tmp, "census.svg")
        tr = Tracer(["attach", "-d", "3", "--resolution", "50ms", "--tensors", "full",
                     "--census", "--svg", svg, str(wl.pid)], tmp, json_report=False)
        tr.wait_attached()
        wl.stdin.write(b"go\n")
        wl.stdin.flush()
        check_eq(tr.wait(timeout=120), 0, f"attach --census's status ({tr.stderr()!r})")
        out = tr.stdout()
        _, _, text = out.partition(f"\ncensus of PID {wl.pid}: CPython 3.11, ")
        check(text, f"the census follows the report: {out!r}")
        site = truth["alloc_site"]
        m = re.search(r"^  joined with gpuleak's books: (\d+) of (\d+) tensors", text, re.M)
        check(m, f"the join's summary: {text}")
        # the step being made is held by grow()'s local t as well
        leak = re.search(r"^  " + re.escape(site) + r" -> __main__\.HISTORY"
                         r"(?:, thread \d+ grow\(\): t)? \((\d+) tensors, ", text, re.M)
        check(leak, f"the leaking line beside its holder ({site}):\n{text}")
        group = re.search(r"^  (\d+) tensors, [\d.]+ KiB, held by __main__\.HISTORY "
                          r"\(a list of (\d+)\)$", text, re.M)
        check(group, f"the list's group: {text}")
        listed, joined = int(group.group(2)), int(leak.group(1))
        # the books are read just before the pause: a step made in between is in no block
        check(listed >= 20 and listed - 1 <= joined <= listed, f"{joined} of {listed} joined")
        check_eq(int(m.group(1)), joined, "every joined tensor is a leaking step's")
        check(f"allocated at {site} (a PyTorch block, judged to leak)" in
              tensor_block(text, "__main__.HISTORY[0]"), f"the first step's line:\n{text}")
        for name in ("early", "plain"):
            check("no allocation line: CPU memory: not in gpuleak's books" in
                  tensor_block(text, f"__main__.{name}"), f"{name}: no join, said why")
        # the flame graph's census section: the list beside the line that filled it
        with open(svg, encoding="utf-8") as f:
            graph = f.read()
        check(re.search(r'<text class="census leak" x="\d+" y="\d+">  \d+ tensors, [\d.]+ KiB, '
                        r"held by __main__\.HISTORY \(list\) \u2190 allocated at " +
                        re.escape(site) + r", judged to leak</text>", graph),
              f"the SVG's census section: {[l for l in graph.splitlines() if 'census' in l]}")
        check(f"PID {wl.pid}: " in graph, "the section names the process")
    finally:
        wl.kill()
        wl.wait()


def test_census_refuses_without_python(tmp):
    p = subprocess.Popen(["sleep", "30"])
    try:
        rc, out, err = run_gpuleak(["census", str(p.pid)])
        check_eq(rc, 1, "status for a process without CPython")
        check("no CPython interpreter found" in err and out == "", f"the message: {err!r}")
        rc, out, err = run_gpuleak(["census", "nope"])
        check_eq(rc, 2, "status for a bad PID")
    finally:
        p.kill()
        p.wait()


def test_census_walk_stand_in(tmp):
    """The walk under GPULEAK_TEST_PYTHON (else /usr/bin/python3; make
    test-python-versions runs it under every pyenv interpreter): objects of a class named
    like PyTorch's tensor base are found with every holder, and, having no TensorImpl
    behind them, get no figure: the layout is refused, exit status 1. Other versions
    than 3.11 to 3.13 are refused with the reason."""
    python = os.environ.get("GPULEAK_TEST_PYTHON", PYTHON)
    truth = os.path.join(tmp, "stand_in.json")
    script = os.path.join(ROOT, "tests", "workloads", "py_census_stand_in.py")
    proc = subprocess.Popen([python, script, truth], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = _readline(proc.stdout, 30, "py_census_stand_in.py to say ready")
        check(line == f"ready {proc.pid}", f"the stand-in said {line!r}")
        with open(truth) as f:
            paths = json.load(f)
        minor = int(subprocess.check_output([python, "-c", "import sys; "
                                             "print(sys.version_info[1])"]))
        if minor < 11 or minor > 13:
            rc, out, err = run_gpuleak(["census", str(proc.pid)])
            check(rc == 1 and "the census reads CPython 3.11 to 3.13" in err and not out,
                  f"CPython 3.{minor} is refused, and why: {rc} {err!r}")
            return
        rep = census(proc.pid, status=1)
        check(not rep["layout"]["verified"] and rep["layout"]["error"],
              f"the layout is refused, and why: {rep['layout']}")
        check_eq(rep["tensors_found"], len(paths), "stand-in tensors found")
        got = sorted(h for t in rep["tensors"] for h in t["holders"])
        check_eq(got, sorted(paths), "their holders")
        check(all("storage" not in t and "storage_bytes" not in t for t in rep["tensors"]),
              "no figure without a verified layout")
        groups = {g["holder"]: g for g in rep["groups"]}
        check_eq((groups["__main__.items"]["kind"], groups["__main__.items"]["tensors"],
                  groups["__main__.items"]["length"]), ("list", 5, 5), "the list's group")
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=30)
        check_eq(out.decode().strip(), "ok", "the stand-in runs on")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_census_reaches_a_model_and_its_optimizer(tmp):
    """A torch.nn model and an Adam optimizer after a step: every parameter (in the
    modules' _parameters, an OrderedDict up to PyTorch 2.0) and every state tensor (in
    opt.state, a defaultdict keyed by the Parameters: exp_avg and exp_avg_sq, twice the
    model) has a Python holder, and a state tensor's key is named by where its Parameter
    is held (before: the parameters were reached only through param_groups, the state
    not at all: "no Python holder")."""
    wl = CensusWorkload(tmp)
    wl.kill()
    wl.truth_path = os.path.join(tmp, "optim.json")
    wl.proc = subprocess.Popen([PYTHON, os.path.join(ROOT, "tests", "workloads",
                                                     "py_census_optim.py"),
                                "--truth", wl.truth_path],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    wl.pid = wl.proc.pid
    try:
        line = _readline(wl.proc.stdout, 60, "py_census_optim.py to say ready")
        check(line == f"ready {wl.pid}", f"py_census_optim.py said {line!r}")
        with open(wl.truth_path) as f:
            truth = json.load(f)
        rep = census(wl.pid)
        by_data = {}
        for t in rep["tensors"]:
            by_data.setdefault(t["data"], []).extend(t["holders"])
        check_eq(len(truth["params"]), 4, "two layers' weights and biases")
        check_eq(len(truth["state"]), 12, "exp_avg, exp_avg_sq and step of each")
        for name, want in truth["params"].items():
            holders = by_data.get(want["data"], [])
            idx, attr = name.split(".")
            own = f"__main__.model._modules['{idx}']._parameters['{attr}']"
            check(own in holders, f"parameter {name} held by {own}: {holders}")
        for name, want in truth["state"].items():
            holders = by_data.get(want["data"], [])
            idx, attr, key = name.split(".")
            param = by_data[truth["params"][f"{idx}.{attr}"]["data"]]
            named = [h for h in holders if re.fullmatch(
                rf"__main__\.opt\.state\[<Parameter (.*)>\]\['{key}'\]", h)]
            check(named and named[0][len("__main__.opt.state[<Parameter "):
                                     -len(f">]['{key}']")] in param,
                  f"state tensor {name} held in opt.state under its Parameter, named by one "
                  f"of that Parameter's holders {param}: {holders}")
        check_eq(rep["no_holder"]["tensors"], 0, f"no tensor without a holder: "
                 f"{rep['no_holder']}")
        wl.finish()
    finally:
        wl.kill()
