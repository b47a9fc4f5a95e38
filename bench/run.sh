#!/usr/bin/env bash
# make bench: one run, one table.  For a generated model of BENCH_SIZE
# bytes (default 1G) on tmpfs, served by one local seed over every
# protocol of BENCH_PROTOCOLS (default tcp,shm,sockets) on loopback:
#   raw        sfs-rawread: every byte with the transport alone, no FUSE
#              (the better of 8 and 32 reads of 1 MiB in flight)
#   api        the engine API (libseedfs sfs_client_read): every file
#              whole into the caller's registered memory, verified in
#              place, in one batch (tests/tools/apiread, reads timed)
#   pull       seedfs pull into a directory on tmpfs (verified, written;
#              and, for the first protocol, --in-place: into the files'
#              mappings)
#   cold       first sequential read through a fresh mount
# for each protocol, then once (the first protocol where it matters):
#   prefetch   seedfs prefetch on a fresh mount (the daemon pulls into a
#              cache that holds the model), and the read after it
#   ceiling    the same files through sfs-fuseceil, a minimal FUSE
#              server of ours serving them from RAM with the mount's
#              options, buffered and with direct_io: the most any FUSE
#              read path can do here
#   cold dio   a fresh mount with -o direct_io
#   warm       the same read again (kernel page cache)
#   tmpfs      the same files read from tmpfs directly
#   tmpfs write dd of as many bytes into a new tmpfs file: what creating
#              a pull's destination pages costs here, a bound of pull
#   sshfs      the same files through Debian's sshfs from a private sshd
#              on loopback (what people use today for a remote mount)
#   reseeder   a cold read through a fresh mount given only a
#              re-seeding mount that holds the model (the first
#              protocol): every chunk checked against SHA-256 on the
#              cache's verifier threads, what a seed served against XXH3
#   verified   a second seed with --sign-key (the manifest is signed),
#              read with --trust-key (every chunk checked against
#              SHA-256, a seed's too): pull and a cold mount (the first
#              protocol); and the publish time (exec to ready: walk,
#              hash, register) of the seed (default: XXH3-64 and
#              SHA-256 of every chunk), of one with --digest xxh3, and of
#              the signed one
# and the ratios, and for each row the CPU seconds per GB of each
# process on its path: the mount daemon (or the FUSE ceiling server),
# the seed, and the reader (readall, apiread, seedfs pull, sfs-rawread;
# children included).  Each is measured RUNS times (default 3; on a fresh
# mount each time where it says so) and the median reported with the
# range: on small VMs single runs are noisy.  The medians also go to
# docs/bench.png (gnuplot).  Memory is warmed first and before each run
# (BENCH_WARM), and
# the goals get a verdict only when every limit is above the paths it
# bounds in the same run.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SIZE=${BENCH_SIZE:-1G}
PROTOS=${BENCH_PROTOCOLS:-tcp,shm,sockets}
MOUNT_OPTS=${BENCH_MOUNT_OPTS:-}
RUNS=${BENCH_RUNS:-3}
SEEDFS=$BUILD/seedfs
READALL=$BUILD/bench/sfs-readall
WORK=$(mktemp -d /dev/shm/seedfs-bench.XXXXXX)
MNT=$(mktemp -d /tmp/seedfs-bench-mnt.XXXXXX)
CMNT=$(mktemp -d /tmp/seedfs-bench-ceil.XXXXXX)
CEIL_PID=
SMNT=$(mktemp -d /tmp/seedfs-bench-sshfs.XXXXXX)
SEED_PID=
SSHD_PID=

cleanup() {
	declare -F reporting_restore >/dev/null && reporting_restore
	local m
	for m in "$MNT" "$SMNT" "$CMNT" ${RMNT:-}; do
		if grep -q " $m fuse" /proc/mounts; then fusermount3 -u "$m" || true; fi
	done
	[ -z "${RMNT:-}" ] || rmdir "$RMNT" 2>/dev/null || true
	[ -n "$SEED_PID" ] && { kill "$SEED_PID" && wait "$SEED_PID"; } 2>/dev/null
	[ -n "$SEED_PID" ] && rm -f "/dev/shm/$SEED_PID:"*
	[ -n "${SEED2_PID:-}" ] && { kill "$SEED2_PID" && wait "$SEED2_PID"; } 2>/dev/null
	[ -n "${SEED2_PID:-}" ] && rm -f "/dev/shm/$SEED2_PID:"*
	[ -n "$SSHD_PID" ] && { kill "$SSHD_PID" && wait "$SSHD_PID"; } 2>/dev/null
	[ -n "$CEIL_PID" ] && { kill "$CEIL_PID" && wait "$CEIL_PID"; } 2>/dev/null
	rm -rf "$WORK" "$MNT" "$SMNT" "$CMNT"
}
trap cleanup EXIT
# shellcheck source=bench/reporting.sh
source "$SRC/bench/reporting.sh"

