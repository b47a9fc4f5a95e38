#!/usr/bin/env bash
# The systemd units (packaging/systemd/) pass systemd-analyze verify (a
# broken one fails it: the check can fail), and the Type=notify path: a
# seed and a mount tell $NOTIFY_SOCKET READY=1 with the ready line as
# STATUS once they serve, RELOADING=1 then READY=1 on SIGHUP, and
# STOPPING=1 when they stop.  --log-format json writes one JSON object a
# line, whatever bytes a message holds.
source "$(dirname "$0")/integration/lib.sh" "$1"
UNITS=$(cd "$(dirname "$0")/../packaging/systemd" && pwd)
command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed"

# verify checks that ExecStart exists: point it at this build.
mkdir -p "$WORK/units"
for u in "$UNITS"/*@.service; do
	n=$(basename "$u" .service)
	sed "s|/usr/bin/seedfs|$SEEDFS|" "$u" >"$WORK/units/${n}test.service"
	grep -q "^Type=notify$" "$u" || fail "$n: not Type=notify"
	grep -q "^LimitMEMLOCK=infinity$" "$u" || fail "$n: no LimitMEMLOCK=infinity"
done
grep -q '^ExecReload=/bin/kill -HUP $MAINPID$' "$UNITS/seedfs-seed@.service" || fail "seed: ExecReload"
# The mount's unit must not get a mount namespace of its own.
for o in ProtectSystem ProtectHome PrivateTmp PrivateMounts ProtectKernelModules \
	ProtectKernelTunables ProtectControlGroups ReadOnlyPaths ReadWritePaths; do
	refute --why "seedfs-mount@: $o hides the mount from the host" "^$o=" "$UNITS/seedfs-mount@.service"
done
out=$(cd "$WORK/units" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./*.service 2>&1) ||
	fail "systemd-analyze verify: $out"
bound verify_messages = 0 "$(grep -c . <<<"$out")" "systemd-analyze verify said: $out"
printf '[Service]\nType=notify\nExecStart=%s seed\nLimitMEMLOCK=unlimited-ish\n' "$SEEDFS" \
	>"$WORK/units/broken@test.service"
if (cd "$WORK/units" && systemd-analyze verify --man=no ./broken@test.service) >/dev/null 2>&1 &&
	[ -z "$(cd "$WORK/units" && systemd-analyze verify --man=no ./broken@test.service 2>&1)" ]; then
	fail "a broken unit passed verify: the check proves nothing"
fi
rm "$WORK/units/broken@test.service"
ok "systemd-analyze verify: $(cd "$WORK/units" && ls | tr '\n' ' ')clean; a broken unit is not"

# sd_notify.
NS_SOCK=$WORK/notify.sock
python3 "$(dirname "$0")/tools/notifysock.py" "$NS_SOCK" "$WORK/notes" >"$WORK/ns.out" &
PIDS+=($!)
for _ in $(seq 100); do grep -q listening "$WORK/ns.out" && break; sleep 0.05; done
wait_note() { # PATTERN
	for _ in $(seq 200); do grep -q -- "$1" "$WORK/notes" 2>/dev/null && return 0; sleep 0.05; done
	fail "no notification $1: $(cat "$WORK/notes" 2>/dev/null)"
}
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 1 >/dev/null
export NOTIFY_SOCKET=$NS_SOCK
start_seed "$MODEL"
wait_note "^READY=1 | STATUS=ready on port $SEED_PORT: model m generation 1 .*; unauthenticated$"
kill -HUP "$SEED_PID"
wait_note "^READY=1 | STATUS=nothing changed: generation 1 is still served$"
grep -B1 "nothing changed" "$WORK/notes" | head -1 | grep -q "^RELOADING=1 | MONOTONIC_USEC=[0-9]*$" ||
	fail "no RELOADING=1 before: $(cat "$WORK/notes")"
ok "seed: $(head -n 1 "$WORK/notes" | cut -c1-90)...; SIGHUP: RELOADING=1, then READY=1 again"
MNT=$WORK/mnt
mkdir -p "$MNT"
MOUNTS+=("$MNT")
: >"$WORK/notes"
"$SEEDFS" mount -f --seed "$HOST:$SEED_PORT" "$MNT" --log-file "$WORK/mount.log" &
MPID=$!
PIDS+=("$MPID")
wait_note "^READY=1 | STATUS=mounted m on $MNT$"
grep -q " $MNT fuse" /proc/mounts || fail "READY before the mount was up"
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "read"
fusermount3 -u "$MNT"
wait_note "^STOPPING=1$"
wait "$MPID" || fail "mount -f exited $?"
ok "mount -f: READY=1 with 'mounted m on ...' once it is up, STOPPING=1 when unmounted"
: >"$WORK/notes"
kill "$SEED_PID"
wait_note "^STOPPING=1$"
ok "seed: STOPPING=1 on SIGTERM"
unset NOTIFY_SOCKET

# --log-format json: names with a quote, a backslash, a control byte and
# a byte that is not UTF-8 are logged (the seed skips such a name).
ln -s /etc/hostname "$MODEL/$(printf 'q"b\\s\001c\377')"
SEED_LOG=json start_seed "$MODEL" --log-format json
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$MNT" --log-format json --log-file "$WORK/mj.log" ||
	fail "mount with json logs"
MOUNT_PID=$(sed -n 's/.*"pid":\([0-9]*\),.*"msg":"mounted .*/\1/p' "$WORK/mj.log" | tail -n 1)
[ -n "$MOUNT_PID" ] || fail "no pid in the json log: $(head -n 3 "$WORK/mj.log")"
PIDS+=("$MOUNT_PID")
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "read (json logs)"
unmount_check "$MNT" "$MOUNT_PID"
kill "$SEED_PID"
python3 - "$WORK/json.err" "$WORK/mj.log" >"$WORK/json.check" <<'PY' || fail "--log-format json: $(cat "$WORK/json.check"; head -n 3 "$WORK/json.err")"
import json, sys
seen = set()
bad = 0
for path in sys.argv[1:]:
    for line in open(path, "rb"):
        try:
            o = json.loads(line)
        except ValueError:
            bad += 1
            print("not one object: %r" % line[:120])
            continue
        assert set(o) == {"time", "program", "pid", "level", "subsystem", "msg"}, o
        assert o["level"] in ("err", "warn", "info", "debug"), o
        assert o["time"].endswith("Z") and isinstance(o["pid"], int), o
        seen.add(o["program"])
        if o["msg"].startswith("skipping "):
            assert 'q"b\\s\x01c\ufffd' in o["msg"], ascii(o["msg"])
            seen.add("odd")
assert seen >= {"seedfs-seed", "seedfs-mount", "odd"}, seen
print("not_objects %d" % bad)
PY
bound lines_not_one_object = 0 "$(sed -n 's/^not_objects //p' "$WORK/json.check")" "--log-format json: $(cat "$WORK/json.check")"
ok "--log-format json: every line of the seed and the mount is one object (time, program, pid, level, subsystem, msg); odd bytes escaped"
sanitizers_clean
