#!/usr/bin/env bash
# Shared helpers for integration tests on real mounts.
#   source lib.sh BUILD_DIR
# Everything a test starts is recorded and undone on exit, pass or fail:
# mounts are unmounted, processes (by PID) killed, the work dir removed.
set -euo pipefail

BUILD=$(cd "$1" && pwd)
SEEDFS=$BUILD/seedfs
GENMODEL=$BUILD/tests/genmodel
READCHECK=$BUILD/tests/readcheck
HTTPFILE=$BUILD/tests/httpfile
HOLDFILE=$BUILD/tests/holdfile
WORK=$(mktemp -d "${TMPDIR:-/tmp}/seedfs-test.XXXXXX")
# The address seeds listen on (the VM tier uses its soft-RoCE address).
HOST=${SEEDFS_TEST_HOST:-127.0.0.1}
# Where replicas that check signatures remember the generations they
# took (control/signstate.h): this test's, never /var/lib/seedfs.
export SEEDFS_STATE_DIR=$WORK/state
# Every process this test starts carries it: with pid_max at 32768 and
# tests side by side, a PID recorded here may be another test's process
# by the time it is signalled (running, below).
export SFS_TEST_RUN=$WORK
PIDS=()
MOUNT_PIDS=() # mount daemons (in PIDS too)
MOUNTS=()
NETNS=()
EXIT_HOOKS=()
FAIL_LAST=() # files fail() shows last, whole (their last 40 lines)

# Sanitizer reports of every process go to files we check at the end,
# in a directory that daemons a test runs as another user can write too
# (sticky, like /tmp; $WORK is root's alone).
SAN=$(mktemp -d "${TMPDIR:-/tmp}/seedfs-san.XXXXXX")
chmod 1777 "$SAN"
# SFS_ASAN_EXTRA: more options for a run by hand, e.g.
# fast_unwind_on_malloc=0 (a leak's whole stack through libraries built
# without frame pointers, libfabric's: the fast unwinder stops there).
export ASAN_OPTIONS="log_path=$SAN/asan:detect_leaks=1:abort_on_error=0${SFS_ASAN_EXTRA:+:$SFS_ASAN_EXTRA}"
export UBSAN_OPTIONS="log_path=$SAN/ubsan:print_stacktrace=1"
# The suppression files are read by every process, those run as another
# user too: copies beside the logs (the checkout may be 0700).
# (Not named tsan.* or asan.*: those are the reports.)
install -m 644 "$(dirname "${BASH_SOURCE[0]}")"/tsan.supp "$SAN/supp-tsan"
install -m 644 "$(dirname "${BASH_SOURCE[0]}")"/lsan.supp "$SAN/supp-lsan"
export TSAN_OPTIONS="log_path=$SAN/tsan:halt_on_error=0:second_deadlock_stack=1:suppressions=$SAN/supp-tsan"
export LSAN_OPTIONS="suppressions=$SAN/supp-lsan:print_suppressions=0"
# Which build this is (normal, asan or tsan): a test whose bound is
# about scheduling (a share, not a deadline) may say what it asserts
# under ThreadSanitizer's slowdown.
case $(ldd "$BUILD/seedfs" 2>/dev/null) in
*libtsan*) SFS_BUILD_KIND=tsan ;;
*libasan*) SFS_BUILD_KIND=asan ;;
*) SFS_BUILD_KIND=normal ;;
esac

