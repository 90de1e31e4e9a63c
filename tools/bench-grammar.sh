#!/usr/bin/env bash
# What constrained decoding costs, beside llama.cpp's grammar sampling,
# measured in the same run.
#
# Model: the Qwen3-0.6B shape with the real 151,936-token Qwen2 vocabulary
# (n_embd 1024, 28 layers, Q8_0, random seeded weights, as bench-cpu.sh
# writes it). 128 greedy tokens after a short prompt, one thread pair:
#   free    no constraint
#   json    llama.cpp's grammars/json.gbnf (format=json)
#   schema  a JSON schema (an object of five typed properties)
# llmfs: llmfs-run --json / --json-schema; its grammar_ms is the time spent
# in masks and grammar steps, decode_ms the time of the tokens after the
# first (both from the same run, so the ratio is not at the mercy of a
# noisy neighbour between two runs). llama.cpp: llama-completion built
# from the pinned source (tools/build-llama.sh) with --grammar-file /
# --json-schema-file; its "sampling time" (common_sampler, grammar
# included) and "eval time", free and constrained. Rounds are interleaved
# (each round runs every case on both sides, the side going first
# alternating); the table gives medians.
#
# Environment: BENCH_GRAMMAR_ROUNDS (3), BENCH_THREADS (2),
# BENCH_CPU_MODELS (a folder keeping the model between runs).
. "$(dirname "$0")/bench-lib.bash"
ROUNDS=${BENCH_GRAMMAR_ROUNDS:-3}
T=${BENCH_THREADS:-2}
N=128
VOCAB=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf
JSON_GBNF=${LLAMA_REF_DIR:-$PWD/ref}/node_modules/node-llama-cpp/llama/grammars/json.gbnf

bench_need_tools llmfs-run llmfs-write-model
[ -f "$VOCAB" ] || bench_skip "no $VOCAB (the Qwen2 vocabulary)"
[ -f "$JSON_GBNF" ] || bench_skip "no $JSON_GBNF (make ref)"
bench_llama llama-completion
lcomp=$llama_bin/llama-completion
bench_workdir
models=${BENCH_CPU_MODELS:-$work}
mkdir -p "$models"
model=$models/qwen3-0.6b-shape-q8_0.gguf
bench_write_model "$model" --arch qwen3 --embd 1024 --layers 28 --heads 16 \
	--kv-heads 8 --head-dim 128 --ff 3072 --tied --ctx 4096 --seed 1 \
	--vocab-from "$VOCAB" --type q8_0

cat > "$work/schema.json" <<'EOF'
{"type": "object", "properties": {"name": {"type": "string"},
 "age": {"type": "integer"}, "email": {"type": "string"},
 "tags": {"type": "array", "items": {"type": "string"}},
 "ok": {"type": "boolean"}}, "required": ["name", "age"]}
EOF
prompt="A person, as JSON:"

# llmfs: "decode_ms grammar_ms tokens"
run_llmfs() {
	local args=()
	case $1 in
	json) args=(--json) ;;
	schema) args=(--json-schema "$work/schema.json") ;;
	esac
	"$bin/llmfs-run" -m "$model" -p "$prompt" --temp 0 -n $N -t "$T" \
		"${args[@]}" 2>&1 >/dev/null | awk '/gen_tokens=/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		dec = v["decode_tps"] > 0 ? (v["gen_tokens"] - 1) / v["decode_tps"] * 1000 : 0
		print dec, (v["grammar_ms"] == "" ? 0 : v["grammar_ms"]), v["gen_tokens"] }'
}
# llama.cpp: "eval_ms sampling_ms tokens"
run_llama() {
	local args=()
	case $1 in
	json) args=(--grammar-file "$JSON_GBNF") ;;
	schema) args=(--json-schema-file "$work/schema.json") ;;
	esac
	"$lcomp" -m "$model" -p "$prompt" --temp 0 -n $N -t "$T" -no-cnv \
		--no-warmup --simple-io "${args[@]}" </dev/null 2>&1 >/dev/null |
		awk '# "sampling time =     89.91 ms"; "eval time =  6432.10 ms /   127
			# runs   (...)": the figures after the "=", wherever the
			# log prefix (a timestamp, a level) puts it
			/sampling time =/ { for (i = 1; i < NF; i++) if ($i == "=") s = $(i + 1) }
			/ eval time =/ && !/prompt eval/ {
				for (i = 1; i < NF; i++) if ($i == "=") { e = $(i + 1); n = $(i + 4) }
			}
			END { print e, s, n }'
}

echo "threads $T, $ROUNDS interleaved rounds, $N tokens;" \
	"load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A res
for r in $(seq "$ROUNDS"); do
	for c in free json schema; do
		if [ $((r % 2)) -eq 1 ]; then
			a=$(run_llmfs $c); b=$(run_llama $c)
		else
			b=$(run_llama $c); a=$(run_llmfs $c)
		fi
		echo "round $r $c: llmfs decode_ms grammar_ms tokens: ${a:-failed};" \
			"llama.cpp eval_ms sampling_ms tokens: ${b:-failed}"
		res[$c.llmfs.dec]+="$(echo "$a" | awk '{ print ($3 > 1 ? $1 / ($3 - 1) : 0) }') "
		res[$c.llmfs.gram]+="$(echo "$a" | awk '{ print ($3 > 1 ? $2 / ($3 - 1) : 0) }') "
		res[$c.llama.eval]+="$(echo "$b" | awk '{ print ($3 > 0 ? $1 / $3 : 0) }') "
		res[$c.llama.samp]+="$(echo "$b" | awk '{ print ($3 > 0 ? $2 / $3 : 0) }') "
	done
done
med() { bench_median ${res[$1]}; }
echo
echo "| case | llmfs ms/token | llmfs grammar ms/token | share | llama.cpp eval ms/token | llama.cpp sampling ms/token | grammar's extra sampling | share |"
echo "|---|---|---|---|---|---|---|---|"
fs=$(med free.llama.samp)
for c in free json schema; do
	awk -v c=$c -v d="$(med $c.llmfs.dec)" -v g="$(med $c.llmfs.gram)" \
		-v e="$(med $c.llama.eval)" -v s="$(med $c.llama.samp)" -v fs="$fs" 'BEGIN {
		x = s - fs; if (c == "free") x = 0
		printf "| %s | %.2f | %.3f | %.1f%% | %.2f | %.3f | %.3f | %.1f%% |\n",
			c, d, g, (d > 0 ? 100 * g / d : 0), e, s, x, (e > 0 ? 100 * x / e : 0) }'
done
echo
echo "llmfs: share = grammar_ms / decode_ms of the same runs (the tokens after the first)."
echo "llama.cpp: share = (sampling with the grammar - sampling free) / eval, per token."
