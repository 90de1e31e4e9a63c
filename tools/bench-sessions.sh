#!/usr/bin/env bash
# Listing sessions/ and generating while it is listed: the times that
# tests/fs/isolation.sh used to assert (a timed test fails on a loaded
# machine; here they are figures). The listing must be linear in the
# number of sessions (before the fix it was O(n^2) under the model's lock:
# 71 s for 3,500): the time for N sessions is printed beside the time for
# N/10, measured in the same run; their ratio is about 10 when linear and
# about 100 when quadratic. The generation during a listing of N is
# compared with one alone.
#
#   BENCH_SESSIONS=3000 tools/bench-sessions.sh
. "$(dirname "$0")/bench-lib.bash"
N=${BENCH_SESSIONS:-3000}
ROUNDS=${BENCH_ROUNDS:-5}
P='Once upon a time, there was a little girl named Lily.'

bench_need_tools llmfs
bench_have_fuse || bench_skip "no /dev/fuse or fusermount3"
model=$SHARED/models/stories260K.gguf
[ -f "$model" ] || bench_skip "no $model"
bench_workdir
bench_mount stories --max-sessions $((N + 10)) --name stories="$model"
S=$mnt/stories
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
list_ms() {
	local t
	t=$(date +%s%N)
	ls "$S/sessions" > /dev/null
	ms "$t"
}
gen_ms() {
	local t
	t=$(date +%s%N)
	bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > /dev/null
	ms "$t"
}

for i in $(seq $((N / 10))); do cat "$S/sessions/new"; done > /dev/null
small=() alone=()
for r in $(seq "$ROUNDS"); do small+=("$(list_ms)"); alone+=("$(gen_ms)"); done
for i in $(seq $((N - N / 10))); do cat "$S/sessions/new"; done > /dev/null
big=() during=()
for r in $(seq "$ROUNDS"); do
	big+=("$(list_ms)")
	ls "$S/sessions" > /dev/null &
	l=$!
	during+=("$(gen_ms)")
	wait $l
done
s=$(bench_median "${small[@]}")
b=$(bench_median "${big[@]}")
echo "listing sessions/: $((N / 10)) sessions ${s} ms, $N sessions ${b} ms" \
	"(median of $ROUNDS; linear is about 10x, quadratic about 100x:" \
	"$(awk -v b="$b" -v s="$s" 'BEGIN { printf "%.1fx", s > 0 ? b / s : 0 }'))"
echo "a generation of 24 tokens: alone $(bench_median "${alone[@]}") ms," \
	"during a listing of $N sessions $(bench_median "${during[@]}") ms"