# cleanup: on exit, pass or fail.  Every daemon still running is
# stopped the way an operator stops it (unmount, SIGTERM), so that the
# sanitizers' exit-time checks (LeakSanitizer) run in each of them; one
# that does not exit within STOP_S seconds is killed and fails a
# passing test, and so does any sanitizer report (a test that already
# failed keeps its own message).
STOP_S=${STOP_S:-20}
# await_exit PID...: wait up to STOP_S for them to exit; those still
# running are left in the array stuck.
await_exit() {
	local i p
	for i in $(seq $((STOP_S * 20))); do
		stuck=()
		for p in "$@"; do
			running "$p" && stuck+=("$p")
		done
		[ ${#stuck[@]} -eq 0 ] && return 0
		sleep 0.05
	done
}
# A command that fails outside the test's checks ends it (set -e): say
# which, with its status and where, rather than end without a word
# (ERR fires where set -e would exit; -E: inside functions too).
# (An EXIT trap of a test's own runs "trap - ERR" first, then calls
# cleanup with the test's status: cleanup exits with the status it is
# called with.)
ERR_AT=
on_err() {
	local i where=
	for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
		where+=" ${BASH_SOURCE[i]##*/}:${BASH_LINENO[i - 1]}"
	done
	# Only where set -e ends the test (not where a test turned it off
	# to see a status), and the first: what an EXIT trap runs after it
	# must not hide it.
	[[ $- == *e* ]] || return 0
	[ -n "$ERR_AT" ] || ERR_AT="$2 (status $1; at$where)"
}
set -E
trap 'on_err $? "$BASH_COMMAND"' ERR
cleanup() {
	local rc=$? m p i st left=() stuck=()
	set +e
	trap - ERR
	# (Not after fail(): in a $(...), its caller's assignment fails.)
	if [ "$rc" -ne 0 ] && [ -n "$ERR_AT" ] && [ ! -e "$WORK/.failed" ]; then
		echo "FAIL: a command failed outside the test's checks: $ERR_AT" >&2
		evidence
	fi
	for m in "${MOUNTS[@]}"; do
		if grep -q " $m fuse" /proc/mounts; then
			fusermount3 -u "$m" 2>/dev/null ||
				fusermount3 -u -z "$m" 2>/dev/null
		fi
	done
	# Unmounted daemons tear down on their own: a SIGTERM now would kill
	# them (the default action, once the FUSE loop has ended) before
	# their leak check.
	await_exit "${MOUNT_PIDS[@]}"
	for p in "${PIDS[@]}"; do
		running "$p" || continue
		# SIGCONT too: a process the test stopped (SIGSTOP) acts on
		# the SIGTERM only once it runs.
		kill -TERM "$p" 2>/dev/null && left+=("$p")
		kill -CONT "$p" 2>/dev/null
	done
	await_exit "${left[@]}"
	for p in "${stuck[@]}"; do
		echo "FAIL: process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)) still running ${STOP_S} s after SIGTERM:$(stuck_threads "$p")" >&2
		kill -9 "$p" 2>/dev/null
		[ "$rc" -ne 0 ] || rc=1
	done
	for p in "${left[@]}"; do
		# A child of ours stopped by the SIGTERM must not have crashed
		# (143: ended by the signal itself, as helpers without a
		# handler are).
		wait "$p" 2>/dev/null
		st=$?
		if [ "$st" -gt 128 ] && [ "$st" -ne 143 ] && [ "$st" -ne 127 ] &&
			[ "$rc" -eq 0 ]; then
			echo "FAIL: process $p ended with status $st (signal $((st - 128))) on SIGTERM" >&2
			rc=1
		fi
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
		# libfabric shm keeps a 16 MiB /dev/shm/PID:... per process;
		# one killed cannot unlink its own.  (Not those of a process
		# that has the PID now.)
		theirs "$p" || rm -f "/dev/shm/$p:"*
	done
	for p in "${NETNS[@]}"; do
		ip netns del "$p" 2>/dev/null
	done
	# A test's own last steps, once its daemons have gone (EXIT_HOOKS:
	# function names).
	for p in "${EXIT_HOOKS[@]}"; do
		"$p"
	done
	if [ "$rc" -eq 0 ] && ! sanitizers_quiet; then
		echo "FAIL: sanitizer reports (above), from the daemons' exit" >&2
		rc=1
	fi
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK" "$SAN"
	exit "$rc"
}
trap cleanup EXIT

fail() {
	trap - ERR # its own message: none from the exit's steps
	: >"$WORK/.failed" # (a fail in a $(...): the caller's ends too)
	echo "FAIL: $*" >&2
	evidence
	echo "FAIL: $*" >&2
	exit 1
}

# evidence: the last lines of the test's logs, sanitizer reports, and
# the files it named in FAIL_LAST.
evidence() {
	local f
	for f in "$WORK"/*.log "$WORK"/*.err "$WORK"/*.out; do
		[ -s "$f" ] || continue
		echo "--- $f (last lines)" >&2
		tail -n 15 "$f" >&2
	done
	for f in "$SAN"/asan.* "$SAN"/ubsan.* "$SAN"/tsan.*; do
		[ -e "$f" ] || continue
		echo "--- sanitizer report $f$(san_whose "$f")" >&2
		head -n 60 "$f" >&2
	done
	# What the test names as its failure's evidence, last: a long
	# output is cut in its middle, not at its end.
	for f in "${FAIL_LAST[@]}"; do
		[ -s "$f" ] || continue
		echo "--- $f (the failure's evidence, last 40 lines)" >&2
		tail -n 40 "$f" >&2
	done
}

ok() { echo "ok: $*"; }

# bound KEY OP LIMIT VALUE WHAT...: assert VALUE OP LIMIT (integers; OP
# one of <= >= < > =), and print "bound: KEY OP LIMIT: VALUE", which
# tests/claims_bounds.py compares with the bound docs/claims.md states
# for this test; fail naming WHAT otherwise (tests/bound.sh).
# shellcheck source=tests/bound.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bound.sh"

# python_for_build [PYTHON]: the command (words, to be used unquoted)
# that runs PYTHON (default Debian's python3) against this build's
# libseedfs.  In an ASan build,
# the sanitizer's runtime is preloaded (python3 is not built with it)
# and Python's own allocations left at exit are not leak-checked (the
# interpreter frees little on purpose); memory errors are still
# reported.  The daemons the test starts keep their leak checks.
python_for_build() {
	local rt py=${1:-/usr/bin/python3}
	if rt=$(ldd "$SEEDFS" | awk '$1 ~ /^libasan\.so/ { print $3 }') && [ -n "$rt" ]; then
		echo "env LD_PRELOAD=$rt ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} $py"
	else
		echo "$py"
	fi
}

# The venv packaging/deps.sh makes for the Python loaders (safetensors,
# transformers; packaging/python-loaders.txt).
PYENV=${SEEDFS_PYENV:-/opt/seedfs/pyenv}

# refute [--empty-ok] [--why TEXT] [GREP_OPTS...] PATTERN FILE...: fail
# if PATTERN matches a line of a FILE, and fail too if a FILE is missing
# or (unless --empty-ok: an error stream that is rightly empty) empty,
# or cannot be read: a bare `! grep` passes on all three.
refute() {
	local empty_ok=0 why="" opts=() pat f st hit
	while [ $# -gt 0 ]; do
		case $1 in
		--empty-ok) empty_ok=1 ;;
		--why) why="$2: " && shift ;;
		--) shift && break ;;
		-*) opts+=("$1") ;;
		*) break ;;
		esac
		shift
	done
	pat=$1
	shift
	[ $# -gt 0 ] || fail "refute '$pat': no file named"
	for f in "$@"; do
		[ -f "$f" ] || fail "${why}refute '$pat': $f is missing"
		# Read, not stat: FUSE's .seedfs files and /proc's say size 0.
		[ $empty_ok = 1 ] || [ "$(head -c 1 -- "$f" | wc -c)" = 1 ] ||
			fail "${why}refute '$pat': $f is empty"
		st=0
		hit=$(grep "${opts[@]}" -m 3 -- "$pat" "$f") || st=$?
		[ $st = 0 ] && fail "${why}'$pat' in $f: $hit"
		[ $st = 1 ] || fail "${why}refute '$pat': grep could not read $f"
	done
	return 0
}

# The seed's ready line, exactly (its usage text has the word "ready"
# too): seed_ready FILE succeeds once FILE holds it; seed_port FILE
# prints the port it names.
SEED_READY_RE='^seedfs seed: ready on (https://)?[^ ]*:[0-9]+: '
seed_ready() { grep -qE "$SEED_READY_RE" "$1" 2>/dev/null; }
seed_port() {
	grep -E "$SEED_READY_RE" "$1" | head -n 1 | sed -n 's/^seedfs seed: ready on [^ ]*:\([0-9]*\): .*/\1/p'
}

# seed_stat FILE PORT KEY [WORD]: word WORD (2: the first after the key)
# of KEY's line in the block of seed $HOST:PORT of a status FILE
# (.seedfs/status, or the engine API's): seed_bytes, seed_pulls, ...
seed_stat() {
	awk -v s="seed: $HOST:$2 " -v k="$3:" -v w="${4:-2}" '
		index($0, s) == 1 { on = 1; next }
		/^seed: / { on = 0 }
		on && $1 == k { print $w }' "$1"
}

# status_val FILE KEY: the number after "KEY: " (the first such line)
status_val() { awk -v k="$2:" '$1 == k { print $2; exit }' "$1"; }

# now_ms: monotonic-enough wall clock in milliseconds
now_ms() { date +%s%3N; }

# flip_byte FILE OFFSET: the byte at OFFSET of FILE inverted, in place
# (the same inode); a negative OFFSET counts from the end.
flip_byte() {
	python3 - "$1" "$2" <<'PY'
import os, sys
at = int(sys.argv[2])
with open(sys.argv[1], "r+b") as f:
    f.seek(at if at >= 0 else os.path.getsize(sys.argv[1]) + at)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0xff]))
