# Shared by tests/fs/*.sh (sourced; the .bash name keeps tests/run from
# running it as a test of its own).
#
# Each test mounts llmfs on the shared models, checks with plain shell tools
# and unmounts; the trap unmounts (lazily if need be) and kills the daemon
# even when a check fails half way (tests/run's time limit included: its
# SIGTERM runs the trap).
#
# Waiting is polling on state with a deadline (wait_for), never a sleep
# that hopes something happened meanwhile; every wait is bounded, so a
# regression fails the test instead of hanging it. A test with no check,
# or one that compares with an empty expectation, fails.

set -u
# Each test's mounts live in a mount namespace of its own. A namespace made
# elsewhere meanwhile (another checkout's test, a container, a machine)
# copies every mount of the namespace it is made from: a copy of ours
# would keep the FUSE connection alive after our unmount, and the daemon
# would wait for that copy to go (make check hung on it when the tests of
# several checkouts ran at once).
if [ -z "${LLMFS_TEST_NS:-}" ] && unshare -m --propagation private true 2>/dev/null; then
	LLMFS_TEST_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
# The daemon names a file by its real path (the models file's source
# column): so do we, for a ../shared that is a symlink (CI's is).
SHARED=$(cd "$SHARED" 2>/dev/null && pwd -P || echo "$SHARED")
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

WORK=$(mktemp -d "${TMPDIR:-/tmp}/llmfs-test.XXXXXX")
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
		wait_for 5 gone "$PID" || kill -9 "$PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

# wait_for SECONDS COMMAND...: polls COMMAND every 20 ms until it succeeds
# (0) or SECONDS have passed (1). The deadlines are generous: a slow,
# loaded machine only waits longer, a regression still fails.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.02
	done
}

# gone PID: the process has exited.
gone() { ! kill -0 "$1" 2>/dev/null; }

# stacks PID: every thread's stack, one line a thread (its functions,
# innermost first), for a daemon that hangs (gdb, if any).
stacks() {
	command -v gdb >/dev/null || return 0
	echo "threads of $1:"
	timeout 60 gdb -p "$1" -batch -ex 'thread apply all bt' 2>/dev/null |
		awk '/^Thread/ { if (t) print t; t = "  " $2 ":"; next }
		     /^#/ { f = ($3 == "in") ? $4 : $2; t = t " " f }
		     END { if (t) print t }'
}

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

# same EXPECTED GOT DESC: byte-identical files; an empty (or missing)
# expectation fails (a reference that failed to run is not a pass).
same() {
	if [ ! -s "$1" ]; then
		fail "$3 (the expected text is empty: the reference failed)"
	elif cmp -s "$1" "$2"; then
		ok "$3"
	else
		fail "$3"
		echo "  expected: $(head -c 300 "$1" | od -c | head -5)"
		echo "  got:      $(head -c 300 "$2" | od -c | head -5)"
	fi
}

# mount [llmfs options...]: models are given by the caller.
# The LD_PRELOAD shim of tests/fs/fault_paths.c (built by make tests).
case $BUILD in
/*) SHIM=$BUILD/tests/fs/fault_paths.so ;;
*) SHIM=$PWD/$BUILD/tests/fs/fault_paths.so ;;
esac

# mount_faulty GATE REDIRECT [llmfs options...]: mount_llmfs with the shim
# preloaded into the daemon: LLMFS_TEST_GATE=GATE (PATH=FLAG: opening PATH
# waits until FLAG exists), LLMFS_TEST_REDIRECT=REDIRECT (PATH=OTHER);
# either may be empty.
mount_faulty() {
	local gate=$1 redirect=$2
	shift 2
	[ -f "$SHIM" ] || { fail "$SHIM is not built (make tests)"; finish; }
	LD_PRELOAD=$SHIM LLMFS_TEST_GATE=$gate LLMFS_TEST_REDIRECT=$redirect \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		mount_llmfs "$@"
}

# mounted_up PID: the mount answers, or PID died (then mount_llmfs stops).
mounted_up() {
	{ mountpoint -q "$MNT" && [ -e "$MNT/models" ]; } || gone "$1"
}

# mount_llmfs [llmfs options...]: models are given by the caller.
mount_llmfs() {
	"$LLMFS" -f "$@" "$MNT" >>"$WORK/daemon.log" 2>&1 &
	PID=$!
	wait_for 60 mounted_up "$PID"
	mountpoint -q "$MNT" && [ -e "$MNT/models" ] && return 0
	echo "the mount did not come up in 60 s ($(mountpoint -q "$MNT" ||
		echo "not ")mounted, the daemon $(gone "$PID" && echo exited ||
		echo "still running")):"
	cat "$WORK/daemon.log"
	gone "$PID" || stacks "$PID"
	exit 1
}

# Wait until every model of the mount left the loading state.
loaded() { ! grep -q ' loading' "$MNT/models"; }
wait_loaded() { wait_for 120 loaded; }

# unmount_llmfs: fusermount3 -u, and the daemon must exit 0 within 60 s.
# EBUSY is tried again for a while: a client that just exited may still
# be closing its files.
unmount_llmfs() {
	local rc
	wait_for 30 fusermount3 -u -q "$MNT" ||
		{ fusermount3 -u "$MNT"; fail "fusermount3 -u"; return 1; }
	if ! wait_for 60 gone "$PID"; then
		fail "the daemon exits after unmount (still running after 60 s)"
		stacks "$PID"
		kill -9 "$PID" 2>/dev/null
	fi
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
	if [ "$CHECKS" = 0 ]; then
		echo "not ok - no check ran"
		exit 1
	fi
	[ "$FAILS" = 0 ]
	exit $?
}
