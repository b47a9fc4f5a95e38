#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each bound docs/claims.md states is the bound its test asserts.

A claim's "bound asserted" cell may hold tokens

    `bound TEST KEY OP LIMIT`        e.g. `bound cache_bound peak_rss_mib <= 128`

and a test asserting that bound prints, as it checks it (tests/
integration/lib.sh `bound`, tests/unit/bound.h), the line

    bound: KEY OP LIMIT: MEASURED

  claims_bounds.py --static CLAIMS_MD
        every token well formed, its TEST named in the row's test column,
        no (TEST, KEY) stated twice; prints how many rows carry a token
  claims_bounds.py [--absent-ok] CLAIMS_MD JUNIT.xml...
        and each token's test ran in one of those JUnit files (make
        test's normal pass, make test-full's long one; ctest run with
        --test-output-size-passed large enough) and printed exactly that
        bound: a test that asserts another bound, or none, fails the
        check, naming both.  --absent-ok: a test in none of the files
        (one of make test-full's only) is listed, not failed.
"""
import re
import sys
import xml.etree.ElementTree as ET

TOKEN = re.compile(r"`bound ([^`]*)`")
TOKEN_FORM = re.compile(
    r"^([A-Za-z0-9_]+) ([a-z0-9_]+) (<=|>=|<|>|=) (-?[0-9]+(?:\.[0-9]+)?)$")
PRINTED = re.compile(
    r"^bound: ([a-z0-9_]+) (<=|>=|<|>|=) (-?[0-9]+(?:\.[0-9]+)?): (\S+)$")
TEST_NAME = re.compile(r"`([A-Za-z0-9_]+)`")


def fail(errors):
    print("claims_bounds: FAILED:", file=sys.stderr)
    for e in errors:
        print("  " + e, file=sys.stderr)
    sys.exit(1)


NO_BOUND = []  # lines of rows that say why they have no token


def read_claims(path):
    """[(lineno, test, key, op, limit)], rows with a token, errors.

    A row without a token must say why: its "bound asserted" cell
    begins "no bound:"."""
    tokens, errors, rows = [], [], 0
    col = bcol = None
    seen = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("|"):
                col = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if col is None:
                col = cells.index("test") if "test" in cells else -1
                bcol = cells.index("bound asserted") \
                    if "bound asserted" in cells else -1
                continue
            if re.match(r"^\|[-|: ]+\|$", line.strip()):
                continue
            found = TOKEN.findall(line)
            if found:
                rows += 1
            elif bcol >= 0 and bcol < len(cells) and \
                    cells[bcol].startswith("no bound:"):
                NO_BOUND.append(n)
            elif bcol >= 0:
                errors.append("line %d: no `bound TEST KEY OP LIMIT` token, "
                              "and the bound cell does not begin 'no bound:' "
                              "with the reason" % n)
            names = set(TEST_NAME.findall(cells[col])) if col >= 0 and \
                col < len(cells) else set()
            for t in found:
                m = TOKEN_FORM.match(t)
                if not m:
                    errors.append("line %d: `bound %s`: not TEST KEY OP "
                                  "NUMBER" % (n, t))
                    continue
                test, key, op, limit = m.groups()
                if test not in names:
                    errors.append("line %d: `bound %s`: %s is not in the "
                                  "row's test column" % (n, t, test))
                if (test, key) in seen:
                    errors.append("line %d: %s %s already stated on line %d"
                                  % (n, test, key, seen[(test, key)]))
                seen[(test, key)] = n
                tokens.append((n, test, key, op, limit))
    return tokens, rows, errors


def read_junit(path):
    """{test name: [(key, op, limit, measured)]}"""
    out = {}
    for c in ET.parse(path).getroot().iter("testcase"):
        text = c.findtext("system-out") or ""
        out[c.get("name")] = [m.groups() for m in
                              map(PRINTED.match, text.splitlines()) if m]
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--static":
        tokens, rows, errors = read_claims(argv[2])
        if errors:
            fail(errors)
        print("claims_bounds: %d bounds stated on %d rows; %d rows say "
              "why they have none (lines %s)" %
              (len(tokens), rows, len(NO_BOUND),
               ", ".join(map(str, NO_BOUND))))
        return
    args = argv[1:]
    absent_ok = bool(args) and args[0] == "--absent-ok"
    if absent_ok:
        args = args[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    tokens, rows, errors = read_claims(args[0])
    ran = {}
    for path in args[1:]:
        ran.update(read_junit(path))
    checked = 0
    absent = set()
    for n, test, key, op, limit in tokens:
        if test not in ran:
            if absent_ok:
                absent.add(test)
            else:
                errors.append("line %d: %s did not run in %s" %
                              (n, test, " ".join(args[1:])))
            continue
        printed = [b for b in ran[test] if b[0] == key]
        if not printed:
            errors.append("line %d: %s printed no bound %s (docs: %s %s)" %
                          (n, test, key, op, limit))
            continue
        for k, o, lim, measured in printed:
            if (o, float(lim)) != (op, float(limit)):
                errors.append("line %d: %s asserts %s %s %s, docs/claims.md "
                              "says %s %s" % (n, test, key, o, lim, op,
                                              limit))
        checked += 1
    if errors:
        fail(errors)
    print("claims_bounds: %d bounds on %d rows each asserted by its test "
          "as stated%s" % (checked, rows,
                           "; not run in this pass: " +
                           " ".join(sorted(absent)) if absent else ""))


if __name__ == "__main__":
    main(sys.argv)
