#!/usr/bin/env bash
# llmfs@.service without systemd (no systemd runs here): its ExecStart, as
# installed, run the way systemd runs a Type=notify unit, with a
# NOTIFY_SOCKET that records who sent what. READY=1 must come from the main
# pid once the mount is up; `systemctl stop` (SIGTERM) must end a
# generation in flight, send STOPPING=1 and exit 0 (so Restart=on-failure
# leaves it stopped); after a crash (SIGKILL) the unit's ExecStopPost must
# clear the dead mount so that the restart mounts again.
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"
command -v python3 >/dev/null || skip "python3 is absent"

D=$WORK/root
make_install "$D" || exit 1
U=$D/usr/local/lib/systemd/system/llmfs@.service
# The unit's command lines with its specifiers and variables filled in as
# systemd would for llmfs@<escaped $MNT> with the unit's default OPTIONS.
OPTIONS=$(sed -n 's/^Environment="OPTIONS=\(.*\)"$/\1/p' "$U")
check "the unit's default OPTIONS are '-o allow_other' (got '$OPTIONS')" \
	[ "$OPTIONS" = "-o allow_other" ]
unit_line() {
	sed -n "s/^$1=-\{0,1\}//p" "$U" | sed -e "s|%f|$MNT|g" \
		-e "s|\${SOURCE}|$STORIES|g" -e "s|\\\$OPTIONS|$OPTIONS|g" |
		sed "s|^/usr/local/bin/|$D/usr/local/bin/|"
}
START=$(unit_line ExecStart)
STOPPOST=$(unit_line ExecStopPost)
echo "# ExecStart: $START"
echo "# ExecStopPost: $STOPPOST"
check "the unit is Type=notify" grep -qx 'Type=notify' "$U"
check "the unit restarts on failure" grep -qx 'Restart=on-failure' "$U"

# The service manager's end of NOTIFY_SOCKET: one line per message field,
# "PID MOUNTED FIELD", MOUNTED saying whether the mount was up on arrival.
cat > "$WORK/notify.py" <<'PY'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(sys.argv[1])
out = open(sys.argv[2], "a", buffering=1)
while True:
    msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    pid = 0
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", data[:12])[0]
    up = int(os.path.ismount(sys.argv[3]))
    for field in msg.decode().split("\n"):
        out.write(f"{pid} {up} {field}\n")
PY
python3 "$WORK/notify.py" "$WORK/notify" "$WORK/notes" "$MNT" &
RECEIVER=$!
trap 'kill $RECEIVER 2>/dev/null; cleanup' EXIT
wait_for 60 test -S "$WORK/notify" || fail "the notify socket is there"
touch "$WORK/notes"

# start: ExecStart with NOTIFY_SOCKET, as systemd runs it ($START unquoted:
# systemd splits the line on spaces too).
start_unit() {
	NOTIFY_SOCKET=$WORK/notify $START >>"$WORK/daemon.log" 2>&1 &
	PID=$!
	wait_for 60 grep -q "^$PID [01] READY=1$" "$WORK/notes"
}
# stop_unit: the daemon exits within 60 s (killed then); its exit status.
stop_unit() {
	if wait_for 60 gone "$PID"; then
		wait "$PID"
	else
		kill -9 "$PID"
		wait "$PID"
		echo "still running 60 s after SIGTERM"
		return 124
	fi
}
check "ExecStart reports READY=1" start_unit
check "READY=1 came from the main pid ($PID) with the mount already up" \
	grep -qx "$PID 1 READY=1" "$WORK/notes"
check "STATUS= names the mount point" grep -qx "$PID 1 STATUS=mounted at $MNT" "$WORK/notes"
check "the mount is usable" grep -q '^stories260k ' "$MNT/models"

# systemctl stop: SIGTERM with a generation in flight.
wait_loaded
printf 'temperature=0\nmax_tokens=100000\n' > "$MNT/stories260k/config"
printf 'Once upon a time' > "$MNT/stories260k/generate"
cat "$MNT/stories260k/generate" > "$WORK/reader" 2>&1 &
reader=$!
check "a generation is in flight" wait_for 60 test -s "$WORK/reader"
kill -TERM "$PID"
check "SIGTERM: the reader got end-of-file" wait_for 60 gone "$reader"
kill -9 "$reader" 2>/dev/null
wait "$reader"
stop_unit
rc=$?
check "SIGTERM: llmfs exits 0, a clean stop for Restart=on-failure (got $rc)" [ "$rc" = 0 ]
check "SIGTERM: STOPPING=1 from the main pid" grep -q "^$PID [01] STOPPING=1$" "$WORK/notes"
check "SIGTERM: the mount is gone" bash -c "! mountpoint -q '$MNT'"
PID=

# A crash: SIGKILL leaves a dead mount; ExecStopPost clears it, the
# restart mounts again.
check "restart after a clean stop" start_unit
kill -KILL "$PID"
stop_unit 2>/dev/null
mounted() { awk -v m="$MNT" '$2 == m' /proc/self/mounts | grep -q .; }
check "after SIGKILL the mount is left behind" mounted
check "... dead: 'Transport endpoint is not connected'" \
	bash -c "ls '$MNT' 2>&1 | grep -q 'not connected'"
$STOPPOST
check "ExecStopPost clears the dead mount" bash -c "! awk -v m='$MNT' '\$2 == m' /proc/self/mounts | grep -q ."
check "Restart=on-failure: ExecStart mounts again" start_unit
check "... and serves" grep -q '^stories260k ' "$MNT/models"
kill -TERM "$PID"
stop_unit
check "the last stop exits 0" [ "$?" = 0 ]
PID=
kill "$RECEIVER" 2>/dev/null
wait "$RECEIVER" 2>/dev/null
finish
