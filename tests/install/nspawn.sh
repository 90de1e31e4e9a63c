#!/usr/bin/env bash
# llmfs@.service under systemd itself (Documentation/install.md): a Debian
# 12 tree from debootstrap (systemd and the libraries llmfs links), with
# make install's files in /usr/local, booted by systemd-nspawn with systemd
# as PID 1. `systemctl start llmfs@mnt-llm` returns once the daemon said
# READY=1 with the mount up; the mount generates what llmfs-run does;
# `systemctl stop` ends it cleanly (exit 0, no mount); after a SIGKILL the
# unit restarts it (Restart=on-failure; ExecStopPost clears the dead mount)
# and the new mount generates again.
#
# This machine's PID 1 is no systemd and no D-Bus runs here, so nspawn
# cannot ask the host's systemd for a scope: --register=no --keep-unit.
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"
. "$(dirname "$0")/debian-lib.bash"
command -v systemd-nspawn >/dev/null ||
	skip "systemd-nspawn is absent (make deps: systemd-container)"
command -v nsenter >/dev/null || skip "nsenter is absent"

MACHINE=llmfs-test-$$
TREE=$WORK/tree
NSPAWN=
CT=

nspawn_cleanup() {
	if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
		[ -n "$CT" ] && nsenter -t "$CT" -a systemctl poweroff 2>/dev/null
		wait_for 60 gone "$NSPAWN"
		kill -9 "$NSPAWN" 2>/dev/null
	fi
	rmdir "/run/systemd/nspawn/propagate/$MACHINE" 2>/dev/null
	cleanup
}
trap nspawn_cleanup EXIT

debian_tree_tar || { fail "debootstrap made the Debian tree"; finish; }
mkdir -p "$TREE"
tar -C "$TREE" -xf "$DEBIAN_TAR"
make_install "$TREE" || exit 1
mkdir -p "$TREE/srv/models" "$TREE/etc/llmfs"
cp "$STORIES" "$TREE/srv/models/"
printf 'SOURCE=/srv/models\nOPTIONS=-o allow_other\n' > "$TREE/etc/llmfs/mnt-llm.conf"

systemd-nspawn -D "$TREE" -b --register=no --keep-unit --bind=/dev/fuse \
	--console=passive --machine="$MACHINE" >"$WORK/boot.log" 2>&1 &
NSPAWN=$!
# the container's PID 1: nspawn's child once it runs systemd, and its
# manager's socket, before systemctl can ask anything
ct_manager_up() {
	CT=$(pgrep -P "$NSPAWN" | head -n 1)
	[ -n "$CT" ] && [ "$(cat "/proc/$CT/comm" 2>/dev/null)" = systemd ] &&
		nsenter -t "$CT" -a test -S /run/systemd/private
}
wait_for 300 ct_manager_up
in_ct() { nsenter -t "$CT" -a "$@"; }
state=$(timeout 120 nsenter -t "$CT" -a systemctl is-system-running --wait)
echo "# the container's systemd: $state"
check "systemd is PID 1 in the container" [ "$(in_ct cat /proc/1/comm)" = systemd ]
check "it booted (is-system-running: running or degraded)" \
	eval '[ "$state" = running ] || [ "$state" = degraded ]'
check "the unit is found where make install put it" \
	eval 'in_ct systemctl cat llmfs@mnt-llm.service | grep -q "^ExecStart=/usr/local/bin/llmfs -f"'

N=24
P='Once upon a time'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null
generate() {
	in_ct sh -c "printf 'temperature=0\nmax_tokens=$N\n' > /mnt/llm/stories260k/config &&
		printf '%s' '$P' > /mnt/llm/stories260k/generate &&
		cat /mnt/llm/stories260k/generate"
}
prop() { in_ct systemctl show -P "$1" llmfs@mnt-llm; }

# start: Type=notify, so it returns after READY=1, with the mount there
check "systemctl start llmfs@mnt-llm (READY=1)" in_ct systemctl start llmfs@mnt-llm
check "the mount is up when start returns" in_ct mountpoint -q /mnt/llm
check "the unit's status is the daemon's STATUS=" \
	[ "$(prop StatusText)" = "mounted at /mnt/llm" ]
generate > "$WORK/got"
same "$WORK/expect" "$WORK/got" "generate through the unit's mount = llmfs-run"
check "llmfs's lines reach the journal" \
	eval 'in_ct journalctl -u llmfs@mnt-llm --no-pager | grep -q "Started llmfs@mnt-llm.service"'

# stop: SIGTERM, exit 0, the mount gone, and no restart
check "systemctl stop" in_ct systemctl stop llmfs@mnt-llm
check "stopped cleanly: inactive, exit status 0" \
	eval '[ "$(prop ActiveState)" = inactive ] && [ "$(prop ExecMainStatus)" = 0 ] &&
		[ "$(prop Result)" = success ]'
check "no mount left" eval '! in_ct mountpoint -q /mnt/llm'

# a crash: SIGKILL; Restart=on-failure brings it back with a new pid
in_ct systemctl start llmfs@mnt-llm
first=$(prop MainPID)
in_ct systemctl kill -s KILL llmfs@mnt-llm
restarted() {
	pid=$(prop MainPID)
	[ "$(prop ActiveState)" = active ] && [ "$pid" != 0 ] &&
		[ "$pid" != "$first" ]
}
wait_for 120 restarted
check "after SIGKILL the unit restarted it (NRestarts=1, pid $first -> $pid)" \
	eval '[ "$(prop NRestarts)" = 1 ] && [ "$pid" != "$first" ]'
generate > "$WORK/got2"
same "$WORK/expect" "$WORK/got2" "the restarted daemon's mount generates = llmfs-run"
in_ct systemctl stop llmfs@mnt-llm
in_ct journalctl -u llmfs@mnt-llm --no-pager > "$WORK/daemon.log" 2>&1

# power off: nspawn ends
in_ct systemctl poweroff
wait_for 300 gone "$NSPAWN"
check "the container powered off" eval '! kill -0 "$NSPAWN" 2>/dev/null'
NSPAWN=

finish
