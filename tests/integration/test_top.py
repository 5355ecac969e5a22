# SPDX-License-Identifier: BSD-2-Clause
"""gpuleak top in a real terminal: tmux runs it at 80x24, the test reads the screen
(capture-pane), types keys (send-keys) and resizes the window to 60x15 and back."""
import os
import re
import signal
import subprocess

from harness import GPULEAK, Workload, build_fake_nvml, check, check_eq, wait_until

GIB = 1 << 30


class Tmux:
    """One tmux server of the test's own (its own socket): nothing of anyone else's."""

    def __init__(self, tmp, cols, rows, command):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.tmux("new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows), command)

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args],
                           capture_output=True, timeout=20)
        check_eq(p.returncode, 0, f"tmux {' '.join(args[:2])}: {p.stderr.decode()!r}")
        return p.stdout.decode(errors="replace")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t").split("\n")[:-1]

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_screen(self, pred, what, timeout=20, whole=True):
        """Waits for pred(lines); whole: on a screen drawn to its last line (tmux may
        show a redraw half-way)."""
        seen = []

        def ok():
            seen[:] = self.screen()
            if whole and not (len(seen) > 1 and seen[0].startswith("gpuleak top - ") and
                              seen[-1].startswith(("q quit", "filter: "))):
                return False
            return pred(seen)
        try:
            wait_until(ok, timeout, what)
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen:\n" + "\n".join(seen)) from None
        return seen

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True,
                       timeout=20)


def check_layout(lines, cols, rows, pid):
    check_eq(len(lines), rows, "lines on the screen")
    check(lines[0].startswith("gpuleak top - "), f"the title stays on top: {lines[0]!r}")
    check(lines[-1].startswith("q quit"), f"the key line stays at the bottom: {lines[-1]!r}")
    for line in lines:
        check(len(line) <= cols, f"a line wider than {cols} columns: {line!r}")
    check(any(re.match(r"GPU0 used \S+ \S+ \(\d+%\)\s+free 10\.00 GiB", l) for l in lines),
          f"a header for the GPU with NVML's used and free: {lines[:3]}")
    stack = [l for l in lines if re.match(rf"\s*{pid} +[\d.]+ \w?i?B +(?:0|[+-][\d.]+ \w?i?B/s) "
                                          r"+(leak|unknown) +leak_site_staircase", l)]
    check(stack, f"the leaking stack, on one line, with its site: {lines}")


def start_top(tmp, binary, env):
    """wl_leak, waiting to leak, and `binary top` on it in an 80x24 tmux, with one GPU in the
    fake NVML's file; env (VAR=value) says how binary reads it. Returns both."""
    wl = Workload("wl_leak", "--iters", "0", "--interval-ms", "100", tmp=tmp)
    wl.wait_ready()
    nvml_file = os.path.join(tmp, "nvml.txt")
    with open(nvml_file, "w") as f:
        f.write(f"device {80 * GIB} {10 * GIB} GPU-fake-0\n")
    command = (f"echo BEFORE; env {env} FAKE_NVML_FILE={nvml_file} "
               f"TERM=screen {binary} top -i 300ms {wl.pid}; echo AFTER status=$?; "
               "sleep 120")
    return wl, Tmux(tmp, 80, 24, command)


def leak_on_screen(t, wl, what):
    """Once top's first screen (what) is up, wl leaks: the 80x24 screen with its stack."""
    t.wait_screen(lambda s: True, what)
    wl.go()
    lines = t.wait_screen(lambda s: any("leak_site_staircase" in l for l in s),
                          "the leaking stack")
    check_layout(lines, 80, 24, wl.pid)
    return lines


def quit_top(t):
    """q: the text on the screen once top has ended and the shell has said its status."""
    t.keys("q")
    lines = t.wait_screen(lambda s: any("AFTER status=" in l for l in s), "top to quit",
                          whole=False)
    return "\n".join(lines)