field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
col() { echo "$1" | awk -v i="$2" '{ print $i }'; }
rate() { # BYTES NANOSECONDS: the line every measurement prints
	awk -v b="$1" -v ns="$2" \
		'BEGIN { printf "bytes %d seconds %.3f GB/s %.2f\n", b, ns / 1e9, b / ns }'
}

# This VM's first touch of guest memory runs at about 250 MB/s (shared
# notes): a run that faults in fresh pages measures that, not the code.
# So the memory the runs will use (the model, a pull's copy, the mounts'
# caches, dd's file: about 6 times the model) is touched once, through a
# tmpfs file, before anything is measured (BENCH_WARM=0: not).  And
# since this VM hands free memory back to its host within seconds (free
# page reporting: /sys/module/page_reporting/parameters/reported_kib
# grew by 3.8 GB over five 1 GB reads), twice the model is touched again
# right before every timed run (warm_run): the pages a run creates (the
# reader's page cache, a pull's copy, a cache that grows) are then ones
# the host has backed, and the run measures the code.
warm_run() {
	[ "${BENCH_WARM:-1}" != 0 ] || return 0
	dd if=/dev/zero of="$WORK/warm" bs=1M count="$RUN_WARM_MIB" 2>/dev/null
	rm -f "$WORK/warm"
}
warm_memory() {
	local avail want
	avail=$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) * 1024))
	want=$(($(numfmt --from=iec "$SIZE") * 6))
	[ "$want" -le $((avail * 7 / 10)) ] || want=$((avail * 7 / 10))
	local t0 t1
	t0=$(date +%s%N)
	dd if=/dev/zero of="$WORK/warm" bs=1M count=$((want / 1048576)) 2>/dev/null
	rm -f "$WORK/warm"
	t1=$(date +%s%N)
	RUN_WARM_MIB=$(($(numfmt --from=iec "$SIZE") * 2 / 1048576))
	[ "$RUN_WARM_MIB" -le $((avail * 7 / 10 / 1048576)) ] || RUN_WARM_MIB=$((avail * 7 / 10 / 1048576))
	WARMED="warmed $((want / 1048576)) MiB of memory first ($(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }') s) and $RUN_WARM_MIB MiB before each run"
	echo "$WARMED"
}
WARMED="memory not warmed (BENCH_WARM=0)"
REPORTING_NOTE="free page reporting left as it is (BENCH_WARM=0)"
[ "${BENCH_WARM:-1}" = 0 ] || { reporting_hold; warm_memory; }

echo "generating a $SIZE model on tmpfs..."
"$BUILD/tests/genmodel" "$WORK/model" --size "$SIZE" --shards 4 >/dev/null
MODEL_BYTES=$(du -sb "$WORK/model" | cut -f1)
# A cache that holds the whole model, so that prefetch warms all of it
# (it warms at most three quarters of a cache in memory).
BIG_CACHE=$((MODEL_BYTES * 3 / 2 / 1048576 + 64))M
# start_seed NAME [seed options]: a seed of the model; sets PORT, its
# pid in SEED_PID (SEED2_PID for the second) and PUBLISH_S, the seconds
# from exec to ready.
start_seed() {
	local name=$1 t0 t1
	shift
	t0=$(date +%s%N)
	"$SEEDFS" seed --model-dir "$WORK/model" --listen 127.0.0.1:0 \
		--protocol "$PROTOS" --log-level warn "$@" >"$WORK/$name.out" \
		2>"$WORK/$name.err" &
	LAST_PID=$!
	for _ in $(seq 2000); do grep -qE '^seedfs seed: ready on ' "$WORK/$name.out" && break; sleep 0.01; done
	t1=$(date +%s%N)
	PORT=$(sed -n 's/.*ready on [^ ]*:\([0-9]*\):.*/\1/p' "$WORK/$name.out")
	[ -n "$PORT" ] || { cat "$WORK/$name.err"; exit 1; }
	PUBLISH_S=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
}
start_seed seed3 --digest xxh3
kill "$LAST_PID" && wait "$LAST_PID" 2>/dev/null || true
rm -f "/dev/shm/$LAST_PID:"*
publish_fast=$PUBLISH_S
start_seed seed
SEED_PID=$LAST_PID
publish_default=$PUBLISH_S

