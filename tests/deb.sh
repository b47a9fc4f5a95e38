#!/usr/bin/env bash
# make deb as a user installs it: build the four packages (packaging/
# deb.sh; lintian: no errors, and only the warnings packaging/README.md
# explains), check their dependencies came from the libraries (shlibs),
# dpkg -i them, run the installed seedfs --version, the demo against
# /usr/bin/seedfs, a C program built with the installed pkg-config seedfs
# (its tensor pulled by the installed seedfs, byte-exact), the installed
# Python binding; then dpkg --purge: nothing of ours is left.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/seedfs-deb.XXXXXX)
PKGS="python3-seedfs libseedfs-dev seedfs libseedfs0"
PID=
INSTALLED=0
cleanup() {
	[ -z "$PID" ] || { kill "$PID" && wait "$PID"; } 2>/dev/null || true
	[ "$INSTALLED" = 1 ] && dpkg --purge $PKGS >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/bound.sh
source "$SRC/tests/bound.sh"
for p in $PKGS; do
	! grep -q 'install ok' <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" ||
		fail "$p is installed already: this test installs and purges its own"
done
[ ! -e /usr/bin/seedfs ] || fail "/usr/bin/seedfs exists already"

"$SRC/packaging/deb.sh" "$WORK/deb" >"$WORK/deb.out" 2>&1 || fail "make deb: $(tail -n 30 "$WORK/deb.out")"
[ -f "$WORK/deb/lintian.txt" ] || fail "make deb wrote no lintian.txt"
grep -E '^[EW]:' "$WORK/deb/lintian.txt" >"$WORK/tags" || true
bound lintian_errors = 0 "$(grep -c '^E:' "$WORK/tags")" "lintian errors: $(cat "$WORK/tags")"
unexplained=()
while read -r _ pkg tag _; do
	grep -q -- "\`$tag\`" "$SRC/packaging/README.md" || unexplained+=("$tag ($pkg)")
done <"$WORK/tags"
bound lintian_warnings_unexplained = 0 "${#unexplained[@]}" \
	"lintian warnings not explained in packaging/README.md: ${unexplained[*]}"
echo "ok: make deb: $(cd "$WORK/deb" && ls *.deb | grep -v dbgsym | tr '\n' ' ')"
echo "ok: lintian: no errors; warnings kept, each explained: $(cut -d' ' -f2- "$WORK/tags" | tr '\n' ';')"

deb() { ls "$WORK"/deb/"$1"_*.deb; }
dep=$(dpkg-deb -f "$(deb seedfs)" Depends)
for l in libfuse3-3 libfabric1 libibverbs1 libjansson4 libcurl4 libmicrohttpd12 libgnutls30 libsystemd0 libxxhash0 'libc6 (>='; do
	case "$dep" in *"$l"*) ;; *) fail "seedfs Depends lacks $l (shlibs): $dep" ;; esac
done
ldep=$(dpkg-deb -f "$(deb libseedfs0)" Depends)
case "$ldep" in *libfabric1*) ;; *) fail "libseedfs0 Depends: $ldep" ;; esac
ddep=$(dpkg-deb -f "$(deb libseedfs-dev)" Depends)
case "$ddep" in *"libseedfs0 (= 0.1.0)"*) ;; *) fail "libseedfs-dev Depends: $ddep" ;; esac
echo "ok: dependencies from shlibs: seedfs: $dep"

dpkg-deb -c "$(deb seedfs)" | awk '{print $NF}' >"$WORK/seedfs.files"
for f in ./usr/bin/seedfs ./usr/share/man/man1/seedfs.1.gz ./usr/share/man/man1/seedfs-mount.1.gz \
	./usr/share/bash-completion/completions/seedfs ./lib/systemd/system/seedfs-seed@.service \
	./lib/systemd/system/seedfs-mount@.service ./usr/share/doc/seedfs/examples/seedfs-dashboard.json; do
	grep -qx -- "$f" "$WORK/seedfs.files" || fail "seedfs.deb lacks $f"
done

INSTALLED=1
dpkg -i $(deb seedfs) $(deb libseedfs0) $(deb libseedfs-dev) $(deb python3-seedfs) >"$WORK/dpkg.out" 2>&1 ||
	fail "dpkg -i: $(cat "$WORK/dpkg.out")"
