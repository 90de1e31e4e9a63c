#!/usr/bin/env bash
# Decode through the mount: aggregate tokens/s of 1, 4 and 16 concurrent
# sessions on one model (each a process session of its own, shell idiom:
# write the prompt, read the answer), tokens after each reader's first
# over the span from the earliest first byte to the last EOF. Rounds are
# interleaved (round r runs every session count in turn, so that a drift
# of the machine weighs on every count alike); the median per count.
# tools/bench-cpu.sh runs it on the CPU, tools/gpu-check.sh with the
# model on a GPU.
#
#   BENCH_MOUNT_MODEL=FILE tools/bench-mount.sh
#
# Environment: BENCH_MOUNT_MODEL (the GGUF file, required),
# BENCH_MOUNT_PLACEMENT (written to the model's placement file before
# the first round, e.g. "all gpu0"; the default leaves the planner's),
# BENCH_MOUNT_SESSIONS ("1 4 16"), BENCH_MOUNT_TOKENS (128 a session),
# BENCH_MOUNT_ROUNDS (3), BENCH_THREADS (2), BUILD (the programs' build
# folder, build).
. "$(dirname "$0")/bench-lib.bash"
f=${BENCH_MOUNT_MODEL:-}
PLACE=${BENCH_MOUNT_PLACEMENT:-}
SESSIONS=${BENCH_MOUNT_SESSIONS:-1 4 16}
NTOK=${BENCH_MOUNT_TOKENS:-128}
ROUNDS=${BENCH_MOUNT_ROUNDS:-3}
T=${BENCH_THREADS:-2}

[ -f "$f" ] || bench_fail "BENCH_MOUNT_MODEL names no file (${f:-unset})"
bench_have_fuse || bench_skip "no llmfs, /dev/fuse or fusermount3"
bench_workdir
bench_mount m --threads "$T" --name m="$f"
if [ -n "$PLACE" ]; then
	echo "$PLACE" >"$mnt/m/placement" ||
		bench_fail "placement '$PLACE': $(tail -n 1 "$mnt/m/errors" 2>/dev/null)"
fi
printf 'temperature=0\nmax_tokens=%d\n' "$NTOK" >"$mnt/m/config"
# One reader: prompt in, first byte and EOF times out. It starts when the
# round's lock is released (flock $3): the readers are processes of their
# own, and on 2 busy cores starting one takes milliseconds, so without the
# lock the later sessions joined tens of milliseconds after the first.
reader() {
	setsid bash -c '
		touch "$3.$4"
		flock -s "$3" true
		printf "%s" "$2" > "$1/m/generate"
		{ IFS= read -r -n 1 _; t0=$(date +%s.%N); cat >/dev/null
		  echo "$t0 $(date +%s.%N)"; } < "$1/m/generate"' _ \
		"$mnt" "$1" "$work/go" "$2"
}
tokens_out() { grep '^tokens_out ' "$mnt/m/stats" | cut -d' ' -f2; }
# an untimed generation first (llama-bench warms up too): the first one
# after a load pays for page faults the others do not
echo warm-up >"$mnt/m/generate" && cat "$mnt/m/generate" >/dev/null
# and a quiet daemon: after a load it hashes the model file for info's
# sha256 line, which took a core from the first round (at most a minute),
# and merges host weights into huge pages while idle (stats:
# weights_merge), without which the first rounds ran on 4 KiB pages: 4
# sessions' panels then cost 37-47% more per token (engine.md)
for w in $(seq 600); do
	grep -q '^sha256 [0-9a-f]' "$mnt/m/info" &&
		grep -qE '^weights_merge (done|unsupported)$' \
			"$mnt/m/stats" && break
	sleep 0.1
done
echo "through the mount ($(basename "$f")${PLACE:+, placement '$PLACE'}, $NTOK tokens each, greedy, threads $T, $ROUNDS rounds, median):"
declare -A vals=()
for r in $(seq "$ROUNDS"); do
	for n in $SESSIONS; do
		before=$(tokens_out)
		readers=()
		exec 9>"$work/go"
		flock 9
		for i in $(seq "$n"); do
			reader "Story $i of round $r: once upon a time" "$i" 9>&- \
				>"$work/t.$i" &
			readers+=($!)
		done
		# every reader at the lock (a few ms after its mark; at most
		# 10 s), then go
		for w in $(seq 1000); do
			[ "$(ls "$work" | grep -c '^go\.')" -ge "$n" ] && break
			sleep 0.01
		done
		sleep 0.05
		exec 9>&-
		wait "${readers[@]}"
		rm -f "$work"/go.*
		sleep 0.2 # the stats line follows the last EOF
		# tokens the engine made, less each reader's first one
		got=$(($(tokens_out) - before - n))
		vals[$n]+="$(cat "$work"/t.* | awk -v g="$got" '
			NR == 1 || $1 < a { a = $1 } $2 > b { b = $2 }
			END { printf "%.2f", g / (b - a) }') "
		rm -f "$work"/t.*
	done
done
one=
for n in $SESSIONS; do
	# shellcheck disable=SC2086 # the rounds' values, split on purpose
	v=$(bench_median ${vals[$n]})
	[ -n "$one" ] || one=$v
	awk -v n="$n" -v v="$v" -v o="$one" -v all="${vals[$n]}" 'BEGIN {
		printf "  %2d sessions: %.1f t/s aggregate, %.2fx one session " \
			"(rounds: %s)\n", n, v, v / o, all }'
done
[ -z "$PLACE" ] || grep -c " ${PLACE##* }\$" "$mnt/m/placement" |
	awk '{ print "  tensors placed there at the end: " $1 }'
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
