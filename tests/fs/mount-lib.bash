# Shared by tests/fs/*.sh (sourced; the .bash name keeps tests/run from
# running it as a test of its own).
#
# Each test mounts llmfs on the shared models, checks with plain shell tools
# and unmounts; the trap unmounts (lazily if need be) and kills the daemon
# even when a check fails half way.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
LLMFS=${LLMFS:-$BUILD/bin/llmfs}
RUN=${LLMFS_RUN:-$BUILD/bin/llmfs-run}
STORIES=$SHARED/models/stories260K.gguf
QWEN=$SHARED/models/tiny-qwen3-bpe16k-f16.gguf
MIXQ=$SHARED/models/tiny-qwen3-bpe16k-mixq.gguf

skip() { echo "skip: $*"; exit 77; }

[ -c /dev/fuse ] || skip "/dev/fuse is absent"
command -v fusermount3 >/dev/null || skip "fusermount3 is absent"
[ -x "$LLMFS" ] || skip "$LLMFS is not built"
[ -x "$RUN" ] || skip "$RUN is not built"
[ -f "$STORIES" ] || skip "$STORIES is absent"
[ "$(id -u)" = 0 ] || skip "needs root (allow_other, setpriv, unshare)"

WORK=$(mktemp -d /tmp/llmfs-test.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
PID=
FAILS=0
CHECKS=0

cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
	fi
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill "$PID" 2>/dev/null
		sleep 0.5
		kill -9 "$PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

ok() {
	CHECKS=$((CHECKS + 1))
	echo "ok - $*"
}

fail() {
	CHECKS=$((CHECKS + 1))
	FAILS=$((FAILS + 1))
	echo "not ok - $*"
}

# check DESC COMMAND...: passes when the command succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# same FILE1 FILE2 DESC: byte-identical files.
same() {
	if cmp -s "$1" "$2"; then
		ok "$3"
	else
		fail "$3"
		echo "  expected: $(head -c 300 "$1" | od -c | head -5)"
		echo "  got:      $(head -c 300 "$2" | od -c | head -5)"
	fi
}

# mount [llmfs options...]: models are given by the caller.
mount_llmfs() {
	"$LLMFS" -f "$@" "$MNT" >>"$WORK/daemon.log" 2>&1 &
	PID=$!
	for _ in $(seq 100); do
		mountpoint -q "$MNT" && [ -e "$MNT/models" ] && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "the mount did not come up:"; cat "$WORK/daemon.log"
	exit 1
}

# Wait until every model of the mount left the loading state.
wait_loaded() {
	for _ in $(seq 200); do
		grep -q ' loading' "$MNT/models" || return 0
		sleep 0.05
	done
	return 1
}

# unmount_llmfs: fusermount3 -u, and the daemon must exit 0.
unmount_llmfs() {
	local rc
	fusermount3 -u "$MNT" || { fail "fusermount3 -u"; return 1; }
	for _ in $(seq 100); do
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$PID"
	rc=$?
	PID=
	check "daemon exits 0 after unmount (got $rc)" [ "$rc" = 0 ]
}

finish() {
	if [ "$FAILS" != 0 ] && [ -s "$WORK/daemon.log" ]; then
		echo "daemon log:"
		tail -n 40 "$WORK/daemon.log" | sed 's/^/  /'
	fi
	echo "$CHECKS checks, $FAILS failed"
	[ "$FAILS" = 0 ]
	exit $?
}
