#!/usr/bin/env bash
# The KV cache's figures through the mount (Documentation/kv.md), on a
# model of Qwen3-0.6B's shape (1024 wide, 28 layers, 16 heads, 8 KV heads,
# head_dim 128, ff 3072, tied, Q8_0; random weights, the 16k Qwen
# vocabulary), written by llmfs-write-model:
#
#   bytes per token and the context ceiling in the default budget for
#   f16/f16, q8_0/q8_0, q8_0/q4_0 and q4_0/q4_0 (the kv file's table);
#   time to first token of a conversation's second turn after a first turn
#   of about 1000 tokens, against the first turn's (goal: <= 10%);
#   time to first token of a prompt sharing a 1000-token prefix with the
#   one before, against that one's (goal: <= 10%).
#
# The TTFTs are the engine's own clock (the stats file's ttft_ms_last).
# BENCH_KV_ROUNDS rounds (default 3), each with its own texts so that no
# round reuses another's cache; medians, as the machine is shared.
. "$(dirname "$0")/bench-lib.bash"
ROUNDS=${BENCH_KV_ROUNDS:-3}
THREADS=${BENCH_THREADS:-0}
VOCAB=$SHARED/models/tiny-qwen3-bpe16k-f16.gguf

bench_need_tools llmfs llmfs-write-model
bench_have_fuse || bench_skip "no /dev/fuse or fusermount3"
bench_workdir

model=${BENCH_KV_MODEL:-$work/bench-qwen3-0.6b-shape-q8_0.gguf}
vocab=()
[ -f "$VOCAB" ] && vocab=(--vocab-from "$VOCAB")
bench_write_model "$model" --arch qwen3 --embd 1024 --layers 28 --heads 16 \
	--kv-heads 8 --head-dim 128 --ff 3072 --type q8_0 --ctx 4096 --seed 1 \
	--tied "${vocab[@]}"
echo "model: $(basename "$model") ($(( $(stat -c %s "$model") >> 20 )) MiB)," \
	"threads ${THREADS/#0/all}, $ROUNDS rounds"

bench_mount m --threads "$THREADS" --name m="$model"
M=$mnt/m

echo
echo "KV cache per type pair (budget $(awk '$1 == "budget" { printf "%.0f MiB", $2 / 1048576 }' "$M/kv")):"
printf '  %-10s %16s %18s\n' "K/V" "bytes/token" "context ceiling"
for pair in f16/f16 q8_0/q8_0 q8_0/q4_0 q4_0/q4_0; do
	awk -v p="$pair" '$1 == "ceiling" && $2 == p {
		printf "  %-10s %16d %18d\n", $2, $3, $4 }' "$M/kv"
done

ttft() { awk '$1 == "ttft_ms_last" { print $2 }' "$M/stats"; }
# about n words of story text that no other round shares
text() {
	local seed=$1 n=$2 i
	for ((i = 0; i < n; i++)); do
		printf '%s ' "w$(( (seed * 7919 + i * 104729) % 9973 ))"
	done
}
printf 'temperature=0\nmax_tokens=1\n' > "$M/config"

t1=() t2=() p1=() p2=()
for r in $(seq "$ROUNDS"); do
	long=$(text "$r" 205)    # ~1000 tokens of this vocabulary
	n=$(cat "$M/sessions/new")
	printf '%s' "$long" > "$M/sessions/$n/generate"
	cat "$M/sessions/$n/generate" > /dev/null
	t1+=("$(ttft)")
	printf ' And then?' > "$M/sessions/$n/generate"
	cat "$M/sessions/$n/generate" > /dev/null
	t2+=("$(ttft)")
	rmdir "$M/sessions/$n"

	prefix=$(text $((r + 1000)) 205)
	printf '%s' "$prefix First question." > "$M/generate"
	cat "$M/generate" > /dev/null
	p1+=("$(ttft)")
	printf '%s' "$prefix Second question." > "$M/generate"
	cat "$M/generate" > /dev/null
	p2+=("$(ttft)")
	echo "round $r: turn 1 ${t1[-1]} ms, turn 2 ${t2[-1]} ms;" \
		"prefix ${p1[-1]} ms, shared ${p2[-1]} ms"
done
tokens=$(printf "%s" "$(text 1 205)" > "$M/tokenize"; wc -w < "$M/tokenize")
mt1=$(bench_median "${t1[@]}")
mt2=$(bench_median "${t2[@]}")
mp1=$(bench_median "${p1[@]}")
mp2=$(bench_median "${p2[@]}")
echo
echo "first turn ($tokens tokens): TTFT $mt1 ms; second turn: $mt2 ms" \
	"= $(awk -v a="$mt2" -v b="$mt1" 'BEGIN { printf "%.1f%%", 100 * a / b }')" \
	"(goal <= 10%)"
echo "prompt ($tokens tokens): TTFT $mp1 ms; one sharing its prefix: $mp2 ms" \
	"= $(awk -v a="$mp2" -v b="$mp1" 'BEGIN { printf "%.1f%%", 100 * a / b }')" \
	"(goal <= 10%)"
awk -v a="$mt2" -v b="$mt1" -v c="$mp2" -v d="$mp1" \
	'BEGIN { exit !(a <= 0.1 * b && c <= 0.1 * d) }'
