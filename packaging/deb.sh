#!/usr/bin/env bash
# make deb: the Debian packages (seedfs, libseedfs0, libseedfs-dev,
# python3-seedfs) from packaging/debian/, built by dpkg-buildpackage in a
# copy of the committed-or-not source tree, then checked by lintian.
#   packaging/deb.sh [OUTDIR]   (default build/deb)
# Prints the .deb paths and lintian's verdict; exits non-zero on a build
# failure or a lintian error.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$SRC/build/deb}" && cd "${1:-$SRC/build/deb}" && pwd)
VER=$(sed -n '1s/^seedfs (\([^)]*\)).*/\1/p' "$SRC/packaging/debian/changelog")
TREE=$OUT/seedfs-$VER
rm -rf "$TREE" "$OUT"/*.deb "$OUT"/*.changes "$OUT"/*.buildinfo
mkdir -p "$TREE"
# The project's files, without build trees (git's list where there is one).
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$TREE" 2>/dev/null || true)
else
	(cd "$SRC" && tar --exclude='./build*' --exclude=./.git -cf - .) | (cd "$TREE" && tar -xf -)
fi
rm -rf "$TREE"/build*
cp -r "$SRC/packaging/debian" "$TREE/debian"
echo "deb: building seedfs $VER in $TREE"
(cd "$TREE" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc >"$OUT/build.log" 2>&1) ||
	{ tail -n 40 "$OUT/build.log" >&2; echo "deb: dpkg-buildpackage failed (log: $OUT/build.log)" >&2; exit 1; }
mv "$OUT"/seedfs-"$VER"/../*.deb "$OUT"/ 2>/dev/null || true
ls "$OUT"/*.deb
CHANGES=$(ls "$OUT"/seedfs_"$VER"_*.changes)
echo "deb: lintian $(basename "$CHANGES")"
lintian --info --display-info --fail-on error "$CHANGES" | tee "$OUT/lintian.txt"
echo "deb: lintian: $(grep -c '^E:' "$OUT/lintian.txt" || true) errors, $(grep -c '^W:' "$OUT/lintian.txt" || true) warnings (packaging/README.md explains each kept)"