PY
}

# seed_published LOG N [MODEL]: wait (10 s) until the seed whose output
# is $WORK/LOG.out published generation N of MODEL (m).
seed_published() {
	local _ want="^seedfs seed: published model ${3:-m} generation $2 "
	for _ in $(seq 200); do
		grep -q "$want" "$WORK/$1.out" && return 0
		sleep 0.05
	done
	fail "no generation $2 of ${3:-m} from $1 in 10 s: $(tail -3 "$WORK/$1.err")"
}

# start_seed DIR [seed args...]: sets SEED_PID and SEED_PORT.  The
# command runs under ${SEED_WRAP[@]} (a network namespace) if set.
# SEED_LOG names its output files ($WORK/$SEED_LOG.out and .err).
SEED_WRAP=()
SEED_LOG=seed
start_seed() {
	local dir=$1 out=$WORK/$SEED_LOG.out err=$WORK/$SEED_LOG.err
	shift
	"${SEED_WRAP[@]}" "$SEEDFS" seed --model-dir "$dir" --listen "$HOST:0" "$@" \
		>"$out" 2>"$err" &
	SEED_PID=$!
	PIDS+=("$SEED_PID")
	local i
	for i in $(seq 1200); do
		seed_ready "$out" && break
		kill -0 "$SEED_PID" 2>/dev/null || fail "seed exited: $(cat "$err")"
		sleep 0.05
	done
	SEED_PORT=$(seed_port "$out" || true)
	[ -n "$SEED_PORT" ] || fail "seed did not report ready in 60 s: $(cat "$out")"
}

