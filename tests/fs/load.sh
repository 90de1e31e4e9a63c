#!/usr/bin/env bash
# Loading, as the daemon shows it: --numa (a bad value is a usage error;
# a policy reaches the loader: node:99 fails the load with the loader's
# reason), loader notices in the model's errors file and on the foreground
# daemon's stderr, the status file during a load of a 400 MB model and its
# final figures in stats, and the load bar of `llmfs -f` on a terminal
# (util-linux script(1) gives it a pty), absent when stderr is a file.
. "$(dirname "$0")/mount-lib.bash"

P='Once upon a time'
N=24
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null

# gen_check DESC: greedy generation on $MNT/stories equals llmfs-run's.
gen_check() {
	printf 'temperature=0\nmax_tokens=%d\n' $N > "$MNT/stories/config"
	printf '%s' "$P" > "$MNT/stories/generate"
	cat "$MNT/stories/generate" > "$WORK/got"
	same "$WORK/expect" "$WORK/got" "$1: generation equals llmfs-run's"
}

# 1. --numa: bad values are usage errors, before anything is mounted.
# (Under timeout: a daemon that took the value would stay in the
# foreground, and the test would hang instead of failing.)
for v in bogus node: node:x node:-1 Interleave; do
	timeout 60 "$LLMFS" -f --numa="$v" "$STORIES" "$MNT" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	mountpoint -q "$MNT" && fusermount3 -u -z "$MNT"
	check "--numa='$v': exit 1 (got $rc), one line on stderr: $(cat "$WORK/err")" \
		bash -c "[ $rc = 1 ] && [ \$(wc -l < '$WORK/err') = 1 ] &&
			grep -q -- '--numa' '$WORK/err' && [ ! -s '$WORK/out' ]"
	check "--numa='$v': nothing mounted" bash -c "! mountpoint -q '$MNT'"
done
"$LLMFS" --help | grep -q -- '--numa' && ok "--help lists --numa" ||
	fail "--help lists --numa"

# 2. Policies reach the loader: interleave and replicate load and generate
# (on one node both are the trivial plan); node:99 fails the load with the
# loader's reason in errors, the other model unharmed.
for pol in interleave replicate; do
	mount_llmfs --numa "$pol" --name stories="$STORIES"
	wait_loaded
	check "--numa $pol: ready" grep -q '^stories .* ready ' "$MNT/models"
	gen_check "--numa $pol"
	unmount_llmfs
done
mount_llmfs --numa=node:99 --name stories="$STORIES"
wait_loaded
check "--numa=node:99: the model failed" grep -q '^stories .* failed ' "$MNT/models"
check "--numa=node:99: errors says why ($(cat "$MNT/stories/errors"))" \
	grep -Eq "^$STAMP load: .*(node|NUMA|numa).*99" "$MNT/stories/errors"
check "--numa=node:99: on the foreground daemon's stderr too" \
	grep -q '^llmfs: stories: load: ' "$WORK/daemon.log"
unmount_llmfs

# 3. Loader notices. Without CAP_IPC_LOCK and with a 64 KiB RLIMIT_MEMLOCK
# the weights (2 MiB) cannot be locked: io/ says so in a notice. The
# pread fallback (LLMFS_NO_URING) and buffered reads (LLMFS_NO_DIRECT) are
# forced at the same time: they are silent (asked for, not fallen back
# to), and generation must still equal llmfs-run's.
if command -v setpriv >/dev/null; then
	: > "$WORK/daemon.log"
	(ulimit -l 64 && LLMFS_NO_URING=1 LLMFS_NO_DIRECT=1 exec setpriv \
		--bounding-set=-ipc_lock --inh-caps=-ipc_lock \
		"$LLMFS" -f --name stories="$STORIES" "$MNT" \
		>>"$WORK/daemon.log" 2>&1) &
	PID=$!
	wait_for 60 mounted_up "$PID"
	wait_loaded
	check "notice: the model is ready" grep -q '^stories .* ready ' "$MNT/models"
	check "notice: errors has the mlock line ($(cat "$MNT/stories/errors"))" \
		grep -Eq "^$STAMP load: weights not locked in memory: RLIMIT_MEMLOCK is 64 KiB" \
		"$MNT/stories/errors"
	check "notice: one line in errors" \
		[ "$(wc -l < "$MNT/stories/errors")" = 1 ]
	check "notice: on the foreground daemon's stderr" \
		grep -q '^llmfs: stories: weights not locked in memory: ' "$WORK/daemon.log"
	gen_check "pread + buffered, unlocked"
	check "notice: a generation adds no errors line" \
		[ "$(wc -l < "$MNT/stories/errors")" = 1 ]
	unmount_llmfs
else
	echo "# setpriv is absent: the notice checks did not run"
	fail "setpriv (util-linux) is needed for the notice checks"
fi

