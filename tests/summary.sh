#!/usr/bin/env bash
# The end of make test: per pass, how many tests ran, failed and were
# skipped, and each skip by name with its reason (the last line it
# printed), so a skip is never buried in a log.  For each failed test,
# the lines that say why (a Check assertion, lib.sh's FAIL, a sanitizer's
# report and its first frames, a timeout): make test prints this summary
# when a pass fails too, so that the end of a long log (what CI keeps)
# names the cause, not only the test.
#   summary.sh PASS=JUNIT.xml ...
set -euo pipefail
python3 - "$@" <<'PY'
import re
import sys
import xml.etree.ElementTree as ET

# What a failure looks like in our tests' output.
WHY = re.compile(
    r":[FE]:[^:]*:[^:]*:"                  # Check: file:line:F:tcase:test:
    r"|^FAIL\b|\bFAIL:"                    # lib.sh's fail() and its kin
    r"|ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer"
    r"|SUMMARY: (Address|Undefined|Thread)"
    r"|runtime error:"                     # UBSan
    r"|(Direct|Indirect) leak of"
    r"|[Tt]imeout|timed out|Test timeout")
FRAME = re.compile(r"^\s*#[0-9]+ 0x")
MAX_LINES = 24

def why(case):
    out = (case.findtext("system-out") or "").splitlines()
    lines, frames = [], 0
    for ln in out:
        if WHY.search(ln):
            lines.append(ln)
            frames = 8   # a report's first frames say whose it is
        elif frames and FRAME.match(ln):
            lines.append(ln)
            frames -= 1
        else:
            frames = 0
        if len(lines) >= MAX_LINES:
            lines.append("(more in the test's output)")
            break
    if not lines and out:
        lines = ["(no failure line found; its last lines:)"] + out[-6:]
    return [l[:300] for l in lines]

total_skipped = 0
print("\n== test summary ==")
for arg in sys.argv[1:]:
    name, _, path = arg.partition("=")
    try:
        cases = ET.parse(path).getroot().findall("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"{name:10} no results ({e})")
        continue
    failed = [c for c in cases if c.get("status") == "fail"]
    skipped = [c for c in cases if c.get("status") in ("notrun", "disabled")
               or c.find("skipped") is not None]
    print(f"{name:10} {len(cases):3} tests, {len(cases) - len(failed) - len(skipped):3} "
          f"passed, {len(failed)} failed, {len(skipped)} skipped")
    for c in failed:
        print(f"           FAILED  {c.get('name')}")
        for ln in why(c):
            print(f"             | {ln}")
    for c in skipped:
        out = (c.findtext("system-out") or "").strip().splitlines()
        why_skip = out[-1] if out else "(no reason printed)"
        print(f"           SKIPPED {c.get('name')}: {why_skip}")
    total_skipped += len(skipped)
print(f"skipped in all: {total_skipped}")
PY
