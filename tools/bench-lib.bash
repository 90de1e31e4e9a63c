# Shared by tools/bench-*.sh (sourced, after setting nothing): the paths,
# the work folder and its cleanup, the mount and its wait, the median, the
# benchmark models and llama.cpp's programs. tests/fs/mount-lib.bash is the
# tests' counterpart; the two differ where tests and benchmarks do (a test
# skips with 77 and kills a daemon that hangs, a benchmark skips with 0 and
# waits for a clean unmount).
#
# Every bench_* function that cannot go on prints "<script>: <why>" and
# exits the script: 0 for "skipped: ..." (what the machine lacks), 1 for a
# failure.

set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
bin=$BUILD/bin
SHARED=${SHARED:-$(cd .. && pwd)/shared}
bench=$(basename "$0" .sh)

bench_fail() { echo "$bench: $*"; exit 1; }
bench_skip() { echo "$bench: skipped: $*"; exit 0; }

# bench_need_tools NAME...: each of $bin/NAME is built.
bench_need_tools() {
	local x
	for x in "$@"; do
		[ -x "$bin/$x" ] || bench_fail "$bin/$x is not built"
	done
}

# bench_have_fuse: 0 when this machine can mount (llmfs built, /dev/fuse,
# fusermount3).
bench_have_fuse() {
	[ -x "$bin/llmfs" ] && [ -c /dev/fuse ] &&
		command -v fusermount3 >/dev/null
}

# bench_workdir: $work (a new folder under /tmp), $mnt (empty, inside it);
# on exit the mount goes (lazily if busy), the daemon is waited for, the
# processes in bench_pids are killed and $work is removed.
pid=
bench_pids=()
bench_cleanup() {
	local p
	if mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt"
	fi
	[ -n "$pid" ] && wait "$pid" 2>/dev/null
	for p in "${bench_pids[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$work"
}
bench_workdir() {
	work=$(mktemp -d "/tmp/llmfs-$bench.XXXXXX") ||
		bench_fail "cannot make a folder under /tmp"
	mnt=$work/mnt
	mkdir -p "$mnt"
	trap bench_cleanup EXIT
}

# bench_mount NAME LLMFS-ARGS...: llmfs -f LLMFS-ARGS on $mnt (pid in
# $pid, log in $work/daemon.log), then waits up to 2 minutes until the
# models file says NAME is ready.
bench_mount() {
	local name=$1 i
	shift
	"$bin/llmfs" -f "$@" "$mnt" >"$work/daemon.log" 2>&1 &
	pid=$!
	for i in $(seq 1200); do
		grep -q "^$name .* ready " "$mnt/models" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "$bench: $name did not get ready"
	cat "$work/daemon.log"
	exit 1
}

# bench_median VALUES...: the median of the arguments (the mean of the
# middle two for an even count).
bench_median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_write_model FILE LLMFS-WRITE-MODEL-ARGS...: writes FILE unless it
# is there (through FILE.tmp, so that an interrupted run leaves no half
# model behind).
bench_write_model() {
	local f=$1
	shift
	[ -f "$f" ] && return 0
	"$bin/llmfs-write-model" -o "$f.tmp" "$@" >/dev/null && mv "$f.tmp" "$f" ||
		bench_fail "llmfs-write-model -o $f failed"
}

# bench_llama TARGET...: $llama_bin, the folder of llama.cpp's TARGETs,
# built from the pinned source (tools/build-llama.sh, cached); skipped where
# they cannot be built here (no bundle, cmake or compiler), a failure where
# the build fails.
bench_llama() {
	local rc
	llama_bin=$(tools/build-llama.sh "$@")
	rc=$?
	[ $rc -eq 77 ] && bench_skip "$* cannot be built here"
	[ $rc -eq 0 ] || bench_fail "building $* failed"
}
