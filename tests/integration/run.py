#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Runs gpuleak's integration tests: every test_* function of every test_*.py here.

Usage: run.py [-k SUBSTRING] [-x SUBSTRING] [-v] [--counts FILE LABEL]
-k runs only the tests whose name (module.function) contains SUBSTRING; -x leaves out
those that contain any of its comma-separated SUBSTRINGs.
The tests load BPF programs and attach uprobes, so they need root. Nothing is
skipped: without the privileges, the tests fail. The last line is
'N passed, N failed'.
"""
import argparse
import importlib.util
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


def load_tests(pattern, exclude):
    tests = []
    for name in sorted(os.listdir(HERE)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(HERE, name))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for attr in sorted(vars(mod)):
            fn = getattr(mod, attr)
            if attr.startswith("test_") and callable(fn):
                full = f"{name[:-3]}.{attr}"
                if (not pattern or pattern in full) and not any(
                        x and x in full for x in exclude.split(",")):
                    tests.append((full, fn))
    return tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="pattern", default="")
    ap.add_argument("-x", dest="exclude", default="")
    ap.add_argument("-v", dest="verbose", action="store_true")
    ap.add_argument("--counts", nargs=2, metavar=("FILE", "LABEL"),
                    help='add a line "LABEL PASSED FAILED" to FILE')
    args = ap.parse_args()

    if os.geteuid() != 0:
        print("integration tests need root (they load BPF programs)", file=sys.stderr)
    for path in (harness.GPULEAK, harness.FAKECUDA):
        if not os.path.exists(path):
            print(f"missing {path}: run 'make gpuleak fakecuda' first", file=sys.stderr)
            print("0 passed, 1 failed")
            return 1

    san_dir = None
    if harness.SAN:
        # Every sanitizer report of every gpuleak run lands here, also from runs whose
        # exit status a test does not look at (killed tracers); any report fails the suite.
        san_dir = harness.tmpdir()
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            os.environ[var] = f"log_path={san_dir}/report:print_stacktrace=1"

    passed = failed = 0
    t_all = time.monotonic()
    tests = load_tests(args.pattern, args.exclude)
    harness.SELECTED = [name for name, _ in tests]
    for name, fn in tests:
        t0 = time.monotonic()
        tmp = harness.tmpdir()
        try:
            fn(tmp)
        except Exception as e:  # noqa: BLE001 - every failure is reported the same way
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f} s): {e}", flush=True)
            if args.verbose or not isinstance(e, AssertionError):
                traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
            shutil.rmtree(tmp, ignore_errors=True)  # a failed test's files stay for a look
        finally:
            harness.cleanup()
    if san_dir:
        for name in sorted(os.listdir(san_dir)):
            failed += 1
            with open(os.path.join(san_dir, name), errors="replace") as f:
                print(f"FAIL sanitizer report {name}:\n{f.read()[:4000]}", flush=True)
    print(f"integration tests took {time.monotonic() - t_all:.0f} s")
    print(f"{passed} passed, {failed} failed")
    if args.counts:
        with open(args.counts[0], "a") as f:
            f.write(f"{args.counts[1]} {passed} {failed}\n")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
