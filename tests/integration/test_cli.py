# SPDX-License-Identifier: BSD-2-Clause
"""The command line as its users type it: options anywhere, durations as people write
them, run's exit status, help per subcommand, the man page and the shell completions
generated from the one table of subcommands, make install."""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import time

from harness import (GPULEAK, OUTPUT, ROOT, WORKLOADS, Tracer, Workload, check, check_eq,
                     process, run_gpuleak)

SUBCOMMANDS = ("attach", "run", "top", "record", "report", "serve", "help", "version",
               "completion")
MAN_PAGE = os.path.join(OUTPUT, "gpuleak.1")
BASH_COMPLETION = os.path.join(OUTPUT, "gpuleak.bash")
ZSH_COMPLETION = os.path.join(OUTPUT, "_gpuleak")


def test_run_exits_with_the_commands_status(tmp):
    """strace's and perf's habit: a wrapper fails when its job fails."""
    cases = [
        (["sh", "-c", "exit 7"], 7),
        (["/bin/false"], 1),
        (["/bin/true"], 0),
        (["sh", "-c", "kill -SEGV $$"], 128 + 11),
        (["sh", "-c", "kill -TERM $$"], 128 + 15),
    ]
    for cmd, want in cases:
        rc, out, err = run_gpuleak(["run", "-q", "--", *cmd])
        check_eq(rc, want, f"exit status of gpuleak run -- {' '.join(cmd)} ({err!r})")
    rc, out, err = run_gpuleak(["run", "-q", "--", "/nonexistent/cmd"])
    check_eq(rc, 127, "exit status of a command that cannot be run")
    check("/nonexistent/cmd" in err and "No such file" in err, f"says why: {err!r}")
    # gpuleak's own failure keeps its own status
    rc, out, err = run_gpuleak(["run", "--libcuda", "/bin/true", "--", "sh", "-c", "exit 7"])
    check_eq(rc, 1, f"gpuleak's failure is not the command's status ({err!r})")


def test_run_reports_only_processes_that_used_cuda(tmp):
    """A shell in front of the job (a pyenv shim, a launcher) is counted, not reported."""
    js = os.path.join(tmp, "r.json")
    truth = os.path.join(tmp, "truth.json")
    # the workload allocates a second after it starts, when gpuleak has found its libcuda
    script = (f"(sleep 1; echo go) | {os.path.join(WORKLOADS, 'wl_basic')} --truth {truth}; "
              "exit 0")
    rc, out, err = run_gpuleak(["run", "-i", "0", "--json", js, "--", "sh", "-c", script],
                               timeout=60)
    check_eq(rc, 0, f"exit status ({err[-500:]!r})")
    rep = json.load(open(js))
    pid = json.load(open(truth))["pid"]
    process(rep, pid)
    for p in rep["processes"]:
        check(p["alloc_calls"] > 0, f"a process without CUDA calls is reported: {p['comm']}")
    check(rep["processes_without_cuda"] >= 2, f"the two shells are counted: {rep}")
    check(re.search(r"\d+ other processes traced made no CUDA call: not shown", out),
          f"the text says so in one line: {out[-300:]!r}")
    check("(exited): device 0 B" not in out, f"no empty blocks: {out!r}")


def test_options_after_the_pid_and_durations(tmp):
    """gpuleak attach PID --duration 1.5s: bcc's and py-spy's order, people's durations."""
    wl = Workload("wl_basic", tmp=tmp, hold=True)
    wl.wait_ready()
    try:
        tr = Tracer(["attach", str(wl.pid), "--duration", "1.5s", "-i", "0"], tmp)
        tr.wait_attached()
        t0 = time.monotonic()
        wl.go()
        check_eq(tr.wait(timeout=60), 0, f"exit status ({tr.stderr()[-400:]!r})")
        took = time.monotonic() - t0
        check(took < 30, f"stopped after --duration 1.5s: {took:.1f} s")
        check(process(tr.report(), wl.pid)["alloc_calls"] > 0, "the PID was traced")
    finally:
        wl.release()
        wl.wait()
    rc, out, err = run_gpuleak(["attach", "1", "--duration", "1x"])
    check_eq(rc, 2, "a bad duration is a usage error")
    check("1m30s" in err and err.count("\n") == 1, f"one line with accepted forms: {err!r}")


