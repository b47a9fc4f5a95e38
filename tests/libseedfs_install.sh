#!/usr/bin/env bash
# libseedfs as a user gets it: `cmake --install` into a scratch prefix,
# then a C program built with nothing but `pkg-config seedfs` publishes a
# tensor; the seed's manifest lists it.  The library exports only
# sfs_pub_* (ABI node SEEDFS_0) and sfs_client_* (SEEDFS_0.1, 0.2, and
# 0.3's sfs_client_open beside 0.1's), and the engine API's reader
# builds against the install too.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/seedfs-lib.XXXXXX)
PID=
cleanup() {
	[ -z "$PID" ] || { kill "$PID" && wait "$PID"; } 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/bound.sh
source "$(dirname "$0")/bound.sh"

cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
PC=$(find "$WORK/prefix" -name seedfs.pc)
[ -n "$PC" ] || fail "no seedfs.pc installed"
[ -f "$WORK/prefix/include/seedfs.h" ] || fail "no seedfs.h installed"
export PKG_CONFIG_PATH=$(dirname "$PC")
cc -std=c11 -Wall -Werror -o "$WORK/example" "$SRC/tests/tools/pubexample.c" \
	$(pkg-config --cflags --libs seedfs) || fail "cannot build against the install"
lib=$(pkg-config --variable=libdir seedfs)
echo "ok: installed header, library and seedfs.pc; example built with pkg-config"

# Every defined dynamic symbol, whatever its type (code, data, bss,
# weak, indirect), but the version nodes themselves (type A): a global
# variable or a weak helper leaking out counts as much as a function.
nm -D --defined-only "$lib/libseedfs.so" >"$WORK/nm" || fail "nm -D $lib/libseedfs.so"
awk 'NF != 3 { print "unparsed: " $0; next } $2 != "A" { print $3 }' "$WORK/nm" >"$WORK/exports"
awk '$2 == "A" { print $3 }' "$WORK/nm" | sort | paste -sd ' ' >"$WORK/nodes"
[ "$(cat "$WORK/nodes")" = "SEEDFS_0 SEEDFS_0.1 SEEDFS_0.2 SEEDFS_0.3" ] ||
	fail "version nodes: $(cat "$WORK/nodes")"
grep -q '^sfs_client_read@' "$WORK/exports" || fail "exports: $(cat "$WORK/exports")"
grep -Ev '^sfs_(pub|client)_[a-z0-9_]+@@?SEEDFS_0(\.[0-9]+)?$' "$WORK/exports" >"$WORK/foreign" || true
bound exports_foreign = 0 "$(grep -c . "$WORK/foreign")" "libseedfs exports more than sfs_pub_* and sfs_client_*: $(cat "$WORK/foreign")"
awk '$2 != "A" && $2 != "T" { print }' "$WORK/nm" >"$WORK/notcode"
bound exports_not_code = 0 "$(grep -c . "$WORK/notcode")" "libseedfs exports something other than code: $(cat "$WORK/notcode")"
objdump -T "$lib/libseedfs.so" | awk '$NF ~ /^sfs_/ { print $(NF - 1), $NF }' >"$WORK/syms"
# One node per ABI addition: 0.2 added sfs_client_cuda_devices; 0.3 the
# sfs_client_open that reads trust_key and require_signed (the default),
# with SEEDFS_0.1's kept for programs built before ("(SEEDFS_0.1)": not
# the default).
grep -v -E '^SEEDFS_0 sfs_pub_|^SEEDFS_0\.1 sfs_client_|^\(SEEDFS_0\.1\) sfs_client_open$|^SEEDFS_0\.2 sfs_client_cuda_devices$|^SEEDFS_0\.3 sfs_client_open$' "$WORK/syms" &&
	fail "a symbol in the wrong version node"
grep -q '^SEEDFS_0\.2 sfs_client_cuda_devices$' "$WORK/syms" ||
	fail "sfs_client_cuda_devices is not in SEEDFS_0.2: $(cat "$WORK/syms")"
grep -q '^SEEDFS_0\.3 sfs_client_open$' "$WORK/syms" && grep -q '^(SEEDFS_0\.1) sfs_client_open$' "$WORK/syms" ||
	fail "sfs_client_open is not in SEEDFS_0.3 (default) and SEEDFS_0.1: $(cat "$WORK/syms")"
grep -q '^SEEDFS_0\.1 sfs_client_open$' "$WORK/syms" &&
	fail "sfs_client_open@@SEEDFS_0.1 is the default: programs built now would reach the one that ignores trust_key"
grep -q '^SEEDFS_0\.1 sfs_client_read$' "$WORK/syms" || fail "no sfs_client_read@SEEDFS_0.1: $(cat "$WORK/syms")"
echo "ok: exports only sfs_pub_* (SEEDFS_0) and sfs_client_* (SEEDFS_0.1 to 0.3): $(wc -l <"$WORK/syms") symbols"
cc -std=c11 -Wall -Werror -o "$WORK/apiread" "$SRC/tests/tools/apiread.c" \
	$(pkg-config --cflags --libs seedfs) -lpthread || fail "cannot build the API reader against the install"
echo "ok: the engine API's reader built with pkg-config"

mkfifo "$WORK/in"
LD_LIBRARY_PATH=$lib "$WORK/example" <"$WORK/in" >"$WORK/out" 2>"$WORK/err" &
PID=$!
exec 3>"$WORK/in"
for _ in $(seq 200); do grep -qE '^ready [0-9]+ [0-9]+$' "$WORK/out" && break; sleep 0.05; done
read -r _ port gen <"$WORK/out" || fail "example: $(cat "$WORK/err")"
curl -fsS "http://127.0.0.1:$port/v1/manifest" >"$WORK/manifest.json"
python3 - "$WORK/manifest.json" <<'PY' || fail "manifest"
import json, sys
m = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in m["tensors"]}
assert m["model"] == "example" and m["generation"] == 1
assert t["w"]["dtype"] == "F32" and t["w"]["shape"] == [2, 3], t
assert t["w"]["file"] == "model-00001-of-00001.safetensors"
files = {f["path"] for f in m["files"]}
assert files == {"config.json", "model-00001-of-00001.safetensors",
                 "model.safetensors.index.json"}, files
assert m["identity"]["dtype"] == "float32"
PY
echo "ok: the example serves generation $gen on port $port with tensor w"
exec 3>&-
wait "$PID" || fail "example exit status"
PID=
echo "ok: example exited cleanly"
