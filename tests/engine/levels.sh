#!/usr/bin/env bash
# Every CPU level through the whole engine, chosen as a user chooses it
# (LLMFS_CPU, engine/cpu/isa.h): test_golden (the shared models against
# llama.cpp's logits) and test_batch (batched = one token at a time) with
# LLMFS_CPU=avx2 and =scalar, as tests/run runs them on the native level;
# llmfs-run refuses a level name that does not exist, with one line that
# names the variable, and exits 1. (test_isa holds the levels' logits to
# one another bit for bit, in one process.)
#
# A level this CPU (or build) lacks is refused by the engine: that level is
# left out and the script exits 77 after the others, saying which.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
run=$BUILD/bin/llmfs-run
stories=$SHARED/models/stories260K.gguf

for t in test_golden test_batch; do
	[ -x "$BUILD/tests/engine/$t" ] ||
		{ echo "FAIL: $BUILD/tests/engine/$t is not built"; exit 1; }
done
[ -x "$run" ] || { echo "FAIL: $run is not built"; exit 1; }
[ -f "$stories" ] || { echo "no $SHARED models: skipped"; exit 77; }

fails=0 left_out=""
for level in avx2 scalar; do
	why=$(LLMFS_CPU=$level "$run" -m "$stories" -p x -n 1 2>&1 >/dev/null |
		grep "LLMFS_CPU=$level")
	if [ -n "$why" ]; then
		echo "# $level: $why"
		left_out="$left_out $level"
		continue
	fi
	for t in test_golden test_batch; do
		start=$SECONDS
		if out=$(LLMFS_CPU=$level "$BUILD/tests/engine/$t" 2>&1); then
			echo "ok: $t at LLMFS_CPU=$level ($((SECONDS - start)) s)"
		else
			echo "FAIL: $t at LLMFS_CPU=$level"
			echo "$out" | tail -n 20 | sed 's/^/    /'
			fails=$((fails + 1))
		fi
	done
done

out=$(LLMFS_CPU=sse9 "$run" -m "$stories" -p x -n 1 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
	echo "$out" | grep -q "LLMFS_CPU=sse9: no such CPU level"; then
	echo "ok: LLMFS_CPU=sse9 refused: $out"
else
	echo "FAIL: LLMFS_CPU=sse9 gave exit $rc: $out"
	fails=$((fails + 1))
fi

[ $fails -eq 0 ] || exit 1
if [ -n "$left_out" ]; then
	echo "this CPU lacks the level(s)$left_out: not run"
	exit 77
fi