def test_help_per_subcommand(tmp):
    texts = {}
    for sub in SUBCOMMANDS:
        rc, out, err = run_gpuleak([sub, "--help"])
        check_eq(rc, 0, f"gpuleak {sub} --help exit status ({err!r})")
        check(out.startswith(f"usage: gpuleak {sub}"), f"{sub} --help: {out[:80]!r}")
        check("examples:\n  " in out, f"{sub} --help has an example")
        check(err == "", f"help goes to stdout: {err!r}")
        rc2, out2, _ = run_gpuleak(["help", sub])
        check_eq(out2, out, f"gpuleak help {sub} = gpuleak {sub} --help")
        texts[sub] = out
    check(len(set(texts.values())) == len(SUBCOMMANDS), "each subcommand its own help")
    check("--listen" not in texts["attach"], "attach --help lists serve's options")
    check("--listen" in texts["serve"] and "--state-dir" in texts["serve"], "serve's own")
    check("--json" not in texts["serve"], "serve --help lists attach's options")
    rc, out, err = run_gpuleak(["help"])
    check_eq(rc, 0, "gpuleak help")
    for sub in SUBCOMMANDS:
        check(re.search(rf"^  {sub} +\S", out, re.M), f"gpuleak help lists {sub}")
    for flag in ("-V", "--version", "version"):
        rc, out, err = run_gpuleak([flag])
        check_eq(rc, 0, f"gpuleak {flag}")
        check(re.match(r"gpuleak \d+\.\d+\.\d+ ", out), f"gpuleak {flag}: {out!r}")


def _options_in_help(text):
    """The long options a help text lists, with the value each takes (None: a flag)."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^  (?:-\w, |    )--([\w-]+)(?: ([A-Z]+))?", text, re.M)}


def test_help_holds_to_the_options_taken(tmp):
    """Each subcommand's help lists exactly the options its parser takes, says nothing of
    other subcommands' defaults, and explains durations and sizes only where it takes
    them (before: explain gave two defaults for --duration, top's -i described summaries,
    -p named only attach and record, report ended on durations and sizes it takes no
    option of, and explain listed --libcuda, which it ignored)."""
    rc, man, _ = run_gpuleak(["man"])
    every = {}
    for m in re.finditer(r"^\*(?:-\w\*, \*)?--([\w-]+)\*(?: _([A-Z]+)_)?", man, re.M):
        every[m.group(1)] = m.group(2)
    check(len(every) > 40, f"the man page lists the options: {len(every)}")
    subs = ("attach", "run", "top", "record", "report", "explain", "serve", "census")
    value = {"T": "1s", "SIZE": "64k", "N": "8"}
    probes = [(sub, opt, [sub, f"--{opt}"] + ([value.get(arg, "x")] if arg else []) + ["--help"])
              for sub in subs for opt, arg in every.items() if opt != "help"]
    # some 500 short runs, a few at a time (each is a process start, slow under ASan)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        errs = list(pool.map(lambda p: run_gpuleak(p[2])[2], probes))
    taken = {(sub, opt): "is not an option of" not in err
             for (sub, opt, _), err in zip(probes, errs)}
    said = {(sub, opt): err for (sub, opt, _), err in zip(probes, errs)}
    for sub in subs:
        rc, text, _ = run_gpuleak([sub, "--help"])
        listed = _options_in_help(text)
        for opt in every:
            if opt != "help":
                check_eq(opt in listed, taken[sub, opt],
                         f"{sub} --help lists --{opt} ({said[sub, opt].strip()!r})")
        check(not re.search(r"^ +(?:top|attach|record|run|explain|serve):", text, re.M),
              f"{sub} --help words an option for another subcommand:\n{text}")
        takes_t = any(a == "T" for a in listed.values())
        takes_size = any(a == "SIZE" for a in listed.values())
        check_eq("A duration T is" in text, takes_t, f"{sub} --help explains durations")
        check_eq("A SIZE takes" in text, takes_size, f"{sub} --help explains sizes")
    _, top, _ = run_gpuleak(["top", "--help"])
    check("redraw every T (2s)" in top and "print a summary" not in top, top)
    _, explain, _ = run_gpuleak(["explain", "--help"])
    check(explain.count("(1s)") >= 1 and "when the targets exit" not in explain, explain)
    check("attach and record" not in man, "-p is not said to be attach's and record's")


def test_readme_usage_is_gpuleak_help(tmp):
    """The README's usage block is `gpuleak help`, word for word."""
    rc, out, _ = run_gpuleak(["help"])
    readme = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"<!-- gpuleak help -->\n```\n(.*?)```\n", readme, re.S)
    check(m, "README.md has the block after '<!-- gpuleak help -->'")
    check_eq(m.group(1), out, "README usage against gpuleak help")