# 4. status during a load of a 400 MB model (f16, written here), polled
# while it loads; the final figures are in stats. The model's file is held
# shut (tests/fs/fault_paths.c) until a load line was seen, so that there
# is one whatever the speed of the machine.
BIG=$WORK/big.gguf
"$BUILD/bin/llmfs-write-model" -o "$BIG" --arch llama --embd 1024 \
	--layers 12 --heads 8 --kv-heads 8 --head-dim 128 --ff 4096 \
	--type f16 --vocab-from "$STORIES" >"$WORK/write.log" 2>&1 ||
	{ cat "$WORK/write.log"; fail "llmfs-write-model"; finish; }
TOTAL=$(sed -n 's/.*tensors, \([0-9]*\) bytes of weights.*/\1/p' "$WORK/write.log")
check "the big model has $TOTAL bytes of weights" [ "${TOTAL:-0}" -gt 300000000 ]
: > "$WORK/daemon.log"
: > "$WORK/status-lines"
mount_faulty "$BIG=$WORK/big-may-load" "" --name big="$BIG"
grep '^load ' "$MNT/status" >> "$WORK/status-lines"
touch "$WORK/big-may-load"
for _ in $(seq 3000); do
	grep -q ' loading ' "$MNT/models" || break
	grep '^load ' "$MNT/status" >> "$WORK/status-lines"
done
wait_loaded
seen=$(grep -c '^load big ' "$WORK/status-lines")
check "status has a load line while the model loads ($seen seen)" [ "$seen" -gt 0 ]
check "status while loading: 'load big DONE/$TOTAL bytes X GB/s Y s'" \
	bash -c "! grep -Evx 'load big [0-9]+/($TOTAL|0) bytes [0-9]+\.[0-9]{2} GB/s [0-9]+\.[0-9] s' '$WORK/status-lines'"
check "status while loading: done <= total" awk '
	{ split($3, a, "/"); if (a[1] + 0 > a[2] + 0 && a[2] != 0) bad = 1 }
	END { exit bad }' "$WORK/status-lines"
check "status after the load has no load line" \
	bash -c "! grep -q '^load ' '$MNT/status'"
check "stats: load_bytes $TOTAL" grep -qx "load_bytes $TOTAL" "$MNT/big/stats"
check "stats: load_s > 0" awk '$1 == "load_s" { ok = $2 > 0 } END { exit !ok }' \
	"$MNT/big/stats"
unmount_llmfs
check "no load bar when stderr is a file" \
	bash -c "! grep -q \$'\\r\\|\\e' '$WORK/daemon.log'"

# 5. The load bar on a terminal: its first frame shows every model at the
# start, frames are redrawn with \r, and the last thing written is the
# erase (\r ESC [K) once both models are loaded. Both files are held shut
# until a frame was drawn.
if script -qec true /dev/null </dev/null >/dev/null 2>&1; then
	cp "$STORIES" "$WORK/stories.gguf"
	LD_PRELOAD=$SHIM ASAN_OPTIONS=verify_asan_link_order=0 \
	LLMFS_TEST_GATE="$BIG=$WORK/tty-may-load,$WORK/stories.gguf=$WORK/tty-may-load" \
		script -qfec "'$LLMFS' -f --name big='$BIG' --name stories='$WORK/stories.gguf' '$MNT'" \
		/dev/null </dev/null >"$WORK/tty" 2>&1 &
	PID=$!
	wait_for 60 mounted_up "$PID"
	check "tty: a frame is drawn while both are held loading" \
		wait_for 60 grep -qa 'stories \[' "$WORK/tty"
	touch "$WORK/tty-may-load"
	wait_loaded
	check "tty: both models ready" \
		[ "$(grep -c ' ready ' "$MNT/models")" = 2 ]
	unmount_llmfs
	check "tty: a frame shows both models loading" \
		grep -Eqa $'\r''big \[[-#]{20}\] +[0-9]+% [0-9.]+ GB/s  stories \[' "$WORK/tty"
	check "tty: the bar is erased at the end" \
		[ "$(tail -c 4 "$WORK/tty" | od -An -c | tr -d ' ')" = '\r033[K' ]
	# Each \r starts a frame or the erase; each ends with ESC [K.
	tr '\r' '\n' < "$WORK/tty" | tail -n +2 > "$WORK/frames"
	check "tty: every frame ends with an erase to the end of the line" \
		bash -c "! grep -av \$'\\e\\\\[K\$' '$WORK/frames' | grep -aq ."
	check "tty: nothing but the bar before the first frame" \
		[ "$(head -c 1 "$WORK/tty" | od -An -c | tr -d ' ')" = '\r' ]
	# what the terminal showed, should any of these fail
	grep -qav $'\e\\[K$' "$WORK/frames" &&
		tr '\r' '\n' < "$WORK/tty" | tail -n 40 | sed 's/^/# tty: /'
else
	fail "script(1) (util-linux) cannot give a pty here: the load bar cannot be checked"
fi
finish
