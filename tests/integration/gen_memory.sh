#!/usr/bin/env bash
# What a live generation of a many-file model costs a mount (issue 40,
# point 7e): a model of 20,000 small files, three generations kept live
# (the seed's --grace, a file of each held open), and the mount's RSS grows by at most
# GEN_MB_MAX per generation (docs/limits.md: about 22 MiB measured, 1.1
# KiB per file; 68 MiB before the manifest decode's freed heap went back
# to the kernel).  Not under ASan (its shadow memory and quarantine make
# RSS mean something else).
source "$(dirname "$0")/lib.sh" "$1"

NFILES=20000
GEN_MB_MAX=40
MODEL=$WORK/m
python3 - "$MODEL" "$NFILES" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = "%s/files/d%d" % (top, i // 1000)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%d.txt" % (d, i), "w") as f:
        f.write("file %d\n" % i)
PY
start_seed "$MODEL" --grace 600
MNT=$WORK/mnt
mount_seed "$MNT"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$MOUNT_PID/status"; }
# settle: the RSS once it has not changed for a second (the mount's
# start-up threads done)
settle() {
	local a b i
	a=$(rss)
	for i in $(seq 20); do
		sleep 1
		b=$(rss)
		[ "$b" = "$a" ] && break
		a=$b
	done
	echo "$b"
}
cmp "$MODEL/files/d0/f0.txt" "$MNT/m/files/d0/f0.txt" || fail "bytes of f0"
r[1]=$(settle)
# A file of each generation held open: each stays live (closed before a
# failure's unmount).
exec 7<"$MNT/m/files/d0/f0.txt"
die() {
	exec 7<&- 8<&-
	fail "$@"
}
for g in 2 3; do
	[ $g = 3 ] && exec 8<"$MNT/m/files/d0/f0.txt"
	echo "changed in generation $g" >>"$MODEL/files/d0/f$g.txt"
	kill -HUP "$SEED_PID"
	for _ in $(seq 300); do
		grep -q "adopted generation $g of m" "$WORK/mount.log" && break
		sleep 0.1
	done
	grep -q "adopted generation $g of m" "$WORK/mount.log" || die "generation $g not adopted in 30 s"
	cmp "$MODEL/files/d0/f$g.txt" "$MNT/m/files/d0/f$g.txt" || die "generation $g: bytes of f$g"
	r[$g]=$(settle)
done
msg="RSS $((r[1] / 1024)) MiB with generation 1 of $NFILES files, $((r[2] / 1024)) with 2, $((r[3] / 1024)) with 3"
# Measured: the handles closed before any verdict (a failure unmounts).
exec 7<&- 8<&-
for g in 2 3; do
	bound gen_rss_mib "<=" "$GEN_MB_MAX" $(((r[g] - r[g - 1]) / 1024)) "generation $g added RSS ($msg), MiB"
done
ok "$msg: +$(((r[2] - r[1]) / 1024)) and +$(((r[3] - r[2]) / 1024)) MiB a generation (bound $GEN_MB_MAX)"
unmount_check "$MNT" "$MOUNT_PID"