# CPU seconds (user + system) a process has used so far.
ticks() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# cpu_start [MOUNT_PID]: note the seed's and the mount's CPU now.
# cpu_stop: the CPU each used since, into $WORK/cpu.run ("mount seed
# reader", seconds), with the reader's from $WORK/cpu.reader.
CPU_MOUNT_PID=
cpu_start() {
	CPU_MOUNT_PID=${1:-}
	C_SEED0=$(ticks "${CPU_SEED:-$SEED_PID}")
	C_MOUNT0=0
	[ -z "$CPU_MOUNT_PID" ] || C_MOUNT0=$(ticks "$CPU_MOUNT_PID")
	rm -f "$WORK/cpu.reader"
}
cpu_stop() {
	local m=0 r=0
	[ -z "$CPU_MOUNT_PID" ] || m=$(awk -v a="$(ticks "$CPU_MOUNT_PID")" -v b="$C_MOUNT0" 'BEGIN { printf "%.3f", a - b }')
	[ -s "$WORK/cpu.reader" ] && r=$(cat "$WORK/cpu.reader")
	awk -v m="$m" -v s="$(ticks "${CPU_SEED:-$SEED_PID}")" -v s0="$C_SEED0" -v r="$r" \
		'BEGIN { printf "%.3f %.3f %.3f\n", m, s - s0, r }' >"$WORK/cpu.run"
}
# reader CMD...: run CMD (its stdout passes through) and add its CPU
# seconds, children included, to $WORK/cpu.reader.  A read that fails
# ends the run (median_of's subshell, and then the bench): a rate of
# reads that failed is no rate.
reader() {
	local t rc=0 TIMEFORMAT='%3U %3S'
	{ time "$@" 2>"$WORK/reader.err"; } 2>"$WORK/reader.time" || rc=$?
	[ $rc = 0 ] || { cat "$WORK/reader.err" >&2; echo "bench: $* failed" >&2; exit $rc; }
	t=$(tail -n 1 "$WORK/reader.time")
	awk -v t="$t" -v p="$(cat "$WORK/cpu.reader" 2>/dev/null || echo 0)" \
		'BEGIN { split(t, f, " "); printf "%.3f\n", p + f[1] + f[2] }' >"$WORK/cpu.reader.new"
	mv "$WORK/cpu.reader.new" "$WORK/cpu.reader"
}
# The mount daemon of $MNT (or of the mount point given).
mount_pid() { pgrep -n -f -- "seedfs mount .* ${1:-$MNT}( |\$)"; }

