# SPDX-License-Identifier: BSD-2-Clause
"""Every parser of outside data under libFuzzer (ASan, UBSan) for a few seconds, from the
seed corpus kept in the repository (tests/fuzz/corpus/<target>/, crash reproducers
included): the /proc parsers, cgroup paths and OCI config files, ELF readers, CPython
memory, the agent's HTTP requests, nvidia-smi's CSV, ring-buffer records, recordings
(read, replayed and reported), stack copies unwound with the modules' CFI, and CPython
heaps walked by the census."""
import os
import subprocess

from harness import OUTPUT, ROOT, check, check_eq

SECONDS = 5
# the fewest runs each target makes in SECONDS on a slow machine (ELF files are big)
MIN_RUNS = {"record": 1000, "procfs": 500, "cgroup": 2000, "elf": 300, "python": 2000, "http": 2000,
            "nvsmi": 2000, "books": 2000, "unwind": 300, "census": 300}


def fuzz(tmp, target, max_len=16384):
    binary = os.path.join(OUTPUT, "fuzz", f"fuzz_{target}")
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", target)
    check(os.path.exists(binary), f"{binary} is built by 'make test'")
    seeds = os.listdir(corpus)
    check(len(seeds) >= 3, f"{corpus} holds seeds: {seeds}")
    work = os.path.join(tmp, "corpus")
    os.makedirs(work)
    p = subprocess.run([binary, f"-max_total_time={SECONDS}", f"-max_len={max_len}", "-timeout=10",
                        "-rss_limit_mb=2048", f"-artifact_prefix={tmp}/", work, corpus],
                       capture_output=True, timeout=60 + SECONDS)
    err = p.stderr.decode(errors="replace")
    check_eq(p.returncode, 0, f"fuzz_{target}'s exit status:\n{err[-3000:]}")
    runs = [int(line.split()[1]) for line in err.splitlines() if line.startswith("Done ")]
    check(runs and runs[0] >= MIN_RUNS[target], f"fuzz_{target} ran: {err[-500:]!r}")
    check(not [f for f in os.listdir(tmp) if f.startswith(("crash-", "leak-", "timeout-"))],
          f"fuzz_{target}: no crash, leak or timeout")


def test_fuzz_record(tmp):
    fuzz(tmp, "record", max_len=65536)


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
    fuzz(tmp, "unwind", max_len=32768)


def test_fuzz_census(tmp):
    """A synthetic CPython heap with tensors, patched at random: the census's walk stays
    within its caps, and reads the unpatched heap exactly."""
    fuzz(tmp, "census")