def test_top_in_a_terminal(tmp):
    libdir = build_fake_nvml(tmp)
    wl, t = start_top(tmp, GPULEAK, f"LD_LIBRARY_PATH={libdir}")
    try:
        lines = leak_on_screen(t, wl, "top's screen")
        # NVML lists the process nowhere, but the machine has one GPU: it is that one
        t.wait_screen(lambda s: not any(l.startswith("GPU?") for l in s) and
                      any(l.startswith("GPU0 ") and "traced 0 B" not in l for l in s),
                      "the traced memory on GPU0, not GPU?")
        check("no NVML figure: DEVICE is what gpuleak saw since attach, not memory from before"
              in lines, f"NVML lists the process nowhere: the note under the GPUs: {lines}")
        check(any(re.match(r"\s+PID COMM +DEVICE +TORCH +GROWTH", l) for l in lines),
              f"the process list's columns at 80: {lines}")
        # sort keys
        t.keys("b")
        t.wait_screen(lambda s: "sort: bytes" in s[0], "sort by bytes")
        t.keys("s")
        t.wait_screen(lambda s: "sort: name" in s[0], "s: the next sort")
        # help, closed by any key
        t.keys("?")
        t.wait_screen(lambda s: s and s[0] == "gpuleak top: keys", "the help", whole=False)
        t.keys("x")
        t.wait_screen(lambda s: s[0].startswith("gpuleak top - "), "the help closed")
        # filter: a name that matches nothing, then cleared
        t.keys("/", "zzz")
        t.wait_screen(lambda s: s[-1].startswith("filter: zzz"), "the filter typed")
        t.keys("Enter")
        t.wait_screen(lambda s: "filter: zzz" in s[0] and s[-1].startswith("q quit") and
                      any("none that match" in l for l in s), "the filter applied")
        t.keys("/", "Escape")
        t.wait_screen(lambda s: "filter:" not in s[0] and
                      any("leak_site_staircase" in l for l in s), "the filter cleared")
        # the selected row is drawn in reverse video: the process first, Tab the stacks
        sel = lambda: [l for l in t.tmux("capture-pane", "-p", "-e", "-t", "t").split("\n")
                       if re.search(r"\x1b\[(?:[0-9;]*;)?7m", l)]
        t.wait_screen(lambda s: any(f"{wl.pid}" in l and "wl_leak" in l for l in sel()),
                      "the process selected")
        t.keys("Tab", "Down", "j", "k")
        t.wait_screen(lambda s: any("leak_site_staircase" in l for l in sel()),
                      "the stack selected after Tab")
        # Enter on a stack: its frames, the allocating call first; any key goes back
        t.keys("Enter")
        t.wait_screen(lambda s: s[0].startswith(f"PID {wl.pid}: device") and
                      any(re.match(r"\s+#0\s+cuMemAlloc_v2", l) for l in s) and
                      any("leak_site_staircase" in l for l in s[1:]) and
                      s[-1].startswith("any key"), "the stack's frames", whole=False)
        t.keys("x")
        t.wait_screen(lambda s: s[0].startswith("gpuleak top - "), "back to the lists")
        # a leak's row is red once it is judged a leak (and not selected)
        t.keys("Tab")
        t.wait_screen(lambda s: any("leak_site_staircase" in l and " leak " in l and
                                    re.search(r"\x1b\[[0-9;]*31m", l) for l in
                                    t.tmux("capture-pane", "-p", "-e", "-t", "t").split("\n")),
                      "the leak's row in red")
        t.keys("Tab")
        # Enter on a process: its stacks only
        t.keys("Tab", "Enter")
        t.wait_screen(lambda s: "(one process)" in s[0], "Enter: one process's stacks")
        t.keys("Enter")
        t.wait_screen(lambda s: "(one process)" not in s[0], "Enter again: every process")
        # resize: SIGWINCH, a redraw that fits
        t.tmux("resize-window", "-t", "t", "-x", "60", "-y", "15")
        lines = t.wait_screen(lambda s: len(s) == 15 and s[0].startswith("gpuleak top - ")
                              and any("leak_site_staircase" in l for l in s), "a 60x15 screen")
        check_layout(lines, 60, 15, wl.pid)
        t.tmux("resize-window", "-t", "t", "-x", "80", "-y", "24")
        lines = t.wait_screen(lambda s: len(s) == 24 and any("TORCH" in l for l in s),
                              "back at 80x24")
        check_layout(lines, 80, 24, wl.pid)
        text = quit_top(t)
        check("AFTER status=0" in text, f"top exits 0 on q: {text}")
        check("BEFORE" in text and "gpuleak top - " not in text,
              f"the alternate screen is gone, the shell's screen is back: {text}")
    finally:
        t.close()
        wl.kill()
        wl.wait()


STATIC_BIN = os.path.join(os.environ.get("OUTPUT", os.path.join(os.path.dirname(__file__),
                                                                "..", "..", ".output")),
                          "static", "gpuleak")
FAKE_SMI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_nvidia_smi")


def test_static_top_in_a_terminal(tmp):
    """The static binary copied onto GPU nodes draws top with its own ncurses: the GPU header
    from nvidia-smi (a static gpuleak does not load NVML), the leaking stack, q quits with 0."""
    check(os.access(STATIC_BIN, os.X_OK), f"the static build is there: {STATIC_BIN}")
    wl, t = start_top(tmp, STATIC_BIN, f"GPULEAK_NVIDIA_SMI={FAKE_SMI}")
    try:
        leak_on_screen(t, wl, "the static top's screen")
        text = quit_top(t)
        check("AFTER status=0" in text, f"the static top exits 0 on q: {text}")
    finally:
        t.close()
        wl.kill()
        wl.wait()


