#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build.sh DIR JOBS [CMAKE_ARG...] - configure (cmake -S TOP -B DIR
# CMAKE_ARG...) and build the tree in DIR, holding DIR.lock (beside the
# tree, so that make clean, which removes the tree, cannot remove a lock
# a build holds) for both: make test builds its sanitizer trees in the
# background while its normal pass runs (bgbuild.sh), then again here
# before their passes, which waits for the background build and finds
# nothing left to do, or shows its error.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: build.sh DIR JOBS [CMAKE_ARG...]" >&2; exit 2; }
DIR=$1
JOBS=$2
shift 2
TOP=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR"
exec 9>"${DIR%/}.lock"
flock 9
cmake -S "$TOP" -B "$DIR" "$@" >/dev/null
cmake --build "$DIR" -j "$JOBS"
