#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A process's resident memory by mapping, largest first, from a copy of /proc/PID/smaps.

    smaps_sum.py SMAPS [N]   (N lines, 15)

Anonymous mappings are summed as [anon], the heap as [heap]; a file's mappings as its path.
"""
import collections
import sys


def main():
    rss = collections.Counter()
    name = None
    for line in open(sys.argv[1]):
        f = line.split()
        if not f:
            continue
        if not f[0].endswith(":") and "-" in f[0]:
            name = f[5] if len(f) > 5 else "[anon]"
        elif f[0] == "Rss:" and name:
            rss[name] += int(f[1])
    for n, kib in rss.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 15):
        print(f"{kib:>9} KiB  {n}")
    print(f"{sum(rss.values()):>9} KiB  in all")


if __name__ == "__main__":
    main()
