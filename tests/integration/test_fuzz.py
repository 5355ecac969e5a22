# SPDX-License-Identifier: BSD-2-Clause
"""Every parser of outside data under libFuzzer (ASan, UBSan) for a few seconds, from the
seed corpus kept in the repository (tests/fuzz/corpus/<target>/, crash reproducers
included): the /proc parsers, cgroup paths and OCI config files, ELF readers, CPython
memory, the agent's HTTP requests, nvidia-smi's CSV, ring-buffer records, recordings
(read, replayed and reported), stack copies unwound with the modules' CFI, and CPython
heaps walked by the census."""
import os
import shutil
import subprocess
import tempfile

import harness
from harness import OUTPUT, ROOT, check, check_eq

SECONDS = 5
# the fewest runs each target makes in SECONDS on a slow machine (ELF files are big)
MIN_RUNS = {"record": 1000, "procfs": 500, "cgroup": 2000, "elf": 300, "python": 2000, "http": 2000,
            "nvsmi": 2000, "books": 2000, "unwind": 300, "census": 300}
MAX_LEN = {"record": 65536, "unwind": 32768}

# Each target runs on one CPU. Where there are two or more, a target's test starts the
# next selected one too, to run beside it: the fuzz tests take half the time.
_started = {}  # target -> (its libFuzzer process, its folder)


def _start(target):
    binary = os.path.join(OUTPUT, "fuzz", f"fuzz_{target}")
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", target)
    check(os.path.exists(binary), f"{binary} is built by 'make test'")
    seeds = os.listdir(corpus)
    check(len(seeds) >= 3, f"{corpus} holds seeds: {seeds}")
    work = tempfile.mkdtemp(prefix=f"gpuleak-fuzz-{target}-")
    os.makedirs(os.path.join(work, "corpus"))
    with open(os.path.join(work, "stderr"), "wb") as err:
        p = subprocess.Popen([binary, f"-max_total_time={SECONDS}",
                              f"-max_len={MAX_LEN.get(target, 16384)}", "-timeout=10",
                              "-rss_limit_mb=2048", f"-artifact_prefix={work}/",
                              os.path.join(work, "corpus"), corpus],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    _started[target] = (p, work)


def _next_selected(target):
    """The target of the fuzz test the run takes after this target's, or None."""
    names = harness.SELECTED
    me = f"test_fuzz.test_fuzz_{target}"
    later = names[names.index(me) + 1:] if me in names else []
    return next((n.rsplit("_", 1)[1] for n in later[:1] if n.startswith("test_fuzz.test_fuzz_")),
                None)


def fuzz(tmp, target):
    if target not in _started:
        _start(target)
    nxt = _next_selected(target)
    if nxt and nxt not in _started and (os.cpu_count() or 1) >= 2:
        _start(nxt)
    p, work = _started.pop(target)
    try:
        rc = p.wait(60 + SECONDS)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = "killed after its time"
    with open(os.path.join(work, "stderr"), errors="replace") as f:
        err = f.read()
    check_eq(rc, 0, f"fuzz_{target}'s exit status:\n{err[-3000:]}")
    runs = [int(line.split()[1]) for line in err.splitlines() if line.startswith("Done ")]
    check(runs and runs[0] >= MIN_RUNS[target], f"fuzz_{target} ran: {err[-500:]!r}")
    check(not [f for f in os.listdir(work) if f.startswith(("crash-", "leak-", "timeout-"))],
          f"fuzz_{target}: no crash, leak or timeout (in {work})")
    shutil.rmtree(work, ignore_errors=True)  # kept where a check failed


def test_fuzz_record(tmp):
    fuzz(tmp, "record")


def test_fuzz_procfs(tmp):
    """Maps, stat, comm, status and cgroup files of a fake /proc, and the finders over them."""
    fuzz(tmp, "procfs")


def test_fuzz_cgroup(tmp):
    """Container and pod identity from cgroup paths; Kubernetes names from OCI config.json."""
    fuzz(tmp, "cgroup")


def test_fuzz_elf(tmp):
    """Corrupt ELF files as the CUDA driver, as an executable with RPATH, as a module to
    symbolize (symbols, segments, build-id)."""
    fuzz(tmp, "elf")


def test_fuzz_python(tmp):
    """CPython code, str and bytes objects, _Py_DebugOffsets and line tables from memory."""
    fuzz(tmp, "python")


def test_fuzz_http(tmp):
    """The agent's HTTP request parser, byte by byte as requests arrive, and listen addresses."""
    fuzz(tmp, "http")


def test_fuzz_nvsmi(tmp):
    """nvidia-smi's CSV output of devices and compute processes."""
    fuzz(tmp, "nvsmi")


def test_fuzz_books(tmp):
    """Ring-buffer records of any bytes through event__validate and books__apply."""
    fuzz(tmp, "books")


def test_fuzz_unwind(tmp):
    """A traced process's stack, every byte of it its own, unwound with real CFI."""
    fuzz(tmp, "unwind")


def test_fuzz_census(tmp):
    """A synthetic CPython heap with tensors, patched at random: the census's walk stays
    within its caps, and reads the unpatched heap exactly."""
    fuzz(tmp, "census")
