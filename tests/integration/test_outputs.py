# SPDX-License-Identifier: BSD-2-Clause
"""The offline outputs of a real run: folded stacks, the SVG flame graph and the pprof
profile agree with the JSON report to the byte; go tool pprof reads the profile; headless
Chromium renders the flame graph and its script answers hover, click, reset and search;
report files are 0600 and a symlink planted at their path is not followed."""
import os
import re
import stat
import subprocess
import xml.etree.ElementTree as ET

from browser import Browser
from harness import WORKLOADS, Tracer, Workload, check, check_eq, run_gpuleak

GO = os.environ.get("GO", "go")
SVG_NS = "{http://www.w3.org/2000/svg}"
HIT = (230, 0, 230)


def run_with_outputs(tmp, workload="wl_basic", *args):
    """Attach to a held workload (its libraries stay readable until the report), write
    every output."""
    paths = {k: os.path.join(tmp, f"out.{k}") for k in ("folded", "svg", "pprof")}
    wl = Workload(workload, *args, tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--folded", paths["folded"], "--svg", paths["svg"],
                 "--pprof", paths["pprof"], str(wl.pid)], tmp)
    tr.wait_attached()
    wl.go()
    wl.truth()
    tr.stop()
    wl.release()
    wl.wait()
    check_eq(tr.returncode, 0, f"gpuleak exit status ({tr.stderr()})")
    paths["json"] = tr.json_path
    return tr.report(), paths


def frame_name(f):
    """A frame's name in folded stacks (report__frame_name in src/report/folded.c)."""
    if f["kind"] == "python":
        return f"{f.get('function') or '?'} ({f.get('file') or '?'}:{f.get('line', 0)})"
    if f.get("function"):
        return f["function"]
    if f.get("module"):
        return f"{os.path.basename(f['module'])}+0x{f['offset']:x}"
    return f"0x{f['address']:x}"


def svg_name(f):
    """A frame's label in the flame graph: Python files by their base name."""
    if f["kind"] == "python":
        return f"{f.get('function') or '?'} ({os.path.basename(f.get('file') or '?')}:" \
               f"{f.get('line', 0)})"
    return frame_name(f)


def folded_clean(name):
    return "".join(":" if c == ";" else "?" if ord(c) < 0x20 or c == "\x7f" else c
                   for c in name)


def expected_folded(report):
    lines = {}
    for p in report["processes"]:
        for st in p["stacks"]:
            if not st["outstanding_bytes"]:
                continue
            names = [f"{p['comm']} ({p['pid']})"] + [frame_name(f) for f in reversed(st["frames"])]
            key = ";".join(folded_clean(n) for n in names)
            lines[key] = lines.get(key, 0) + st["outstanding_bytes"]
    return lines


def read_folded(path):
    lines = {}
    with open(path) as f:
        for line in f:
            stack, _, value = line.rstrip("\n").rpartition(" ")
            check(stack not in lines, f"folded line {stack!r} appears twice (not merged)")
            lines[stack] = int(value)
    return lines


def totals(report, key):
    return sum(st[key] for p in report["processes"] for st in p["stacks"])


def pprof(args, path):
    p = subprocess.run([GO, "tool", "pprof", "-symbolize=none", *args, path],
                       capture_output=True, text=True, timeout=60)
    check_eq(p.returncode, 0, f"go tool pprof {' '.join(args)} status ({p.stderr})")
    return p.stdout


def pprof_top(path, sample_index):
    """(total, {function: flat}) from go tool pprof -top, in bytes or counts."""
    out = pprof(["-top", "-unit=B", "-nodefraction=0", "-nodecount=100000",
                 f"-sample_index={sample_index}"], path)
    m = re.search(r"of (\d+)B? total", out)
    check(m, f"no total in pprof -top output:\n{out}")
    flat = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and re.fullmatch(r"\d+B?", cols[0]) and cols[1].endswith("%"):
            flat[" ".join(cols[5:])] = int(cols[0].rstrip("B"))
    return int(m.group(1)), flat


def svg_frames(path):
    root = ET.parse(path).getroot()
    check_eq(root.tag, SVG_NS + "svg", "root element of the SVG")
    group = [g for g in root.iter(SVG_NS + "g") if g.get("id") == "gl-frames"]
    check_eq(len(group), 1, "frame groups in the SVG")
    return [g for g in group[0] if g.tag == SVG_NS + "g"]


