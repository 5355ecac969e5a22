# SPDX-License-Identifier: BSD-2-Clause
"""The protocol of the framework cases (tests/gpu/frameworks.sh): a workload says
"ready <pid>" before it makes its first CUDA call, waits for the file $FW_GO, runs a few
seconds, writes its own figures as JSON to $FW_DONE (through a rename) and waits for the
file $FW_EXIT, so that gpuleak reports on a live process."""
import json
import os
import sys
import time


def wait_for(path, timeout=60):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"{sys.argv[0]}: timed out waiting for {path}")
        time.sleep(0.01)


def ready():
    """Says ready and waits until gpuleak is attached (FW_GO)."""
    print(f"ready {os.getpid()}", flush=True)
    wait_for(os.environ["FW_GO"])


def done(figures):
    """Writes the workload's own figures, then waits for FW_EXIT."""
    figures = dict(figures, pid=os.getpid())
    tmp = os.environ["FW_DONE"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(figures, f)
    os.rename(tmp, os.environ["FW_DONE"])
    wait_for(os.environ["FW_EXIT"], timeout=120)


def steps(n, interval):
    """n steps interval seconds apart: verdicts need a few resolutions of history."""
    for i in range(n):
        yield i
        time.sleep(interval)
