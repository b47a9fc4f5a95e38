#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bgbuild.sh JOBS BUILD ASAN TSAN - start in the background what make
# test builds after its normal pass's tests (its 20 minutes on 2
# cores): the CUDA build cuda_build tests (BUILD/cuda), the ASan+UBSan
# tree and the ThreadSanitizer tree, one after the other, under
# SCHED_IDLE (chrt -i: they run only on a core no test wants, and yield
# it at once when one does) and the idle I/O class.  Each build holds
# its tree's lock (build.sh, cuda_build.sh): the foreground builds of
# the same trees wait for it and then have nothing left to do; a
# background build that failed fails again there, with its error
# shown.  Logs: ASAN/bgbuild.log, TSAN/bgbuild.log, BUILD/cuda.bg.log.
# The builds run in a session of their own, and end with the make that
# started them (SFS_BG_OWNER, make's pid; else this script's parent):
# a make test whose normal pass failed, or that was interrupted, leaves
# nothing building behind it.
set -euo pipefail
[ $# = 4 ] || { echo "usage: bgbuild.sh JOBS BUILD ASAN TSAN" >&2; exit 2; }
JOBS=$1
BUILD=$2
ASAN=$3
TSAN=$4
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$ASAN" "$TSAN"
OWNER=${SFS_BG_OWNER:-$PPID}
# SCHED_IDLE and the idle I/O class where this machine allows them
# (a container may refuse chrt): else the lowest nice, said once.
IDLE=(chrt -i 0 ionice -c 3)
if ! "${IDLE[@]}" true 2>/dev/null; then
	IDLE=(nice -n 19)
	echo "bgbuild: chrt -i or ionice -c 3 refused here: building at nice 19 instead"
fi
# (Started while this script still holds no lock: the first lock each
# background build takes may come after the foreground's own build of
# that tree began, which then simply goes first.)
setsid nohup "${IDLE[@]}" bash -c '
	"$1/cuda_build.sh" --build-only "$1/.." "$3" >"$3/cuda.bg.log" 2>&1
	"$1/build.sh" "$4" "$2" -DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON >"$4/bgbuild.log" 2>&1
	"$1/build.sh" "$5" "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDFS_TSAN=ON >"$5/bgbuild.log" 2>&1
' bgbuild "$HERE" "$JOBS" "$BUILD" "$ASAN" "$TSAN" </dev/null >/dev/null 2>&1 &
BG=$!
# The watcher: once the owner is gone, the builds' session ends (every
# process of it: cmake, make, the compilers).  It looks every second.
setsid bash -c '
	while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
	kill -0 "$2" 2>/dev/null && kill -TERM -- -"$2" 2>/dev/null
	exit 0
' bgwatch "$OWNER" "$BG" </dev/null >/dev/null 2>&1 &
echo "bgbuild: the CUDA, ASan+UBSan and ThreadSanitizer trees build in the background (${IDLE[*]}, session $BG, ended with pid $OWNER)"