def test_outputs_agree_with_json(tmp):
    rep, paths = run_with_outputs(tmp)
    total = totals(rep, "outstanding_bytes")
    check(total > 0, "the workload holds memory at exit")
    for name, path in paths.items():
        check_eq(stat.S_IMODE(os.stat(path).st_mode), 0o600, f"mode of the {name} file")

    folded = read_folded(paths["folded"])
    check_eq(sum(folded.values()), total, "folded total vs JSON outstanding bytes")
    check_eq(folded, expected_folded(rep), "folded stacks vs JSON stacks")

    for index, key in (("inuse_space", "outstanding_bytes"), ("inuse_objects",
                       "outstanding_allocs"), ("alloc_space", "alloc_bytes"),
                       ("alloc_objects", "allocs")):
        got, flat = pprof_top(paths["pprof"], index)
        check_eq(got, totals(rep, key), f"pprof {index} total vs JSON {key}")
    leaf = {}
    for p in rep["processes"]:
        for st in p["stacks"]:
            name = frame_name(st["frames"][0])
            leaf[name] = leaf.get(name, 0) + st["outstanding_bytes"]
    _, flat = pprof_top(paths["pprof"], "inuse_space")
    check_eq({k: v for k, v in flat.items() if v}, {k: v for k, v in leaf.items() if v},
             "pprof flat bytes per driver function vs JSON")
    raw = pprof(["-raw"], paths["pprof"])
    for f in rep["processes"][0]["stacks"][0]["frames"]:
        if f.get("build_id"):
            check(f["build_id"] in raw and f["module"] in raw,
                  f"mapping of {f['module']} with build id {f['build_id']} in pprof -raw")
    # pprof's main binary ("File:") is the traced program, not the driver every stack
    # starts in
    m = re.search(r"^File: (\S+)", pprof(["-top"], paths["pprof"]), re.M)
    check(m and "libcuda" not in m.group(1), f"pprof's main binary: {m and m.group(1)}")
    tags = pprof(["-tags"], paths["pprof"])
    pid = rep["processes"][0]["pid"]
    check(re.search(rf"\b{pid}\b", tags) and rep["processes"][0]["comm"] in tags,
          f"pid and comm labels in pprof -tags:\n{tags}")

    frames = svg_frames(paths["svg"])
    check_eq(frames[0].get("data-n"), "all", "first SVG frame")
    check_eq(int(frames[0].get("data-v")), total, "SVG total vs JSON outstanding bytes")
    names = {g.get("data-n") for g in frames}
    for p in rep["processes"]:
        for st in p["stacks"]:
            for name in [f"{p['comm']} ({p['pid']})"] + [svg_name(f) for f in st["frames"]]:
                check(name in names, f"frame {name!r} in the SVG")


def frame_box(b, name):
    box = b.eval(f"""(function () {{
        var g = window.gpuleak.nodes.filter(function (n) {{ return n.name === {name!r}; }})[0];
        if (!g || g.g.style.display === 'none') return null;
        var r = g.rect.getBoundingClientRect();
        return [r.x, r.y, r.width, r.height, g.g.getAttribute('class')];
    }})()""")
    return box


def center(box):
    return box[0] + box[2] / 2, box[1] + box[3] / 2


def test_svg_renders_and_responds(tmp):
    rep, paths = run_with_outputs(tmp)
    total = totals(rep, "outstanding_bytes")
    nframes = len(svg_frames(paths["svg"]))
    with Browser(height=400) as b:
        b.open(paths["svg"])
        check_eq(b.eval("window.gpuleak ? window.gpuleak.nodes.length : -1"), nframes,
                 "frames the script found")
        check_eq(b.eval("document.querySelectorAll('#gl-frames rect').length"), nframes,
                 "rectangles in the DOM")
        check(b.eval("document.querySelector('#gl-frames text').textContent") == "all",
              "the root's label is drawn")
        full = 1200 - 2 * 10

        host = frame_box(b, "exercise_host")
        linear = frame_box(b, "exercise_linear")
        check(host and linear, "exercise_host and exercise_linear are drawn")
        host_bytes = sum(st["outstanding_bytes"] for p in rep["processes"]
                         for st in p["stacks"]
                         if any(f.get("function") == "exercise_host" for f in st["frames"]))
        check(abs(host[2] - full * host_bytes / total) < 1, f"exercise_host width {host[2]}")

        b.hover(*center(host))
        details = b.eval("document.getElementById('gl-details').textContent + ' / ' + "
                         "document.getElementById('gl-details2').textContent")
        share = f"{100 * host_bytes / total:.2f}% of total"
        check(details.startswith("exercise_host") and share in details and
              "allocations" in details and "host_pinned" in details and "verdict" in details,
              f"hover details: {details!r} (want {share})")

        b.click(*center(host))
        zoomed = frame_box(b, "exercise_host")
        check(abs(zoomed[2] - full) < 0.5, f"zoomed frame spans the graph: {zoomed[2]}")
        check(frame_box(b, "exercise_linear") is None, "a frame outside the zoom is hidden")
        check("anc" in frame_box(b, "all")[4], "the root is drawn as an ancestor")
        reset = b.eval("(function(){var r=document.getElementById('gl-reset')"
                       ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height];})()")
        check(reset[2] > 0, "the reset button is shown while zoomed")
        b.click(*center(reset))
        check(abs(frame_box(b, "exercise_host")[2] - host[2]) < 0.5, "reset restores widths")
        check(frame_box(b, "exercise_linear") is not None, "reset shows every frame again")

        box = b.eval("(function(){var r=document.getElementById('gl-search')"
                     ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height];})()")
        b.click(*center(box))
        b.type("basic_site_pool")
        pool = sum(st["outstanding_bytes"] for p in rep["processes"] for st in p["stacks"]
                   if any("basic_site_pool" in (f.get("function") or "") for f in st["frames"]))
        matched = b.eval("document.getElementById('gl-matched').textContent")
        check(f"{100 * pool / total:.2f}%" in matched, f"matched share: {matched!r}")
        hit = frame_box(b, "basic_site_pool")
        x, y = center(hit)
        check_eq(b.pixels(int(x), int(y), 1, 1)[0][0], HIT, "pixel of a matched frame")
        x, y = center(frame_box(b, "exercise_linear"))
        check(b.pixels(int(x), int(y), 1, 1)[0][0] != HIT, "an unmatched frame keeps its colour")
        b.screenshot(os.path.join(tmp, "flamegraph.png"))