# mount_seed MNT [mount args...]: background mount; sets MOUNT_PID.
# Its sources: MOUNT_REG (a --registry URL) if set, else MOUNT_SEEDS,
# else the last seed started.  MOUNT_LOG names its log files
# ($WORK/$MOUNT_LOG.log and .err; default mount).
MOUNT_LOG=mount
# The mount runs under ${MOUNT_WRAP[@]} when set (nsenter --net=...: a
# network namespace, the mount namespace kept).
MOUNT_WRAP=()
mount_seed() {
	local mnt=$1 src log=$WORK/$MOUNT_LOG.log
	shift
	mkdir -p "$mnt"
	MOUNTS+=("$mnt")
	: >"$log"
	if [ -n "${MOUNT_REG:-}" ]; then
		src=(--registry "$MOUNT_REG")
	else
		src=(--seed "${MOUNT_SEEDS:-$HOST:$SEED_PORT}")
	fi
	"${MOUNT_WRAP[@]}" "$SEEDFS" mount "${src[@]}" "$mnt" \
		--log-file "$log" "$@" 2>"$WORK/$MOUNT_LOG.err" ||
		fail "mount failed: $(cat "$WORK/$MOUNT_LOG.err")"
	grep -q " $mnt fuse" /proc/mounts || fail "not in /proc/mounts"
	MOUNT_PID=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' \
		"$log" | tail -n 1)
	[ -n "$MOUNT_PID" ] || fail "no pid in the mount log"
	PIDS+=("$MOUNT_PID")
	MOUNT_PIDS+=("$MOUNT_PID")
}