# median_of CMD...: run CMD RUNS times; print "median min max bytes
# cpu_mount cpu_seed cpu_reader", the last three in CPU seconds per GB
# over all the runs (- where CMD says nothing of its CPU: $WORK/cpu.run)
median_of() {
	local i out v bytes cm=0 cs=0 cr=0 cpu=0 tb=0
	local vals=()
	for i in $(seq "$RUNS"); do
		rm -f "$WORK/cpu.run"
		warm_run
		out=$("$@") || { echo "bench: $* failed" >&2; exit 1; }
		v=$(echo "$out" | field GB/s)
		bytes=$(echo "$out" | field bytes)
		vals+=("$v")
		if [ -s "$WORK/cpu.run" ]; then
			read -r a b c <"$WORK/cpu.run"
			cm=$(awk -v x="$cm" -v y="$a" 'BEGIN { print x + y }')
			cs=$(awk -v x="$cs" -v y="$b" 'BEGIN { print x + y }')
			cr=$(awk -v x="$cr" -v y="$c" 'BEGIN { print x + y }')
			tb=$((tb + bytes))
			cpu=1
		fi
	done
	printf '%s\n' "${vals[@]}" | sort -g | awk -v b="$bytes" -v cpu=$cpu \
		-v cm="$cm" -v cs="$cs" -v cr="$cr" -v tb="$tb" \
		'{ a[NR] = $1 } END {
			if (cpu) c = sprintf("%.2f %.2f %.2f", cm * 1e9 / tb, cs * 1e9 / tb, cr * 1e9 / tb)
			else c = "- - -"
			print a[int((NR + 1) / 2)], a[1], a[NR], b, c }'
}
mount_it() { # PROTOCOL [mount options]
	local p=$1
	shift
	# shellcheck disable=SC2086
	"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --protocol "$p" \
		--log-level warn $MOUNT_OPTS "$@"
}
# PROTOCOL: seedfs pull to tmpfs.  Like the raw transport, the copy is
# timed (pull's own "done, ... in S s" line), not the process start,
# which is reported apart: libfabric's start-up is the same for all.
pull_it() { # PROTOCOL [pull options]
	rm -rf "$WORK/pulled"
	local t0 t1 s p=$1
	shift
	t0=$(date +%s%N)
	cpu_start
	reader "$SEEDFS" pull --seed "127.0.0.1:$PORT" --protocol "$p" "$@" model \
		"$WORK/pulled"
	cpu_stop
	t1=$(date +%s%N)
	cp "$WORK/reader.err" "$WORK/pull.err"
	s=$(sed -n 's/.*: done, .* in \([0-9.]*\) s .*/\1/p' "$WORK/pull.err")
	[ -n "$s" ] || { cat "$WORK/pull.err" >&2; return 1; }
	awk -v b="$MODEL_BYTES" -v s="$s" -v w="$(((t1 - t0) / 1000000))" \
		'BEGIN { printf "bytes %d seconds %.3f GB/s %.2f wall_ms %d\n", b, s, b / s / 1e9, w }'
	rm -rf "$WORK/pulled"
}
pull_start() { # PROTOCOL: seconds from exec to the first byte copied
	local out
	out=$(pull_it "$1") || return 1
	awk -v o="$out" 'BEGIN { split(o, f, " "); printf "%.2f\n", f[8] / 1000 - f[4] }'
}
api_load() { # PROTOCOL: the engine API, every file in one batch
	local out b s
	cpu_start
	out=$(reader env SEEDFS_PROTOCOL="$1" "$BUILD/tests/apiread" "127.0.0.1:$PORT" model \
		"$WORK/model" files) || return 1
	cpu_stop
	read -r b s < <(echo "$out" | sed -n 's/.* ok \([0-9]*\) bytes in \([0-9.]*\) s .*/\1 \2/p')
	[ -n "$s" ] || { echo "$out" >&2; return 1; }
	awk -v b="$b" -v s="$s" 'BEGIN { printf "bytes %d seconds %.3f GB/s %.2f\n", b, s, b / s / 1e9 }'
}
cold_read() { # PROTOCOL: a fresh mount, nothing cached
	mount_it "$1"
	cpu_start "$(mount_pid)"
	reader "$READALL" "$MNT/model"
	cpu_stop
	fusermount3 -u "$MNT"
}
time_prefetch() { # PROTOCOL: a fresh mount; seedfs prefetch, timed
	mount_it "$1" --cache-size "$BIG_CACHE"
	local t0 t1
	cpu_start "$(mount_pid)"
	t0=$(date +%s%N)
	reader "$SEEDFS" prefetch "$MNT/model"
	t1=$(date +%s%N)
	cpu_stop
	fusermount3 -u "$MNT"
	rate "$MODEL_BYTES" $((t1 - t0))
}
read_after_prefetch() { # PROTOCOL: a fresh mount, prefetched, then read
	mount_it "$1" --cache-size "$BIG_CACHE"
	"$SEEDFS" prefetch "$MNT/model" 2>/dev/null
	cpu_start "$(mount_pid)"
	reader "$READALL" "$MNT/model"
	cpu_stop
	fusermount3 -u "$MNT"
}

cold_dio() { # PROTOCOL: a fresh mount with -o direct_io
	mount_it "$1" -o direct_io
	cpu_start "$(mount_pid)"
	reader "$READALL" "$MNT/model"
	cpu_stop
	fusermount3 -u "$MNT"
}
# [-o direct_io]: the model's files through the FUSE ceiling server, a
# fresh mount each time, the mount's read-ahead.
ceil_read() {
	"$BUILD/bench/sfs-fuseceil" "$WORK/model" "$CMNT" "$@" 2>"$WORK/ceil.err" &
	CEIL_PID=$!
	for _ in $(seq 200); do grep -q " $CMNT fuse" /proc/mounts && break; sleep 0.02; done
	grep -q " $CMNT fuse" /proc/mounts || { cat "$WORK/ceil.err" >&2; return 1; }
	echo 16384 >"/sys/class/bdi/$(mountpoint -d "$CMNT")/read_ahead_kb"
	cpu_start "$CEIL_PID"
	reader "$READALL" "$CMNT"
	cpu_stop
	fusermount3 -u "$CMNT"
	wait "$CEIL_PID"
	CEIL_PID=
}

