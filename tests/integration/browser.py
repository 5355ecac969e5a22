# SPDX-License-Identifier: BSD-2-Clause
"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
commands on fd 3, replies on fd 4, each a JSON text ending in NUL), for tests that open
gpuleak's SVG flame graph, move the mouse, click, type, and look at the DOM and the pixels.
No network, no extra packages: Debian's chromium and the standard library."""
import base64
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

from harness import TestFailure

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


class Browser:
    def __init__(self, width=1200, height=800, timeout=20):
        self.timeout = timeout
        self.events = []
        self.profile = tempfile.mkdtemp(prefix="gpuleak-chromium-")
        cmd_r, cmd_w = os.pipe()  # our commands: the browser reads fd 3
        ans_r, ans_w = os.pipe()  # its answers: the browser writes fd 4

        def child_fds():  # our own descriptors are close-on-exec; 3 and 4 are not
            r, w = os.dup(cmd_r), os.dup(ans_w)  # neither is 3 or 4 any more
            os.dup2(r, 3)
            os.dup2(w, 4)

        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", "about:blank"]
        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, preexec_fn=child_fds, close_fds=False)
        os.close(cmd_r)
        os.close(ans_w)
        self.wfd, self.rfd = cmd_w, ans_r
        self.buf = b""
        self.next_id = 0
        self.session = None
        try:
            self._attach(width, height)
        except BaseException:
            self.close()
            raise

    def _attach(self, width, height):
        targets = self.call("Target.getTargets")["targetInfos"]
        pages = [t for t in targets if t["type"] == "page"]
        if not pages:
            pages = [{"targetId": self.call("Target.createTarget", url="about:blank")["targetId"]}]
        self.session = self.call("Target.attachToTarget", targetId=pages[0]["targetId"],
                                 flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TestFailure(f"chromium did not answer within {self.timeout} s")
            r, _, _ = select.select([self.rfd], [], [], left)
            if r:
                chunk = os.read(self.rfd, 65536)
                if not chunk:
                    raise TestFailure(f"chromium closed its pipe: {self.stderr()}")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") != self.next_id:
                if reply.get("method"):
                    self.events.append(reply)
                continue  # an event
            if "error" in reply:
                raise TestFailure(f"chromium: {method} failed: {reply['error']}")
            return reply.get("result", {})

    def open(self, path):
        self.call("Page.navigate", url="file://" + os.path.abspath(path))
        deadline = time.monotonic() + self.timeout
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TestFailure(f"{path} did not load within {self.timeout} s")
            time.sleep(0.05)

    def errors(self):
        """What the page said was wrong so far: uncaught exceptions, console.error, and the
        browser's own errors (a resource that did not load, a blocked request)."""
        self.eval("0")  # reads the events that came meanwhile
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text", "") + " " +
                           str(p["exceptionDetails"].get("exception", {}).get("description")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def eval(self, expr):
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in res:
            raise TestFailure(f"script {expr!r} threw: {res['exceptionDetails']}")
        return res["result"].get("value")

    def mouse(self, kind, x, y, clicks=0):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left" if clicks
                  else "none", clickCount=clicks)

    def hover(self, x, y):
        self.mouse("mouseMoved", x, y)

    def click(self, x, y):
        self.hover(x, y)
        self.mouse("mousePressed", x, y, 1)
        self.mouse("mouseReleased", x, y, 1)

    def type(self, text):
        self.call("Input.insertText", text=text)

    def screenshot(self, path):
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        with open(path, "wb") as f:
            f.write(png)
        return png

    def pixels(self, x, y, width, height):
        """The rendered RGB pixels of a region of the page, as rows of (r, g, b)."""
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png", clip={
            "x": x, "y": y, "width": width, "height": height, "scale": 1})["data"])
        return decode_png(png)

    def stderr(self):
        with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    def close(self):
        try:
            os.close(self.wfd)  # the browser exits when its command pipe closes
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self.rfd)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def decode_png(png):
    """Rows of (r, g, b) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise TestFailure("the screenshot is not a PNG")
    pos, idat = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise TestFailure(f"unexpected PNG layout: depth {depth}, colour type {ctype}")
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return rows