# running PID: the process exists, has not exited (every thread), and
# is this test's (not theirs, below).  A daemonized mount's parent is
# init, which may reap it seconds later (this VM's init does, about
# every 2 s): a zombie has exited, kill -0 still succeeds on it.
running() {
	local st
	# State and Threads from one read: a zombie leader whose other
	# threads still run (they hold its files) has not exited yet.
	st=$(awk '$1 == "State:" { s = $2 } $1 == "Threads:" { t = $2 }
		$1 == "PPid:" { p = $2 }
		END { if (s != "") print s, t, p }' "/proc/$1/status" 2>/dev/null) || return 1
	case $st in
	"") return 1 ;;
	Z\ 1\ * | Z\ 0\ * | X\ *) return 1 ;;
	esac
	[ "${st##* }" = "$$" ] || ! theirs "$1"
}

# theirs PID: a process another started has PID now: not a child of
# this shell, and its environment (readable) lacks this test's
# SFS_TEST_RUN.  One whose environment cannot be read (a zombie leader
# whose threads run; a daemon that is not dumpable, to a reader other
# than root) is not known to be another's: 1.
theirs() {
	local ppid m=0
	ppid=$(awk '$1 == "PPid:" { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
	[ -n "$ppid" ] && [ "$ppid" != "$$" ] || return 1
	grep -qzxF "SFS_TEST_RUN=$WORK" "/proc/$1/environ" 2>/dev/null || m=$?
	[ "$m" -eq 1 ]
}

# stuck_threads PID: where each thread of PID waits (for a failure
# message): name and kernel wait channel, and a backtrace if gdb exists.
stuck_threads() {
	local t
	for t in /proc/"$1"/task/*; do
		printf '\n  %s: %s (%s)' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
	done
	if command -v gdb >/dev/null; then
		printf '\n'
		timeout 20 gdb -batch -p "$1" -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^(Thread|#)' | head -n 150
	fi
}

# ns_holders MNT: processes whose mount namespace still has MNT (a copy
# made by unshare or `ip netns exec` while it was mounted keeps the
# FUSE connection, and so its daemon, alive), for a failure message
ns_holders() {
	local f p
	for f in /proc/[0-9]*/mountinfo; do
		grep -qF " $1 " "$f" 2>/dev/null || continue
		p=${f#/proc/}
		p=${p%/mountinfo}
		printf '; held by pid %s in mount namespace %s: %s' "$p" \
			"$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" \
			"$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-160)"
	done
	return 0
}

# unmount_check MNT PID: unmount, the daemon exits, nothing is left
unmount_check() {
	local mnt=$1 pid=$2 i
	fusermount3 -u "$mnt" || fail "fusermount3 -u $mnt"
	for i in $(seq 100); do
		running "$pid" || break
		sleep 0.05
	done
	running "$pid" && fail "mount daemon $pid still running 5 s after the unmount$(ns_holders "$mnt"): $(stuck_threads "$pid")"
	grep -q " $mnt fuse" /proc/mounts && fail "$mnt still mounted"
	[ -z "$(ls -A "$mnt")" ] || fail "$mnt not empty after unmount"
	return 0
}

# san_whose REPORT: which of the test's logs the reporting process
# (the PID its name ends with) wrote lines to ("seedfs-mount[PID]"): a
# seed's, a mount's, a tool's.
san_whose() {
	local pid=${1##*.} logs
	logs=$(grep -rlsF --include='*.log' --include='*.err' --include='*.out' \
		"[$pid]" "$WORK" 2>/dev/null | head -n 3 | tr '\n' ' ' || true)
	[ -z "$logs" ] || echo " (process $pid logged to: $logs)"
}

# sanitizers_quiet: print every sanitizer report any process wrote;
# true when there is none
sanitizers_quiet() {
	local f
	SAN_REPORTS=0
	for f in "$SAN"/asan.* "$SAN"/ubsan.* "$SAN"/tsan.*; do
		[ -e "$f" ] || continue
		echo "--- sanitizer report $f$(san_whose "$f")" >&2
		head -n 80 "$f" >&2
		SAN_REPORTS=$((SAN_REPORTS + 1))
	done
	[ $SAN_REPORTS -eq 0 ]
}

# sanitizers_clean: fail if any process wrote a sanitizer report (the
# exit trap checks again once every daemon has stopped)
sanitizers_clean() {
	sanitizers_quiet || true
	bound sanitizer_reports = 0 "$SAN_REPORTS" "sanitizer reports (above)"
}

# netns_setup: a network namespace for the seed, joined to this one by
# a veth pair (HOST_IP here, NS_IP there); removed on exit.  Sets NS,
# VETH (our end), NS_VETH (its end), HOST_IP, NS_IP.
# routed ADDR: a route other than the default reaches ADDR already.
routed() {
	[ -n "$(ip -4 route show match "$1" | grep -v '^default ' || true)" ]
}

netns_setup() {
	[ "$(id -u)" = 0 ] || { echo "skip: network namespaces need root"; exit 77; }
	NS=sfs$$
	VETH=sfsa$$
	NS_VETH=sfsb$$
	# A /24 of its own: 15 bits of the PID (tests run side by side; two
	# at once never share them where pid_max is 32768), moved on while
	# a route reaches it already (this host's network, or a test's
	# beside this one where pid_max is larger).
	local net= k
	for k in $(seq 0 31); do
		net="10.$((128 + (($$ >> 8) + k * 4) % 128)).$(($$ % 256))"
		routed "$net.1" || break
		net=
	done
	[ -n "$net" ] ||
		fail "netns_setup: no 10.128-255.x.0/24 free of routes here: $(ip -4 route)"
	HOST_IP=$net.1
	NS_IP=$net.2
	ip netns add "$NS" || fail "ip netns add"
	NETNS+=("$NS")
	ip link add "$VETH" type veth peer name "$NS_VETH" || fail "ip link add veth"
	ip link set "$NS_VETH" netns "$NS"
	ip addr add "$HOST_IP/24" dev "$VETH"
	ip link set "$VETH" up
	ip -n "$NS" addr add "$NS_IP/24" dev "$NS_VETH"
	ip -n "$NS" link set "$NS_VETH" up
	ip -n "$NS" link set lo up
}

# start_seed_ns DIR [seed args...]: start_seed inside $NS on $NS_IP.
# nsenter --net, not `ip netns exec`: that gives the seed a mount
# namespace of its own, a copy of the mount table (/ is not shared
# here) that holds every FUSE mount there at the time, of this test and
# of any other running beside it, until the seed exits: an unmount then
# leaves its daemon running.  nsenter execs: SEED_PID is the seed's.
start_seed_ns() {
	SEED_WRAP=(nsenter "--net=/run/netns/$NS")
	start_seed "$@" --listen "$NS_IP:0"
	SEED_WRAP=()
}

# link DEV-SPEC: replace the qdiscs of both ends.  "" removes them;
# otherwise the words are a tc qdisc, applied on both ends.
link() {
	tc qdisc del dev "$VETH" root 2>/dev/null || true
	ip netns exec "$NS" tc qdisc del dev "$NS_VETH" root 2>/dev/null || true
	[ -z "$*" ] && return 0
	tc qdisc add dev "$VETH" root "$@" || fail "tc $*"
	ip netns exec "$NS" tc qdisc add dev "$NS_VETH" root "$@" || fail "tc $* (ns)"
}

# free_port [ADDR]: a TCP port free on ADDR (127.0.0.1) now (another
# process may take it before we bind it: start_etcd retries when that
# happens), outside the kernel's range for ports bound to 0
# (ip_local_port_range): a process of a test running beside this one
# that binds port 0 never gets it, so a daemon restarted on the port it
# had (etcd, a seed) finds it free.  (From 21000 up: announce_flood
# names 20000-20003 as dead re-seeders.)
free_port() {
	python3 - "${1:-127.0.0.1}" <<'PY'
import random, socket, sys
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
pool = list(range(21000, lo)) + list(range(max(hi + 1, 21000), 65536))
for p in random.sample(pool, min(len(pool), 200)):
    s = socket.socket()
    try:
        s.bind((sys.argv[1], p))
    except OSError:
        continue
    print(p)
    sys.exit(0)
s = socket.socket()
s.bind((sys.argv[1], 0))
print("free_port: no port outside %d-%d free: %d, which a bind to 0 "
      "elsewhere could take" % (lo, hi, s.getsockname()[1]), file=sys.stderr)
print(s.getsockname()[1])
PY
}

# drop_cached FILE...: the kernel's cached pages of FILEs (under a
# mount: the next read goes to the daemon), and no one else's
drop_cached() {
	local f
	for f in "$@"; do
		dd if="$f" iflag=nocache count=0 status=none || fail "drop the cache of $f"
	done
}

# closed_port: sets CLOSED_PORT, a loopback port that refuses
# connections for as long as the test runs (bound by a process of ours
# that never listens, so nothing else can take it).
closed_port() {
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True); sys.stdout.close(); time.sleep(600)' \
		>"$WORK/closed_port.out" &
	PIDS+=("$!")
	local i
	for i in $(seq 200); do
		CLOSED_PORT=$(cat "$WORK/closed_port.out" 2>/dev/null || true)
		[ -n "$CLOSED_PORT" ] && return 0
		sleep 0.05
	done
	fail "closed_port: no port"
}

# etcd_launch NAME CLIENT_PORT PEER_PORT CLUSTER [etcd args...]: start
# one etcd member (sets ETCD_PID) and wait until it listens on both
# ports.  Returns 75 if a port was taken by then (etcd says "address
# already in use" and exits), fails on any other exit.
etcd_launch() {
	local name=$1 cport=$2 pport=$3 cluster=$4 scheme=${ETCD_SCHEME:-http} i
	shift 4
	etcd --name "$name" --data-dir "$WORK/etcd-$name" \
		--listen-client-urls "$scheme://127.0.0.1:$cport" \
		--advertise-client-urls "$scheme://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "$cluster" --initial-cluster-state "${ETCD_STATE:-new}" \
		--log-level error "$@" >"$WORK/etcd-$name.out" 2>"$WORK/etcd-$name.err" &
	ETCD_PID=$!
	PIDS+=("$ETCD_PID")
	for i in $(seq 400); do
		if ! kill -0 "$ETCD_PID" 2>/dev/null; then
			wait "$ETCD_PID" 2>/dev/null || true
			if grep -q "bind: address already in use" "$WORK/etcd-$name.err"; then
				echo "etcd $name: $(grep -o 'listen tcp [^ ]*' "$WORK/etcd-$name.err" | head -n 1) was taken" >&2
				rm -rf "$WORK/etcd-$name"
				return 75
			fi
			fail "etcd $name exited: $(tail -n 5 "$WORK/etcd-$name.err")"
		fi
		[ "$(ss -Hltnp "( sport = :$cport or sport = :$pport )" |
			grep -c "pid=$ETCD_PID,")" -ge 2 ] && return 0
		sleep 0.05
	done
	fail "etcd $name did not listen on $cport and $pport in 20 s"
}

# etcd_wait NAME CLIENT_PORT: until the member answers (a cluster
# member's status waits for its quorum).
etcd_wait() {
	local name=$1 cport=$2 scheme=${ETCD_SCHEME:-http} i
	for i in $(seq 200); do
		curl -s -m 1 ${ETCD_CURL_OPTS:-} -X POST "$scheme://127.0.0.1:$cport/v3/maintenance/status" \
			-d '{}' 2>/dev/null | grep -q '"version"' && return 0
		kill -0 "$ETCD_PID" 2>/dev/null || fail "etcd $name exited: $(tail -n 5 "$WORK/etcd-$name.err")"
		sleep 0.05
	done
	fail "etcd $name did not answer"
}

# start_etcd NAME [etcd args...]: a single new member of Debian's etcd
# on loopback ports it picks, data in $WORK/etcd-NAME; waits until it
# answers.  A port taken between free_port and etcd's bind: new ports,
# up to 5 times.  Sets ETCD_PID, ETCD_CPORT, ETCD_PPORT.
start_etcd() {
	local name=$1 try st
	shift
	for try in 1 2 3 4 5; do
		ETCD_CPORT=$(free_port)
		ETCD_PPORT=$(free_port)
		[ "$ETCD_CPORT" != "$ETCD_PPORT" ] || continue
		st=0
		ETCD_STATE=new etcd_launch "$name" "$ETCD_CPORT" "$ETCD_PPORT" \
			"$name=http://127.0.0.1:$ETCD_PPORT" "$@" || st=$?
		[ $st = 0 ] && { etcd_wait "$name" "$ETCD_CPORT"; return 0; }
	done
	fail "etcd $name: its ports were taken 5 times"
}

# restart_etcd NAME [etcd args...]: NAME again, its data kept, on the
# same ports (its clients know them: a port taken meanwhile fails).
restart_etcd() {
	local name=$1
	shift
	ETCD_STATE=existing etcd_launch "$name" "$ETCD_CPORT" "$ETCD_PPORT" \
		"$name=http://127.0.0.1:$ETCD_PPORT" "$@" ||
		fail "etcd $name: port $ETCD_CPORT or $ETCD_PPORT was taken while it was down"
	etcd_wait "$name" "$ETCD_CPORT"
}

# start_etcd_cluster N PREFIX: N new members PREFIX1..PREFIXN; a port
# taken: all of them again on new ports, up to 5 times.  Sets ETCD_PIDS
# and ETCD_CPORTS (indexed 1..N) and ETCD_EPS (their client endpoints).
start_etcd_cluster() {
	local n=$1 pre=$2 try i st cluster
	local -a pps
	for try in 1 2 3 4 5; do
		ETCD_PIDS=() ETCD_CPORTS=() cluster="" st=0
		for i in $(seq "$n"); do
			ETCD_CPORTS[$i]=$(free_port)
			pps[$i]=$(free_port)
			cluster+="${cluster:+,}$pre$i=http://127.0.0.1:${pps[$i]}"
		done
		for i in $(seq "$n"); do
			ETCD_STATE=new etcd_launch "$pre$i" "${ETCD_CPORTS[$i]}" "${pps[$i]}" "$cluster" || st=$?
			[ $st = 0 ] || break
			ETCD_PIDS[$i]=$ETCD_PID
		done
		if [ $st = 0 ]; then
			ETCD_EPS=""
			for i in $(seq "$n"); do ETCD_EPS+="${ETCD_EPS:+,}127.0.0.1:${ETCD_CPORTS[$i]}"; done
			return 0
		fi
		for i in "${ETCD_PIDS[@]}"; do kill -9 "$i" && wait "$i" 2>/dev/null || true; done
		for i in $(seq "$n"); do rm -rf "$WORK/etcd-$pre$i"; done
	done
	fail "etcd cluster $pre: its ports were taken 5 times"
}

# etcdctl_at ENDPOINTS ARGS...: etcdctl v3 against our etcd
etcdctl_at() {
	local ep=$1
	shift
	ETCDCTL_API=3 etcdctl --endpoints "$ep" --dial-timeout 2s --command-timeout 3s "$@"
}
