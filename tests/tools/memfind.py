#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""memfind - where a secret lies in a running process's memory, and
whether a core dump would hold it there.

  memfind.py PID NEEDLE...

Reads every readable mapping of PID through /proc/PID/mem (root, or the
same user while PID is dumpable), but those over 4 GiB (a sanitizer's
shadow memory), and prints, for each NEEDLE, one line:
"NEEDLE_INDEX dd=N other=M": in how many mappings with the VmFlag `dd`
(MADV_DONTDUMP: left out of core dumps, /proc/PID/smaps) it was found,
and in how many others.  A needle split across two chunks of a read is
found (the chunks overlap).
"""
import re
import sys

CHUNK = 16 << 20
BIG = 4 << 30


def mappings(pid):
    """(start, end, dd) of every mapping, from smaps."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ", line)
            if m:
                cur = [int(m.group(1), 16), int(m.group(2), 16),
                       m.group(3).startswith("r"), False]
                out.append(cur)
            elif line.startswith("VmFlags:") and cur is not None:
                cur[3] = " dd" in " " + line.split(":", 1)[1].strip()
    # Mappings over BIG are passed over: a sanitizer's shadow memory
    # (terabytes reserved) would take hours to read, and holds no secret.
    return [(a, b, dd) for a, b, r, dd in out if r and b - a <= BIG]


def main():
    pid = int(sys.argv[1])
    needles = [n.encode() for n in sys.argv[2:]]
    keep = max(len(n) for n in needles) - 1
    found = [[0, 0] for _ in needles]
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for a, b, dd in mappings(pid):
            seen = [False] * len(needles)
            tail = b""
            at = a
            while at < b:
                n = min(CHUNK, b - at)
                try:
                    mem.seek(at)
                    buf = mem.read(n)
                except (OSError, ValueError, OverflowError):
                    break  # [vvar] and the like
                if not buf:
                    break
                hay = tail + buf
                for i, nd in enumerate(needles):
                    if not seen[i] and nd in hay:
                        seen[i] = True
                tail = hay[-keep:] if keep else b""
                at += len(buf)
            for i, s in enumerate(seen):
                if s:
                    found[i][0 if dd else 1] += 1
    for i, (dd, other) in enumerate(found):
        print("%d dd=%d other=%d" % (i, dd, other))


if __name__ == "__main__":
    main()