# sshfs from a private sshd on loopback: its own keys and config, as
# the user running the bench; nothing of the system's sshd is used.
SSH=$WORK/ssh
sshd_start() {
	mkdir -p "$SSH"
	[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
	ssh-keygen -q -t ed25519 -N '' -f "$SSH/host"
	ssh-keygen -q -t ed25519 -N '' -f "$SSH/client"
	cp "$SSH/client.pub" "$SSH/authorized_keys"
	SPORT=$((20000 + RANDOM % 20000))
	cat >"$SSH/config" <<-EOF
		Port $SPORT
		ListenAddress 127.0.0.1
		HostKey $SSH/host
		AuthorizedKeysFile $SSH/authorized_keys
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		StrictModes no
		UsePAM no
		PidFile none
		Subsystem sftp internal-sftp
	EOF
	/usr/sbin/sshd -D -e -f "$SSH/config" 2>"$SSH/log" &
	SSHD_PID=$!
	for _ in $(seq 100); do grep -q "listening" "$SSH/log" && break; sleep 0.05; done
}
sshfs_read() { # a fresh sshfs mount each time: nothing cached
	sshfs -o "ro,port=$SPORT,IdentityFile=$SSH/client" \
		-o StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null \
		"$(id -un)@127.0.0.1:$WORK/model" "$SMNT" 2>>"$SSH/log" ||
		{ echo "sshfs failed: $(tail -n 3 "$SSH/log")" >&2; return 1; }
	"$READALL" "$SMNT"
	fusermount3 -u "$SMNT"
}

raw_read() { # PROTOCOL DEPTH: the transport alone
	cpu_start
	reader "$BUILD/bench/sfs-rawread" --seed "127.0.0.1:$PORT" \
		--protocol "$1" --chunk 1M --depth "$2"
	cpu_stop
}
plain_read() { # DIR: readall alone (page cache, tmpfs)
	cpu_start
	reader "$READALL" "$1"
	cpu_stop
}

declare -A raw pull cold api
for p in ${PROTOS//,/ }; do
	echo "measuring $p..."
	# The transport's limit: the best of 8, 32 and 64 reads in flight
	# (sockets needs the deeper queue to reach what the API gets; the
	# API over tcp, since its pick stopped rescanning, read above the
	# best of 8 and 32).
	raw[$p]=
	for d in 8 32 64; do
		r=$(median_of raw_read "$p" "$d")
		if [ -z "${raw[$p]}" ] || awk -v a="$(col "$r" 1)" \
			-v b="$(col "${raw[$p]}" 1)" 'BEGIN { exit !(a > b) }'; then
			raw[$p]=$r
		fi
	done
	api[$p]=$(median_of api_load "$p")
	pull[$p]=$(median_of pull_it "$p")
	[ -n "${startup:-}" ] || startup=$(pull_start "$p")
	cold[$p]=$(median_of cold_read "$p")
done
first=${PROTOS%%,*}
echo "measuring prefetch, warm, tmpfs ($first)..."
prefetch=$(median_of time_prefetch "$first")
pull_place=$(median_of pull_it "$first" --in-place)
dio=$(median_of cold_dio "$first")
echo "measuring the FUSE ceiling..."
# A limit is the best of its runs: five of them (at least RUNS), so
# that one slow moment does not leave the mount's own reads above it.
CEIL_RUNS=$((RUNS > 5 ? RUNS : 5))
ceil=$(RUNS=$CEIL_RUNS median_of ceil_read)
ceil_dio=$(RUNS=$CEIL_RUNS median_of ceil_read -o direct_io)
after=$(median_of read_after_prefetch "$first")
mount_it "$first"
"$READALL" "$MNT/model" >/dev/null
warm=$(median_of plain_read "$MNT/model")
fusermount3 -u "$MNT"
tmpfs=$(median_of plain_read "$WORK/model")
tmpfs_write() {
	local t0 t1
	rm -f "$WORK/dd"
	t0=$(date +%s%N)
	dd if=/dev/zero of="$WORK/dd" bs=1M count=$((MODEL_BYTES / 1048576)) 2>/dev/null
	t1=$(date +%s%N)
	rm -f "$WORK/dd"
	rate $((MODEL_BYTES / 1048576 * 1048576)) $((t1 - t0))
}
twrite=$(median_of tmpfs_write)
echo "measuring sshfs..."
sshd_start
sshfs=$(median_of sshfs_read)

echo "measuring a cold read from a re-seeder ($first)..."
RMNT=$(mktemp -d /tmp/seedfs-bench-reseed.XXXXXX)
"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$RMNT" --protocol "$first" --reseed \
	--listen 127.0.0.1:0 --cache-size "$BIG_CACHE" --log-level warn
RESEED_PID=$(mount_pid "$RMNT")
"$SEEDFS" prefetch "$RMNT/model" 2>/dev/null
RADDR=$(awk '$1 == "reseed:" { print $2 }' "$RMNT/.seedfs/status")
[ -n "$RADDR" ] || { echo "bench: the re-seeder has no address" >&2; exit 1; }
cold_reseeder() {
	"$SEEDFS" mount --seed "$RADDR" "$MNT" --protocol "$first" --log-level warn \
		$MOUNT_OPTS
	cpu_start "$(mount_pid)"
	reader "$READALL" "$MNT/model"
	cpu_stop
	local sha
	sha=$(awk '$1 == "checked_sha256:" { print $2 }' "$MNT/.seedfs/status")
	fusermount3 -u "$MNT"
	[ "${sha:-0}" -gt 0 ] || { echo "bench: nothing checked against SHA-256" >&2; return 1; }
}
CPU_SEED=$RESEED_PID
r_cold=$(median_of cold_reseeder)
CPU_SEED=
fusermount3 -u "$RMNT"
rmdir "$RMNT"

echo "measuring the verified mode ($first)..."
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
FAST_PORT=$PORT
start_seed seed2 --sign-key "$WORK/sign.key"
SEED2_PID=$LAST_PID
CPU_SEED=$SEED2_PID
publish_sha=$PUBLISH_S
v_pull=$(median_of pull_it "$first" --trust-key "$WORK/sign.pub")
v_cold() {
	mount_it "$first" --trust-key "$WORK/sign.pub"
	cpu_start "$(mount_pid)"
	reader "$READALL" "$MNT/model"
	cpu_stop
	fusermount3 -u "$MNT"
}
v_cold=$(median_of v_cold)
PORT=$FAST_PORT
CPU_SEED=

bytes=$(col "$warm" 4)
row() {
	printf '| %-38s | %6s | %11s | %5s | %5s | %6s |\n' "$1" "$(col "$2" 1)" \
		"$(col "$2" 2)-$(col "$2" 3)" "$(col "$2" 5)" "$(col "$2" 6)" "$(col "$2" 7)"
}
ratio() { printf '| %-38s | %6s |\n' "$1" "$(div "$(col "$2" 1)" "$(col "$3" 1)")"; }
printf '\nseedfs bench: %s bytes, %s cores, %s; %s; %s\n\n' \
	"$bytes" "$(nproc)" "$(date -u +%Y-%m-%d)" "$WARMED" "$REPORTING_NOTE"
printf 'CPU-s per GB of each process on the path (all runs): mount daemon (or\nthe ceiling server), seed, reader (children included); - not measured.\n\n'
printf '| %-38s | %6s | %11s | %5s | %5s | %6s |\n' "read (median of $RUNS)" "GB/s" "range" "mount" "seed" "reader"
printf '|%s|%s|%s|%s|%s|%s|\n' "----------------------------------------" "--------" "-------------" "-------" "-------" "--------"
for p in ${PROTOS//,/ }; do
	row "$p: raw transport (no FUSE)" "${raw[$p]}"
	row "$p: API load (sfs_client_read)" "${api[$p]}"
	row "$p: seedfs pull (to tmpfs)" "${pull[$p]}"
	row "$p: mount, cold (fresh mount)" "${cold[$p]}"
done
row "$first: seedfs pull --in-place" "$pull_place"
row "$first: mount, cold, -o direct_io" "$dio"
row "FUSE ceiling, buffered (RAM, ours)" "$ceil"
row "FUSE ceiling, direct_io (RAM, ours)" "$ceil_dio"
row "$first: seedfs prefetch (fresh mount)" "$prefetch"
row "$first: mount, read after prefetch" "$after"
row "mount, warm (page cache)" "$warm"
row "tmpfs (same files)" "$tmpfs"
row "tmpfs write (dd, a new file)" "$twrite"
row "sshfs over loopback (fresh mount)" "$sshfs"
row "$first: mount, cold, from a re-seeder" "$r_cold"
row "$first: pull, sha256 + --trust-key" "$v_pull"
row "$first: mount, cold, sha256 + --trust-key" "$v_cold"
printf '(the FUSE ceilings: of %s runs)\n' "$CEIL_RUNS"
printf '\nseedfs pull start-up (exec to first byte, %s): %s s\n' "$first" "$startup"
printf 'seed publish (exec to ready, %s bytes): --digest xxh3 %s s; the default (xxh3 + sha256) %s s; signed %s s\n' \
	"$MODEL_BYTES" "$publish_fast" "$publish_default" "$publish_sha"
printf '\n| %-38s | %6s |\n' "ratio of medians" "x"
printf '|%s|%s|\n' "----------------------------------------" "--------"
for p in ${PROTOS//,/ }; do
	ratio "$p: API load / raw transport" "${api[$p]}" "${raw[$p]}"
	ratio "$p: pull / raw transport" "${pull[$p]}" "${raw[$p]}"
	ratio "$p: mount cold / pull" "${cold[$p]}" "${pull[$p]}"
	ratio "$p: mount cold / raw transport" "${cold[$p]}" "${raw[$p]}"
done
ratio "$first: prefetch / raw transport" "$prefetch" "${raw[$first]}"
ratio "mount warm / tmpfs" "$warm" "$tmpfs"
ratio "$first: pull / tmpfs write" "${pull[$first]}" "$twrite"
ratio "$first: mount cold / sshfs" "${cold[$first]}" "$sshfs"
ratio "$first: mount cold, re-seeder / seed" "$r_cold" "${cold[$first]}"
ratio "$first: pull, sha256 / xxh3 alone" "$v_pull" "${pull[$first]}"
ratio "$first: mount cold, sha256 / xxh3 alone" "$v_cold" "${cold[$first]}"

# The goals of the FUSE path: each against its limit in this run.  On
# one host the transport's copies and FUSE's share the CPUs: the cold
# read's limit is the two in series, 1/(1/raw + 1/ceiling).
series() { awk -v a="$(col "$1" 3)" -v b="$(col "$2" 3)" 'BEGIN { printf "%.2f", 1 / (1 / a + 1 / b) }'; }
# A limit must be above every path it bounds, in this run: a row that
# crosses FUSE beats the FUSE ceiling, or a transport's row beats its
# raw read, and the limit was measured low (a noisy moment): no verdict.
BELOW=()
# A limit is the best its runs did (the top of its range); a path, its
# median.
bound() { # NAME VALUE LIMIT-NAME LIMIT
	awk -v v="$(col "$2" 1)" -v l="$(col "$4" 3)" 'BEGIN { exit !(v > l) }' &&
		BELOW+=("$1 ($(col "$2" 1)) > $3 ($(col "$4" 3))")
	return 0
}
for p in ${PROTOS//,/ }; do
	for k in api pull cold; do
		v="${k}[$p]"
		bound "$p: $k" "${!v}" "$p: raw" "${raw[$p]}"
	done
	bound "$p: mount cold" "${cold[$p]}" "buffered ceiling" "$ceil"
done
bound "$first: prefetch" "$prefetch" "$first: raw" "${raw[$first]}"
bound "$first: pull --in-place" "$pull_place" "$first: raw" "${raw[$first]}"
bound "$first: cold direct_io" "$dio" "$first: raw" "${raw[$first]}"
bound "$first: cold direct_io" "$dio" "direct_io ceiling" "$ceil_dio"
bound "read after prefetch" "$after" "buffered ceiling" "$ceil"
bound "$first: mount cold, sha256" "$v_cold" "buffered ceiling" "$ceil"
bound "$first: mount cold, re-seeder" "$r_cold" "buffered ceiling" "$ceil"
goal() { # NAME VALUE LIMIT WANT
	local r
	r=$(div "$2" "$3")
	printf '| %-46s | %5s | %5s | %5s | %-6s |\n' "$1" "$2" "$3" "$r" \
		"$(if [ ${#BELOW[@]} -gt 0 ]; then echo "no verdict"; else
			awk -v r="$r" -v w="$4" 'BEGIN { print (r >= w ? "met" : "missed") " (>= " w ")" }'; fi)"
}
if [ ${#BELOW[@]} -gt 0 ]; then
	printf '\nlimit below a measured path: rerun (no verdict):\n'
	printf '  %s\n' "${BELOW[@]}"
fi
printf '\nGoals: a path'"'"'s median against its limit'"'"'s best run (the top of its range).\n'
printf '\n| %-46s | %5s | %5s | %5s | %-6s |\n' "goal" "GB/s" "limit" "x" "verdict"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------------------" "-------" "-------" "-------" "---------------"
for p in ${PROTOS//,/ }; do
	goal "$p: API load / raw transport" "$(col "${api[$p]}" 1)" "$(col "${raw[$p]}" 3)" 0.9
done
goal "$first: cold / series(raw, buffered ceiling)" "$(col "${cold[$first]}" 1)" \
	"$(series "${raw[$first]}" "$ceil")" 0.8
goal "$first: cold direct_io / series(raw, dio ceiling)" "$(col "$dio" 1)" \
	"$(series "${raw[$first]}" "$ceil_dio")" 0.8
goal "read after prefetch / buffered ceiling" "$(col "$after" 1)" "$(col "$ceil" 3)" 0.9
goal "$first: prefetch / raw transport" "$(col "$prefetch" 1)" "$(col "${raw[$first]}" 3)" 0.9
goal "$first: pull / raw transport" "$(col "${pull[$first]}" 1)" "$(col "${raw[$first]}" 3)" 0.8
goal "$first: pull --in-place / raw transport" "$(col "$pull_place" 1)" "$(col "${raw[$first]}" 3)" 0.8
# CPU: the mount daemon's cold path, CPU-s per GB (lower is better).
mcpu=$(col "${cold[$first]}" 5)
printf '| %-46s | %5s | %5s | %5s | %-6s |\n' "$first: mount daemon CPU-s/GB, cold (<= 0.6)" "-" "0.6" "$mcpu" \
	"$(awk -v c="$mcpu" 'BEGIN { print (c <= 0.6 ? "met" : "missed") " (<= 0.6)" }')"

# The plot: every median, one bar each.
{
	for p in ${PROTOS//,/ }; do
		printf '"%s raw"\t%s\n' "$p" "$(col "${raw[$p]}" 1)"
		printf '"%s API"\t%s\n' "$p" "$(col "${api[$p]}" 1)"
		printf '"%s pull"\t%s\n' "$p" "$(col "${pull[$p]}" 1)"
		printf '"%s cold"\t%s\n' "$p" "$(col "${cold[$p]}" 1)"
	done
	printf '"%s pull in place"\t%s\n' "$first" "$(col "$pull_place" 1)"
	printf '"%s cold dio"\t%s\n' "$first" "$(col "$dio" 1)"
	printf '"FUSE ceiling"\t%s\n' "$(col "$ceil" 1)"
	printf '"FUSE ceiling dio"\t%s\n' "$(col "$ceil_dio" 1)"
	printf '"%s prefetch"\t%s\n' "$first" "$(col "$prefetch" 1)"
	printf '"read after prefetch"\t%s\n' "$(col "$after" 1)"
	printf '"warm"\t%s\n' "$(col "$warm" 1)"
	printf '"tmpfs"\t%s\n' "$(col "$tmpfs" 1)"
	printf '"tmpfs write"\t%s\n' "$(col "$twrite" 1)"
	printf '"sshfs"\t%s\n' "$(col "$sshfs" 1)"
	printf '"%s pull sha256"\t%s\n' "$first" "$(col "$v_pull" 1)"
	printf '"%s cold sha256"\t%s\n' "$first" "$(col "$v_cold" 1)"
	printf '"%s cold re-seeder"\t%s\n' "$first" "$(col "$r_cold" 1)"
} >"$WORK/plot.dat"
title="seedfs make bench: $(numfmt --to=iec "$bytes")B model on loopback, $(nproc) cores, median of $RUNS, $(date -u +%Y-%m-%d)"
gnuplot <<-EOF
	set terminal pngcairo size 1100,560 font ",10"
	set output "$SRC/docs/bench.png"
	set title "$title"
	set ylabel "GB/s"
	set style fill solid 0.8 border -1
	set boxwidth 0.7
	set grid ytics
	set yrange [0:*]
	set xtics rotate by -35 left nomirror
	set bmargin 7
	plot "$WORK/plot.dat" using 0:2:xtic(1) with boxes lc rgb "#4477aa" notitle, \
	     "" using 0:2:(sprintf("%.2f", \$2)) with labels offset 0,0.8 notitle
EOF
printf '\nplot: %s\n' "$SRC/docs/bench.png"