def test_man_page(tmp):
    env = dict(os.environ, MANWIDTH="80")
    env.pop("MAN_KEEP_FORMATTING", None)
    p = subprocess.run(["man", "--warnings", "-l", MAN_PAGE], capture_output=True,
                       timeout=30, env=env)
    text = p.stdout.decode()
    check_eq(p.returncode, 0, f"man -l {MAN_PAGE}")
    check(p.stderr.decode() == "", f"no groff warnings: {p.stderr.decode()!r}")
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SUBCOMMANDS", "OPTIONS", "OVERHEAD",
                    "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        check(re.search(rf"^{section}$", text, re.M), f"the man page has {section}")
    for sub in SUBCOMMANDS:
        check(f"gpuleak {sub}" in text, f"the man page shows gpuleak {sub}")
    # each option is listed once (census's --json is everyone's --json FILE)
    options = text.split("\nOPTIONS\n", 1)[1].split("\nOVERHEAD\n", 1)[0]
    entries = re.findall(r"^       (?:-\w, )?(--[\w-]+)", options, re.M)
    check_eq(sorted(e for e in set(entries) if entries.count(e) > 1), [],
             "options listed twice in OPTIONS")
    check("--json FILE" in options, "--json takes a FILE")
    # every option of every subcommand's help is in the man page
    for sub in SUBCOMMANDS:
        _, out, _ = run_gpuleak([sub, "--help"])
        for opt in re.findall(r"^  (?:-\w, )?    ?(--[\w-]+)", out, re.M):
            check(opt in text.replace("\u2010\n", "").replace("-\n", ""),
                  f"man page lacks {opt}")


def test_completions_load(tmp):
    script = f"""
set -e
source {BASH_COMPLETION}
c() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _gpuleak; echo "${{COMPREPLY[*]}}"; }}
c gpuleak at
c gpuleak attach --dur
c gpuleak attach --stacks ''
c gpuleak top --sort ''
c gpuleak serve --lis
c gpuleak completion ''
complete -p gpuleak
"""
    p = subprocess.run(["bash", "-c", script], capture_output=True, timeout=30)
    lines = p.stdout.decode().splitlines()
    check_eq(p.returncode, 0, f"bash loads the completion ({p.stderr.decode()!r})")
    check_eq(lines[:6], ["attach", "--duration", "dwarf fp none", "growth bytes name",
                         "--listen", "bash zsh"], "bash completions")
    check("_gpuleak" in lines[6], "complete -F _gpuleak gpuleak")
    p = subprocess.run(["zsh", "-n", ZSH_COMPLETION], capture_output=True, timeout=30)
    check_eq(p.returncode, 0, f"zsh parses the completion ({p.stderr.decode()!r})")
    p = subprocess.run(["zsh", "-fc", f"autoload -U compinit; compinit -u -d {tmp}/zcd; "
                        f"source {ZSH_COMPLETION}; whence -w _gpuleak"],
                       capture_output=True, timeout=30)
    check("_gpuleak: function" in p.stdout.decode(), f"zsh defines _gpuleak: {p.stdout!r} "
          f"{p.stderr.decode()!r}")
    # zsh completes in a real interactive shell (zpty): a subcommand, then an option
    check_eq(zsh_complete(tmp, "gpuleak serve --lis"), "gpuleak serve --listen=",
             "zsh completes serve's option")
    check_eq(zsh_complete(tmp, "gpuleak atta"), "gpuleak attach ", "zsh completes attach")
    check_eq(zsh_complete(tmp, "gpuleak top --sort by"), "gpuleak top --sort bytes ",
             "zsh completes a value")
    check_eq(zsh_complete(tmp, "gpuleak attach --lis"), "gpuleak attach --lis",
             "zsh offers attach no option of serve")
    # the same text as gpuleak prints
    rc, out, _ = run_gpuleak(["completion", "bash"])
    check_eq(out, open(BASH_COMPLETION).read(), "the installed completion is gpuleak's")


def zsh_complete(tmp, line):
    """The line an interactive zsh (in a pty), with the completion in its fpath, makes of
    line + Tab: a key bound to a widget writes zle's buffer to a file."""
    out = os.path.join(tmp, f"zsh.{time.monotonic_ns()}")
    setup = (f"fpath=({os.path.dirname(ZSH_COMPLETION)} $fpath); autoload -U compinit; "
             f"compinit -u -d {tmp}/zcd; dump() {{ print -r -- $BUFFER > {out} }}; "
             "zle -N dump; bindkey '^X' dump")
    script = f"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z {shlex.quote(setup)}
