# SPDX-License-Identifier: BSD-2-Clause
"""Report files (--json, --folded, --svg, --pprof): checked before anything is traced,
never another user's file, never a FIFO that nobody reads, never one file twice."""
import os
import pwd
import threading
import time

from harness import Tracer, Workload, check, check_eq, run_gpuleak

OUTPUTS = ("--json", "--folded", "--svg", "--pprof")


def _sleeper(tmp):
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    return wl


def _fails_fast(args, want, what):
    t0 = time.monotonic()
    rc, out, err = run_gpuleak(args, timeout=20)
    took = time.monotonic() - t0
    check_eq(rc, 1, f"{what}: exit status ({err})")
    check(want in err, f"{what}: the reason {want!r} is said: {err!r}")
    check("attached" not in err, f"{what}: nothing was attached: {err!r}")
    check(took < 5, f"{what}: refused at once, not after the trace ({took:.1f} s)")
    return err


def test_bad_path_refused_before_tracing(tmp):
    wl = _sleeper(tmp)
    try:
        for opt in OUTPUTS:
            _fails_fast(["attach", "--duration", "30s", opt, "/nonexistent/dir/x", str(wl.pid)],
                        "cannot write /nonexistent/dir/x: No such file", opt)
        same = os.path.join(tmp, "r")
        _fails_fast(["attach", "--duration", "30s", "--json", same, "--pprof",
                     os.path.join(tmp, ".", "r"), str(wl.pid)], "are the same file",
                    "--json f --pprof ./f")
    finally:
        wl.release()
        wl.wait()


def _nobody():
    return pwd.getpwnam("nobody").pw_uid


def test_other_users_file_in_sticky_dir_refused(tmp):
    """A world-writable sticky directory; the report file was made by another user
    (mode 666) beforehand: refused for every output, the file left as it was."""
    wl = _sleeper(tmp)
    sticky = os.path.join(tmp, "shared")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    try:
        for opt in OUTPUTS:
            path = os.path.join(sticky, f"report{opt}")
            with open(path, "w") as f:
                f.write("theirs")
            os.chmod(path, 0o666)
            os.chown(path, _nobody(), -1)
            _fails_fast(["attach", "--duration", "30s", opt, path, str(wl.pid)],
                        "belongs to another user", opt)
            with open(path) as f:
                check_eq(f.read(), "theirs", f"{opt}: the other user's file is untouched")
            check_eq(os.stat(path).st_uid, _nobody(), f"{opt}: still the other user's")
    finally:
        wl.release()
        wl.wait()


def test_parent_symlink_planted_in_sticky_dir_not_followed(tmp):
    """A symbolic link among the parent directories: followed when it is ours, refused
    when another user planted it in a sticky world-writable directory."""
    wl = _sleeper(tmp)
    sticky = os.path.join(tmp, "shared")
    target = os.path.join(tmp, "target")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    os.mkdir(target)
    theirs, ours = os.path.join(sticky, "theirs"), os.path.join(sticky, "ours")
    os.symlink(target, theirs)
    os.lchown(theirs, _nobody(), -1)
    os.symlink(target, ours)
    try:
        _fails_fast(["attach", "--duration", "30s", "--json", os.path.join(theirs, "r.json"),
                     str(wl.pid)], "another user's symbolic link", "planted link")
        check(not os.path.exists(os.path.join(target, "r.json")), "nothing written through it")
        tr = Tracer(["attach", "-i", "0", "--duration", "1s", "--folded",
                     os.path.join(ours, "r.folded"), str(wl.pid)], tmp)
        check_eq(tr.wait(30), 0, f"our own link is followed: {tr.stderr()}")
        check(os.path.exists(os.path.join(target, "r.folded")), "written through our link")
    finally:
        wl.release()
        wl.wait()


def test_fifo_without_reader_refused_at_once(tmp):
    """A FIFO nobody reads fails before tracing instead of blocking after it; one with a
    reader gets the whole report."""
    wl = _sleeper(tmp)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    try:
        _fails_fast(["attach", "--duration", "30s", "--json", fifo, str(wl.pid)],
                    "no process reads", "FIFO without a reader")
        got = []
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)

        def read_all():
            data = b""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    time.sleep(0.02)
                    continue
                if not chunk and data:
                    break
                data += chunk
            got.append(data)
        reader = threading.Thread(target=read_all)
        reader.start()
        rc, _, err = run_gpuleak(["attach", "-i", "0", "--duration", "1s", "--json", fifo,
                                  str(wl.pid)], timeout=30)
        reader.join(40)
        os.close(fd)
        check_eq(rc, 0, f"with a reader: exit status ({err})")
        check(got and got[0].startswith(b"{") and b'"processes"' in got[0],
              f"the reader got the JSON report: {got[:1]!r}")
    finally:
        wl.release()
        wl.wait()