def test_top_on_a_terminal_it_cannot_drive(tmp):
    """A TERM with no terminfo entry: one error naming TERM and what to do, exit status 1,
    the target untouched; for the dynamic and the static binary alike."""
    wl = Workload("wl_leak", "--iters", "0", "--interval-ms", "100", tmp=tmp)
    wl.wait_ready()
    try:
        for i, binary in enumerate((GPULEAK, STATIC_BIN)):
            sub = os.path.join(tmp, str(i))
            os.mkdir(sub)
            out = os.path.join(sub, "out.txt")
            command = (f"env TERM=gpuleak-no-such-term TERMINFO={tmp}/none "
                       f"GPULEAK_NVIDIA_SMI={FAKE_SMI} {binary} top {wl.pid} 2>{out}; "
                       f"echo AFTER status=$? >>{out}; sleep 120")
            t = Tmux(sub, 80, 24, command)
            try:
                wait_until(lambda: os.path.exists(out) and "AFTER" in open(out).read(), 20,
                           f"{binary} top to give up")
            finally:
                t.close()
            text = open(out).read()
            check("AFTER status=1" in text, f"{binary}: exit status 1: {text!r}")
            check("cannot drive the terminal (TERM=gpuleak-no-such-term): no terminfo entry" in text and
                  "set TERM" in text, f"{binary}: the message names TERM and the fix: {text!r}")
        check(wl.proc.poll() is None, "the target runs on")
    finally:
        wl.kill()
        wl.wait()


def plain_top_until(tmp, name, env, wl, pattern):
    """`top PID` on wl with stdout a file (plain blocks) under env; once it has attached, wl
    goes; stopped by SIGINT once a block matches pattern, which it returns."""
    out, err = os.path.join(tmp, f"{name}.out"), os.path.join(tmp, f"{name}.err")
    with open(out, "wb") as f, open(err, "wb") as e:
        top = subprocess.Popen([GPULEAK, "top", "-i", "300ms", str(wl.pid)], stdout=f,
                               stderr=e, stdin=subprocess.DEVNULL, env={**os.environ, **env})
        def block():
            return next((b for b in open(out).read().split("---\n") if re.search(pattern, b)),
                        None)
        try:
            wait_until(lambda: "attached to PID" in open(err).read() or top.poll() is not None,
                       60, f"top ({name}) to attach")
            wl.go()
            wait_until(lambda: top.poll() is None and block(), 30, f"top ({name}): {pattern}")
        finally:
            top.send_signal(signal.SIGINT)
            check_eq(top.wait(30), 0, f"top's exit status at SIGINT: {open(err).read()}")
    return block()


def test_top_says_what_device_leaves_out(tmp):
    """DEVICE is what gpuleak saw since it attached. With no NVML figure for a process, top
    says that memory from before the attach is not in it; where NVML counts more than
    gpuleak saw, top says how much. wl_preattach holds 4 MiB from before the attach, and
    1.5 MiB that gpuleak sees allocated."""
    wls = [Workload("wl_preattach", tmp=tmp, hold=True) for _ in range(2)]
    try:
        for wl in wls:
            wl.wait_ready()
        row = rf"\n\s*{wls[0].pid} wl_preattach +1\.50 MiB .*\n"
        block = plain_top_until(tmp, "none", {"GPULEAK_NVIDIA_SMI": os.path.join(tmp, "none")},
                                wls[0], row)
        check("no NVML figure: DEVICE is what gpuleak saw since attach, not memory from "
              "before\n" in block, f"no NVML: the note under the processes:\n{block}")
        nvml_file = os.path.join(tmp, "nvml.txt")
        with open(nvml_file, "w") as f:
            f.write(f"device {80 * GIB} {10 * GIB} GPU-fake-0\nproc 0 {wls[1].pid} {GIB // 2}\n")
        block = plain_top_until(tmp, "nvml", {"LD_LIBRARY_PATH": build_fake_nvml(tmp),
                                              "FAKE_NVML_FILE": nvml_file},
                                wls[1], r"NVML counts 510\.50 MiB")
        check("\nNVML counts 510.50 MiB more in 1 process: from before attach, CUDA "
              "contexts\n" in block, f"NVML's figure beyond what gpuleak saw:\n{block}")
        check("no NVML figure" not in block, f"no note of a missing figure:\n{block}")
        for wl in wls:
            check(wl.proc.poll() is None, "the target runs on")
    finally:
        for wl in wls:
            wl.release()
            wl.wait()