sleep 0.5
zpty -w -n z {shlex.quote(line)}$'\\t'
sleep 1
zpty -w -n z $'\\x18'
for i in {{1..50}}; do [[ -s {out} ]] && break; sleep 0.1; done
zpty -d z
"""
    subprocess.run(["zsh", "-f", "-c", script], capture_output=True, timeout=60)
    check(os.path.exists(out), f"zsh wrote no line for {line!r}")
    return open(out).read().rstrip("\n")


def test_make_install(tmp):
    dest = os.path.join(tmp, "root")
    # as a user runs it: not as a job of the make that runs these tests (its jobserver
    # is not open to this process)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    p = subprocess.run(["make", "-s", "install", f"DESTDIR={dest}", "PREFIX=/usr",
                        f"OUTPUT={OUTPUT}"], cwd=ROOT, env=env, capture_output=True,
                       timeout=300)
    check_eq(p.returncode, 0, f"make install: {p.stderr.decode()[-500:]!r}")
    check_eq(p.stderr.decode(), "", "make -s install says nothing on stderr")
    for path, mode in (("usr/bin/gpuleak", 0o755), ("usr/share/man/man1/gpuleak.1", 0o644),
                       ("usr/share/bash-completion/completions/gpuleak", 0o644),
                       ("usr/share/zsh/site-functions/_gpuleak", 0o644)):
        full = os.path.join(dest, path)
        check(os.path.isfile(full), f"make install puts {path}")
        check_eq(os.stat(full).st_mode & 0o777, mode, f"mode of {path}")
    # man finds the installed page
    p = subprocess.run(["man", "-M", os.path.join(dest, "usr/share/man"), "gpuleak"],
                       capture_output=True, timeout=30, env=dict(os.environ, MANWIDTH="80"))
    check(p.returncode == 0 and "EXIT STATUS" in p.stdout.decode(),
          f"man gpuleak from the installed tree: {p.stderr.decode()!r}")


def test_record_progress_and_no_overwrite(tmp):
    """On a terminal, record shows elapsed time, events, size and lost events as it goes;
    a second record to the same file refuses to replace it without --force."""
    import pty
    path = os.path.join(tmp, "job.glr")
    wl = os.path.join(WORKLOADS, "wl_leak")
    master, slave = pty.openpty()
    p = subprocess.Popen([GPULEAK, "record", "-o", path, "--", wl, "--no-wait", "--iters", "30",
                          "--interval-ms", "50"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    rc = p.wait(timeout=60)
    os.close(master)
    text = seen.decode(errors="replace")
    check_eq(rc, 0, f"record exit status ({text[-400:]!r})")
    lines = re.findall(r"\rrecording \S+job\.glr: ([\d.]+) s, (\d+) events, ([\d.]+ \S+), "
                       r"(\d+) lost", text)
    check(len(lines) >= 2, f"a progress line redrawn in place: {text[-600:]!r}")
    check(int(lines[-1][1]) > 0 and int(lines[-1][1]) >= int(lines[0][1]),
          f"events counted: {lines}")
    check(float(lines[-1][0]) > float(lines[0][0]), f"time goes on: {lines}")
    size = os.path.getsize(path)
    rc, out, err = run_gpuleak(["record", "-o", path, "--", "/bin/true"])
    check_eq(rc, 1, "record refuses to replace a recording")
    check("--force" in err and err.count("\n") == 1, f"one line that names --force: {err!r}")
    check_eq(os.path.getsize(path), size, "the first recording is intact")
    rc, out, err = run_gpuleak(["record", "-q", "-o", path, "--force", "--", "sh", "-c", "exit 5"])
    check_eq(rc, 5, f"record -- CMD exits with CMD's status ({err!r})")
    check(os.path.getsize(path) != size, "--force replaced it")
    # not a terminal: no progress line
    rc, out, err = run_gpuleak(["record", "-o", path, "--force", "--", "/bin/true"])
    check("\rrecording" not in err, f"no progress line off a terminal: {err!r}")


def test_docs_name_every_json_field_and_links_resolve(tmp):
    """docs/json.md names every field the JSON reporter writes (the reporters' expected
    outputs hold them all), and every link of the README and docs/ to a file of the
    repository reaches it."""
    doc = open(os.path.join(ROOT, "docs", "json.md")).read()

    def keys(o, out):
        if isinstance(o, dict):
            for k, v in o.items():
                out.add(k)
                keys(v, out)
        elif isinstance(o, list):
            for v in o:
                keys(v, out)
        return out
    fields = set()
    for name in ("report_full.json", "report_empty.json"):
        with open(os.path.join(ROOT, "tests", "unit", "expected", name)) as f:
            keys(json.load(f), fields)
    # "calls" holds one field per traced function: named by the functions' own names
    fields -= {k for k in fields if k.startswith("cu")}
    missing = sorted(k for k in fields if not re.search(rf"(?<!\w){re.escape(k)}(?!\w)", doc))
    check_eq(missing, [], "JSON fields docs/json.md does not name")
    pages = [os.path.join(ROOT, "README.md")] + [
        os.path.join(ROOT, "docs", n) for n in os.listdir(os.path.join(ROOT, "docs"))]
    for page in pages:
        text = open(page).read()
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            path = os.path.normpath(os.path.join(os.path.dirname(page), target))
            check(os.path.exists(path), f"{os.path.relpath(page, ROOT)} links to {target}")