for p in $PKGS; do dpkg -L "$p"; done | sort -u >"$WORK/ours"
[ "$(/usr/bin/seedfs --version)" = "seedfs 0.1.0" ] || fail "installed --version: $(/usr/bin/seedfs --version)"
man -w seedfs-mount >/dev/null || fail "man seedfs-mount is not found"
echo "ok: dpkg -i: $(wc -l <"$WORK/ours") paths; /usr/bin/seedfs --version: $(/usr/bin/seedfs --version); man -w seedfs-mount: $(man -w seedfs-mount)"

SEEDFS=/usr/bin/seedfs "$SRC/tests/demo.sh" "$BUILD" >"$WORK/demo.out" 2>&1 || fail "demo with /usr/bin/seedfs: $(tail -n 20 "$WORK/demo.out")"
grep -q 'checksum' "$WORK/demo.out" || fail "the demo did not get to its checksum"
echo "ok: the demo against /usr/bin/seedfs"

# A program built with the installed pkg-config seedfs only.
cc -std=c11 -Wall -Werror -o "$WORK/example" "$SRC/tests/tools/pubexample.c" \
	$(pkg-config --cflags --libs seedfs) || fail "cannot build with pkg-config seedfs"
libs=$(ldd "$WORK/example")
grep -qE "libseedfs.so.0 => (/usr)?/lib/x86_64-linux-gnu/libseedfs.so.0" <<<"$libs" ||
	fail "the example does not link the installed library: $libs"
mkfifo "$WORK/in"
"$WORK/example" <"$WORK/in" >"$WORK/ex.out" 2>"$WORK/ex.err" &
PID=$!
exec 3>"$WORK/in"
for _ in $(seq 200); do grep -qE '^ready [0-9]+ [0-9]+$' "$WORK/ex.out" && break; sleep 0.05; done
read -r _ port _ <"$WORK/ex.out" || fail "example: $(cat "$WORK/ex.err")"
/usr/bin/seedfs pull --seed "127.0.0.1:$port" example "$WORK/pulled" >"$WORK/pull.out" 2>&1 ||
	fail "installed pull: $(cat "$WORK/pull.out")"
python3 - "$WORK/pulled" <<'PY' || fail "the pulled tensor"
import json, struct, sys
raw = open(sys.argv[1] + "/model-00001-of-00001.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
a, b = h["w"]["data_offsets"]
assert struct.unpack("<6f", raw[8 + n + a:8 + n + b]) == (1, 2, 3, 4, 5, 6)
PY
exec 3>&-
wait "$PID" || fail "example exit status"
PID=
echo "ok: pkg-config seedfs: a program on the installed library published a tensor; the installed seedfs pulled it byte-exact"

(cd "$WORK" && env -u SEEDFS_LIB -u PYTHONPATH /usr/bin/python3 -c '
import seedfs, seedfs._libload as l
l.lib()
assert seedfs.__file__.startswith("/usr/lib/python3/dist-packages/"), seedfs.__file__
maps = open("/proc/self/maps").read()
assert "/usr/lib/x86_64-linux-gnu/libseedfs.so.0" in maps or "/lib/x86_64-linux-gnu/libseedfs.so.0" in maps
') || fail "the installed Python binding does not load the installed library"
echo "ok: python3-seedfs imports from dist-packages and loads the installed libseedfs.so.0"

dpkg --purge $PKGS >"$WORK/purge.out" 2>&1 || fail "dpkg --purge: $(cat "$WORK/purge.out")"
INSTALLED=0
left=$(while read -r f; do [ -e "$f" ] && [ ! -d "$f" ] && echo "$f"; done <"$WORK/ours" || true)
bound files_left_after_purge = 0 "$(grep -c . <<<"$left")" "left after purge: $left"
for d in /usr/lib/python3/dist-packages/seedfs /usr/share/doc/seedfs /etc/seedfs /usr/include/seedfs.h; do
	[ ! -e "$d" ] || fail "left after purge: $d"
done
dpkg-query -W $PKGS >/dev/null 2>&1 && fail "dpkg still knows a package"
echo "ok: dpkg --purge: nothing of ours is left"
