#!/usr/bin/env bash
# The randomized operation test (tests/fs/random_ops.py): seeded sequences
# of operations by real processes of two uids against a real allow_other
# mount, each result checked against a reference model of ABI.md. In
# make check a fixed set of seeds (well under 2 minutes); `make stress
# SECONDS=N` runs new seeds until N seconds are up; RANDOM_SEEDS=5 and
# RANDOM_STEPS=N rerun one seed (the reproduction a failure prints).
. "$(dirname "$0")/mount-lib.bash"
command -v setpriv >/dev/null || skip "setpriv is absent"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is absent"

chmod 755 "$WORK"
SEEDS=${RANDOM_SEEDS:-1-12}
STEPS=${RANDOM_STEPS:-80}
SECS=${RANDOM_SECONDS:-0}
mount_llmfs -o allow_other --max-sessions 3 --stream-buffer 16 \
	--name stories="$STORIES"
wait_loaded || fail "model loaded"
start=$SECONDS
if /usr/bin/python3 tests/fs/random_ops.py --mount "$MNT/stories" \
		--run "$RUN" --model "$STORIES" --seeds "$SEEDS" \
		--steps "$STEPS" --seconds "$SECS" \
		--repro "RANDOM_SEEDS={seed} RANDOM_STEPS={steps} bash tests/fs/random.sh" \
		> "$WORK/random.log" 2>&1; then
	ok "$(tail -n 1 "$WORK/random.log") in $((SECONDS - start)) s"
	# the fixed seeds reach the per-uid session limit (a limit one too
	# high passed unseen while they never did)
	[ -n "${RANDOM_SEEDS:-}" ] || check "... and reach --max-sessions" \
		grep -qE ' [1-9][0-9]* sessions refused past' "$WORK/random.log"
else
	fail "random operations (seeds $SEEDS)"
	cat "$WORK/random.log"
fi
check "the daemon is alive after them" kill -0 "$PID"
unmount_llmfs
finish