def test_outputs_do_not_follow_symlinks(tmp):
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    link = os.path.join(tmp, "graph.svg")
    os.symlink(victim, link)
    folded = os.path.join(tmp, "out.folded")
    status, _, err = run_gpuleak(["run", "-i", "0", "--svg", link, "--folded", folded, "--",
                                  os.path.join(WORKLOADS, "wl_basic"), "--no-wait"])
    check_eq(status, 1, f"exit status when an output is a symlink ({err})")
    check("symbolic link" in err and link in err, f"the error names the link: {err!r}")
    with open(victim) as f:
        check_eq(f.read(), "precious", "the symlink's target")
    # refused before anything is traced: the workload never ran, no other output is left
    check("ready" not in err and "attached" not in err, f"nothing was traced: {err!r}")
    check(not os.path.exists(folded), "no empty file is left for the other output")


def test_folded_on_stdout(tmp):
    """With --folded -, stdout carries the folded stacks only: no text report and no
    interim summaries (here every 100 ms of a 0.5 s run)."""
    status, out, err = run_gpuleak(["run", "-i", "100ms", "--folded", "-", "--",
                                    os.path.join(WORKLOADS, "wl_leak"), "--no-wait",
                                    "--iters", "10", "--interval-ms", "50"])
    check_eq(status, 0, f"exit status ({err})")
    lines = [line for line in out.splitlines() if not line.startswith("ready ")]  # workload's
    check(lines and all(re.fullmatch(r"wl_leak \(\d+\);\S.* \d+", line) for line in lines),
          f"stdout is folded stacks only:\n{out}")
    check_eq(sum(int(line.rsplit(" ", 1)[1]) for line in lines), 10 << 20,
             "bytes kept by the 10 steps")
    status, _, err = run_gpuleak(["run", "--svg", "-", "--pprof", "-", "--", "true"])
    check_eq(status, 2, "two outputs on stdout is a usage error")
    check("only one of" in err, f"the error says why: {err!r}")


def test_svg_tells_the_leak_in_words_under_the_graph(tmp):
    """The flame graph of a leaking loop says the answer in words, under the graph and
    inside the page: the leak's rate, its line (file:line), its process, then the
    pattern with its evidence and the usual fix, in the loop's language (C: the driver's
    API); a steady stack is not told there."""
    svg = os.path.join(tmp, "leak.svg")
    wl = Workload("wl_leak", "--iters", "20", "--interval-ms", "50", tmp=tmp, hold=True)
    wl.wait_ready()
    tr = Tracer(["attach", "-i", "0", "--resolution", "50ms", "--svg", svg, str(wl.pid)],
                tmp)
    tr.wait_attached()
    wl.go()
    wl.truth()
    tr.stop()
    wl.release()
    wl.wait()
    with open(svg, encoding="utf-8") as f:
        text = f.read()
    heads = re.findall(r'<text class="leaks head"[^>]*>(?:<title>[^<]*</title>)?([^<]*)</text>',
                       text)
    check_eq(len(heads), 1, f"one leak told: {heads}")
    check(re.match(r"\+[\d.]+ [KMG]iB/s at leak_site_staircase \(wl_leak\.c:\d+, wl_leak\), "
                   rf"PID {wl.pid} wl_leak: ", heads[0]), f"its headline: {heads[0]}")
    lines = re.findall(r'<text class="leaks"[^>]*>(?:<title>([^<]*)</title>)?([^<]*)</text>',
                       text)
    check(len(lines) == 2 and "outputs kept across steps?" in (lines[0][0] or lines[0][1]) and
          "never freed" in (lines[0][0] or lines[0][1]) and
          "cuMemFree" in (lines[1][0] or lines[1][1]), f"its pattern and fix, in C's words: "
          f"{lines}")
    with Browser(height=600) as b:
        b.open(svg)
        right = b.eval("Math.max.apply(null, Array.prototype.map.call("
                       "document.querySelectorAll('text.leaks'), function (t) {"
                       " return t.getBoundingClientRect().right; }))")
        check(0 < right <= 1200, f"every line of the panel inside the page: {right}")
