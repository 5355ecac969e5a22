# SPDX-License-Identifier: BSD-2-Clause
"""Targets and libraries gpuleak cannot take as they come: a libcuda whose section
headers are missing or damaged (it loads all the same), one in a directory whose name
has a newline, processes that can never be traced, commands that cannot be run. Exact
books where the target works; otherwise the real reason, at once."""
import ctypes
import json
import os
import shutil
import struct
import subprocess
import time

from harness import (FAKECUDA, GPULEAK, WORKLOADS, Tracer, Workload, check, check_books,
                     check_eq, process, run_gpuleak, wait_until)


def _damaged(tmp, name, edit):
    """A copy of the stand-in at tmp/name/libcuda.so.1, its bytes changed by edit()."""
    data = bytearray(open(FAKECUDA, "rb").read())
    data = edit(data)
    d = os.path.join(tmp, name)
    os.makedirs(d)
    path = os.path.join(d, "libcuda.so.1")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _no_sections(d):
    struct.pack_into("<Q", d, 0x28, 0)         # e_shoff
    struct.pack_into("<HH", d, 0x3c, 0, 0)     # e_shnum, e_shstrndx
    return d


def _huge_shoff(d):
    struct.pack_into("<Q", d, 0x28, 0xffffffffff00)
    return d


def _garbage_sizes(d):
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shnum, = struct.unpack_from("<H", d, 0x3c)
    for i in range(shnum):
        struct.pack_into("<Q", d, shoff + i * 64 + 32, 0x7fffffffffff0000 + i)  # sh_size
    return d


def _cut_after_last_load(d):
    phoff, = struct.unpack_from("<Q", d, 0x20)
    phnum, = struct.unpack_from("<H", d, 0x38)
    end = 0
    for i in range(phnum):
        p_type, _, off, _, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", d, phoff + i * 56)
        if p_type == 1:
            end = max(end, off + filesz)
    check(end < len(d), "the section headers lie after the last PT_LOAD")
    return d[:end]


def test_libcuda_with_damaged_section_headers(tmp):
    """Each damage: the library still loads for the target; run --libcuda FILE reads its
    symbols from the dynamic segment; the books are exact."""
    for name, edit in (("no-sections", _no_sections), ("huge-shoff", _huge_shoff),
                       ("garbage-sizes", _garbage_sizes), ("cut", _cut_after_last_load)):
        lib = _damaged(tmp, name, edit)
        truth_path = os.path.join(tmp, f"{name}.truth.json")
        tr = Tracer(["run", "-i", "0", "--libcuda", lib, "--",
                     os.path.join(WORKLOADS, "wl_dlopen"), "--lib", lib, "--no-wait",
                     "--truth", truth_path], tmp)
        check_eq(tr.wait(60), 0, f"{name}: gpuleak run exit status:\n{tr.stderr()}")
        with open(truth_path) as f:
            truth = json.load(f)
        rep = tr.report()
        check_books(rep, process(rep, truth["pid"]), truth)
        check(rep["complete"], f"{name}: complete")


def test_libcuda_that_cannot_be_read_is_named_with_the_reason(tmp):
    """A file named libcuda.so.1 that is no ELF file: the reason, not 'No such file'."""
    d = os.path.join(tmp, "junk")
    os.makedirs(d)
    lib = os.path.join(d, "libcuda.so.1")
    with open(lib, "wb") as f:
        f.write(b"not a library\n" * 100)
    rc, _, err = run_gpuleak(["run", "--libcuda", lib, "--", "true"])
    check_eq(rc, 1, f"exit status ({err})")
    check("not an ELF file" in err and "No such file" not in err, f"the reason: {err!r}")


def test_libcuda_in_a_directory_with_a_newline(tmp):
    d = os.path.join(tmp, "new\nline")
    os.makedirs(d)
    lib = os.path.join(d, "libcuda.so.1")
    shutil.copy(FAKECUDA, lib)
    wl = Workload("wl_dlopen", "--lib", lib, "--late-ms", "0", tmp=tmp)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", str(wl.pid)], tmp)
    wait_until(lambda: "has not loaded libcuda yet" in tr.stderr(), 20, "gpuleak to wait")
    wl.go()
    truth = wl.truth()
    check_eq(tr.wait(30), 0, f"gpuleak exit status:\n{tr.stderr()}")
    rep = tr.report()
    check_books(rep, process(rep, wl.pid), truth)


def _refused_at_once(args, want, what):
    t0 = time.monotonic()
    rc, _, err = run_gpuleak(args, timeout=30)
    check_eq(rc, 1, f"{what}: exit status ({err})")
    check(want in err, f"{what}: says {want!r}: {err!r}")
    check(time.monotonic() - t0 < 5, f"{what}: refused at once, not after --wait")


def test_untraceable_targets_refused_with_the_reason(tmp):
    kthread = next(pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                   if _is_kthread(pid))
    _refused_at_once(["attach", "--wait", "20s", str(kthread)], "is a kernel thread",
                     "a kernel thread")
    p = subprocess.run(["sh", "-c", f'exec "{GPULEAK}" attach --wait 20s $$'],
                       capture_output=True, timeout=30)
    check_eq(p.returncode, 1, "gpuleak's own PID: exit status")
    check(b"is gpuleak itself" in p.stderr, f"gpuleak's own PID: {p.stderr!r}")
    child = subprocess.Popen(["true"])
    wait_until(lambda: _state(child.pid) == "Z", 10, "the child to become a zombie")
    try:
        _refused_at_once(["attach", "--wait", "20s", str(child.pid)], "a zombie", "a zombie")
    finally:
        child.wait()


def _is_kthread(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[6]) & 0x00200000
    except (OSError, ValueError, IndexError):
        return False


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _landlock_preexec():
    """Puts the child in a Landlock domain: it may then not read /proc/PID/maps of
    processes outside it, whatever its capabilities (CAP_SYS_PTRACE included)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.c_uint64(1 << 13)  # handled: LANDLOCK_ACCESS_FS_MAKE_SOCK
    fd = libc.syscall(444, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if fd < 0 or libc.prctl(38, 1, 0, 0, 0) or libc.syscall(446, fd, 0):
        os._exit(99)


def test_hidden_maps_not_blamed_on_a_capability(tmp):
    """/proc/PID/maps refused although gpuleak holds CAP_SYS_PTRACE: the reason is that
    the machine hides the process, not a missing capability."""
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    try:
        p = subprocess.run([GPULEAK, "attach", "--wait", "20s", str(wl.pid)],
                           capture_output=True, timeout=30, preexec_fn=_landlock_preexec)
    finally:
        wl.go()
        wl.release()
        wl.wait()
    err = p.stderr.decode(errors="replace")
    check(p.returncode != 99, "the test could enter a Landlock domain")
    check_eq(p.returncode, 1, f"exit status ({err})")
    check("although gpuleak holds CAP_SYS_PTRACE" in err and "needs CAP_SYS_PTRACE" not in err,
          f"the reason: {err!r}")


def test_run_a_command_that_cannot_be_run(tmp):
    rc, out, err = run_gpuleak(["run", "--", "/nonexistent/cmd"])
    check_eq(rc, 127, f"exit status ({err})")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    check_eq(lines, ["gpuleak: error: cannot run /nonexistent/cmd: No such file or directory"],
             "one line why")
    check_eq(out, "", "no report on stdout")
    rc, _, err = run_gpuleak(["run", "--", tmp])
    check_eq(rc, 126, f"a directory: exit status ({err})")
    check("cannot run" in err and "Permission denied" in err, f"a directory: {err!r}")
