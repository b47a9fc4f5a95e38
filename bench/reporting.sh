# shellcheck shell=bash
# Sourced by the benches (bench/run.sh, fanout.sh, profile.sh,
# loaders.sh).
#
# This VM's kernel hands free memory back to its host (free page
# reporting, /sys/module/page_reporting): a page freed is reported at
# once (min_free_ms 0) and the host takes it away, so the next touch
# of it faults into the host, at about 250 MB/s.  A bench run creates
# pages (the reader's page cache, a pull's copy, a cache that grows):
# it would measure how much of the host's memory it got back.  Measured
# on 1 GB cold reads through a mount over tcp: the mount daemon used
# 0.45-1.77 CPU-s per GB with reporting on, 0.44-0.54 with it held off.
#
# reporting_hold: where the knobs exist and can be written (root on
# this VM; elsewhere they don't exist and nothing changes), report only
# pages free for 5 minutes, and only past a backlog no run reaches;
# prints what it did.  The values found are kept in REPORTING_FILE
# first, so that a bench killed before it put them back (SIGKILL, the
# OOM killer) leaves them for the next one to restore, not to take for
# the machine's own.  reporting_restore puts them back and removes the
# file (call it from the bench's cleanup).
REPORTING_DIR=/sys/module/page_reporting/parameters
REPORTING_FILE=/run/seedfs-bench-page-reporting
REPORTING_SAVED=${REPORTING_SAVED:-}
reporting_set() { # KNOB VALUE: 0 if written
	{ echo "$2" >"$REPORTING_DIR/$1"; } 2>/dev/null
}
reporting_hold() {
	local d=$REPORTING_DIR v
	REPORTING_NOTE="free page reporting: not on this machine"
	[ -w "$d/min_free_ms" ] && [ -w "$d/max_waiting_mib" ] || return 0
	if [ -s "$REPORTING_FILE" ]; then
		REPORTING_SAVED=$(cat "$REPORTING_FILE") # a bench before died
	else
		REPORTING_SAVED="$(cat "$d/min_free_ms") $(cat "$d/max_waiting_mib")"
		echo "$REPORTING_SAVED" >"$REPORTING_FILE" 2>/dev/null || true
	fi
	for v in 300000 100000; do reporting_set min_free_ms "$v" && break; done
	for v in 1000000 65536; do reporting_set max_waiting_mib "$v" && break; done
	REPORTING_NOTE="free page reporting held off while measuring (min_free_ms ${REPORTING_SAVED% *} -> $(cat "$d/min_free_ms"), max_waiting_mib ${REPORTING_SAVED#* } -> $(cat "$d/max_waiting_mib"); put back at the end)"
	echo "$REPORTING_NOTE"
}
reporting_restore() {
	[ -n "${REPORTING_SAVED:-}" ] || return 0
	reporting_set min_free_ms "${REPORTING_SAVED% *}" || true
	reporting_set max_waiting_mib "${REPORTING_SAVED#* }" || true
	rm -f "$REPORTING_FILE"
	REPORTING_SAVED=
}
