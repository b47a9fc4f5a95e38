#!/usr/bin/env bash
# The end of make test: per pass, how many tests ran, failed and were
# skipped, and each skip by name with its reason (the last line it
# printed), so a skip is never buried in a log.
#   summary.sh PASS=JUNIT.xml ...
set -euo pipefail
python3 - "$@" <<'PY'
import sys
import xml.etree.ElementTree as ET

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
    for c in skipped:
        out = (c.findtext("system-out") or "").strip().splitlines()
        why = out[-1] if out else "(no reason printed)"
        print(f"           SKIPPED {c.get('name')}: {why}")
    total_skipped += len(skipped)
print(f"skipped in all: {total_skipped}")
PY
