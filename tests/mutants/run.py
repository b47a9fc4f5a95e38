#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py - the load-bearing checks, each broken on purpose: every mutant
in mutants.txt is applied to a copy of the tree, built, and the test
named beside it must fail.  A mutant that every test survives is a check
no test can see broken: the run fails and names it.

  run.py SRC BUILD [--check] [--only ID[,ID...]] [--list]

SRC is the project's top directory, BUILD a directory of the run's own
(its copy of SRC in BUILD/src, its build in BUILD/build).  --check only
verifies that each mutant's text occurs exactly once in its file (what
make test runs: a mutant that no longer applies would pass silently
otherwise).  --only runs the mutants named.

mutants.txt, one block a mutant:

  == ID
  why: what the mutant breaks (one line)
  file: path/from/SRC
  test: ctest name (a regex anchored at both ends)
  env: NAME=VALUE ...          (optional: for the test, e.g. CK_RUN_CASE)
  timeout: seconds             (optional, default 300)
  <<<
  the exact text to replace (one or more lines)
  ===
  what it becomes
  >>>
"""
import os
import re
import shutil
import subprocess
import sys
import time


def parse(path):
    mutants, cur, mode, before, after = [], None, None, [], []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            raw = line.rstrip("\n")
            if mode and raw.startswith("== "):
                sys.exit("%s:%d: a new mutant inside the text of %s (its "
                         ">>> missing?)" % (path, ln, cur["id"]))
            if mode == "before":
                if raw == "===":
                    mode = "after"
                else:
                    before.append(raw)
                continue
            if mode == "after":
                if raw == ">>>":
                    cur["before"] = "\n".join(before) + "\n"
                    cur["after"] = "\n".join(after) + "\n" if after else ""
                    mode, before, after = None, [], []
                else:
                    after.append(raw)
                continue
            if not raw.strip() or raw.startswith("#"):
                continue
            if raw.startswith("== "):
                cur = {"id": raw[3:].strip(), "line": ln, "env": {},
                       "timeout": 300}
                mutants.append(cur)
            elif raw == "<<<":
                if cur is None:
                    sys.exit("%s:%d: <<< before any '== ID'" % (path, ln))
                mode = "before"
            elif cur is not None and ":" in raw:
                k, v = raw.split(":", 1)
                k, v = k.strip(), v.strip()
                if k == "env":
                    for kv in v.split():
                        n, _, val = kv.partition("=")
                        cur["env"][n] = val
                elif k == "timeout":
                    cur["timeout"] = int(v)
                elif k in ("why", "file", "test"):
                    cur[k] = v
                else:
                    sys.exit("%s:%d: unknown field %r" % (path, ln, k))
            else:
                sys.exit("%s:%d: cannot parse: %s" % (path, ln, raw))
    if mode:
        sys.exit("%s: the last mutant's text is not closed" % path)
    seen = set()
    for m in mutants:
        for k in ("why", "file", "test", "before"):
            if k not in m:
                sys.exit("%s:%d: mutant %s has no %s" %
                         (path, m["line"], m["id"], k))
        if m["id"] in seen:
            sys.exit("%s:%d: mutant %s twice" % (path, m["line"], m["id"]))
        seen.add(m["id"])
    return mutants


def check(src, mutants):
    bad = 0
    for m in mutants:
        p = os.path.join(src, m["file"])
        try:
            text = open(p).read()
        except OSError as e:
            print("mutant %s: %s" % (m["id"], e))
            bad += 1
            continue
        n = text.count(m["before"])
        if n != 1:
            print("mutant %s: its text occurs %d times in %s (1 wanted)" %
                  (m["id"], n, m["file"]))
            bad += 1
        elif m["before"] == m["after"]:
            print("mutant %s: changes nothing" % m["id"])
            bad += 1
    return bad


def sh(cmd, cwd=None, env=None, timeout=None, log=None):
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"") + b"\n(timed out)\n", -1
    if log:
        with open(log, "ab") as f:
            f.write(("$ %s\n" % " ".join(cmd)).encode() + out)
    return rc, time.time() - t0


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    src, work = os.path.abspath(args[0]), os.path.abspath(args[1])
    only = None
    if "--only" in args:
        only = set(args[args.index("--only") + 1].split(","))
    here = os.path.dirname(os.path.abspath(__file__))
    mutants = parse(os.path.join(here, "mutants.txt"))
    if "--list" in args:
        for m in mutants:
            print("%-28s %-22s %s" % (m["id"], m["test"], m["why"]))
        return 0
    if only:
        unknown = only - {m["id"] for m in mutants}
        if unknown:
            sys.exit("no such mutant: %s" % ", ".join(sorted(unknown)))
        mutants = [m for m in mutants if m["id"] in only]
    bad = check(src, mutants)
    if "--check" in args:
        print("mutants: %d, each applies once%s" %
              (len(mutants), "" if not bad else "; %d do not" % bad))
        return 1 if bad else 0
    if bad:
        return 1
    # A copy of the tree: the real one is never mutated, whatever
    # happens to this run.
    copy, build = os.path.join(work, "src"), os.path.join(work, "build")
    log = os.path.join(work, "mutants.log")
    os.makedirs(work, exist_ok=True)
    open(log, "w").close()
    rc, _ = sh(["rsync", "-a", "--delete", "--exclude", ".git",
                "--exclude", "/build*", src + "/", copy + "/"], log=log)
    if rc:
        sys.exit("cannot copy %s (see %s)" % (src, log))
    jobs = str(os.cpu_count() or 2)
    rc, _ = sh(["cmake", "-S", copy, "-B", build,
                "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], log=log)
    rc = rc or sh(["cmake", "--build", build, "-j", jobs], log=log)[0]
    if rc:
        sys.exit("the unmutated tree does not build (see %s)" % log)
    rows, survived = [], []
    for m in mutants:
        p = os.path.join(copy, m["file"])
        orig = open(p).read()
        with open(p, "w") as f:
            f.write(orig.replace(m["before"], m["after"], 1))
        try:
            rc, bt = sh(["cmake", "--build", build, "-j", jobs], log=log)
            if rc:
                verdict, tt = "killed (does not build)", 0.0
            else:
                env = dict(os.environ, **m["env"])
                rc, tt = sh(["ctest", "--output-on-failure", "-R",
                             "^(%s)$" % m["test"]], cwd=build, env=env,
                            timeout=m["timeout"] + 60, log=log)
                verdict = "killed" if rc else "SURVIVED"
        finally:
            with open(p, "w") as f:
                f.write(orig)
            # The restored file must be rebuilt even within the same
            # second as its mutant.
            st = os.stat(p)
            os.utime(p, (st.st_atime, st.st_mtime + 2))
        rows.append((m["id"], m["test"], verdict, bt + tt))
        print("%-28s %-22s %-24s %6.1f s" % rows[-1], flush=True)
        if verdict == "SURVIVED":
            survived.append(m)
    sh(["cmake", "--build", build, "-j", jobs], log=log)
    print("\n%d mutants, %d killed, %d survived (log: %s)" %
          (len(rows), len(rows) - len(survived), len(survived), log))
    for m in survived:
        print("  survived: %s (%s): %s" % (m["id"], m["file"], m["why"]))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
