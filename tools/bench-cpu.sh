#!/usr/bin/env bash
# CPU speed against llama.cpp's llama-bench, measured in the same run, at
# each CPU level (engine/cpu/isa.h) against llama.cpp built for the same
# instruction set (tools/build-llama.sh's variants):
#   avx512  llmfs's default on this CPU   vs llama.cpp's zen4 variant
#   avx2    LLMFS_CPU=avx2                vs its haswell variant
#           (GGML_NATIVE=OFF GGML_AVX2=ON GGML_AVX512=OFF, FMA, F16C, BMI2)
# A level this CPU lacks is left out (and says so).
#
# Two models of Qwen3-0.6B shape (n_embd 1024, 28 layers, 16 heads, 8 KV
# heads, head_dim 128, n_ff 3072, tied embeddings, the real 151,936-token
# Qwen2 vocabulary), random seeded weights written by llmfs-write-model:
# Q8_0, and a Q4_K_M-style mix (Q4_K; Q6_K for attn_v, ffn_down and
# token_embd). For each, three figures as llama-bench defines them:
#   pp512          a 512-token prompt               (llama-bench -p 512)
#   tg128          128 tokens from an empty context (llama-bench -n 128)
#   tg64 @ d1024   64 tokens after 1024 of context  (llama-bench -n 64 -d 1024)
# And two large ones (BENCH_CPU_BIG=1, the default), pp512 and tg128:
#   8B      Qwen3-8B's shape (4096, 36 layers, 32/8 heads, n_ff 12288,
#           untied), Q4_K_M, 4.7 GB
#   moe     Qwen3-30B-A3B's layer, expert and head counts (2048, 32/4
#           heads, 128 experts of n_ff 768, 8 used, untied) with 8 of its
#           48 layers so that it fits a 24 GB machine, Q4_K_M, 3.0 GB
# llmfs-bench measures the same thing the same way (tools/llmfs-bench.c).
# Rounds are interleaved (each round runs every figure on both sides, the
# side that goes first alternating), one repetition per call; the tables
# give the median over the rounds (the machine is shared: say how loaded).
#
# Decode bandwidth: bytes read per token (the weights, plus the K/V cache
# at depth) x t/s, against the read bandwidth llmfs-bench --membw measures
# in every round (median).
#
# Open to first token of the 8B (page cache warm, BENCH_CPU_BIG): the
# whole llmfs-run -n 1 process (its asynchronous load, packing as the
# tensors arrive, a 4-token prompt, one token), with and without packing
# (--no-pack), beside the whole llama-bench -p 4 -n 0 -r 1 process (its
# load, which repacks Q4_K too, a warm-up and one 4-token prompt).
#
# Through the mount (tools/bench-mount.sh): aggregate decode tokens/s of
# 1, 4 and 16 concurrent sessions on the 0.6B Q4_K_M model, 128 tokens
# each (64 until the fourth round of issue 12: a longer span leaves less
# to the steps in which the sessions join and end).
#
# Environment: BENCH_CPU_ROUNDS (3), BENCH_THREADS (2), BENCH_CPU_MODELS (a
# folder to keep the models in between runs; default: a temporary one),
# BENCH_CPU_LEVELS ("avx512 avx2"), BENCH_CPU_BIG (1; 0 leaves out the 8B
# and MoE models), BENCH_CPU_MOUNT (1; 0 skips the mount part),
# BENCH_CPU_ONLY (the models to run, of "q8_0 q4_k_m 8b moe"; default
# all), BENCH_CPU_SESSIONS ("1 4 16"), BENCH_CPU_TOKENS (128, per session
# through the mount), BENCH_CPU_TESTS ("pp tg tgd"), BENCH_CPU_EXACT (0; 1
# runs llmfs-bench with --batch-exact: batches in the one-token path's
# order, Documentation/engine.md "The rows-in-lanes GEMM").
. "$(dirname "$0")/bench-lib.bash"
ROUNDS=${BENCH_CPU_ROUNDS:-3}
T=${BENCH_THREADS:-2}
TESTS=${BENCH_CPU_TESTS:-pp tg tgd}
SESSIONS=${BENCH_CPU_SESSIONS:-1 4 16}
LEVELS=${BENCH_CPU_LEVELS:-avx512 avx2}
BIG=${BENCH_CPU_BIG:-1}
VOCAB=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf

bench_need_tools llmfs-bench llmfs-write-model llmfs-run
[ -f "$VOCAB" ] || bench_skip "no $VOCAB (the Qwen2 vocabulary)"
bench_workdir
models=${BENCH_CPU_MODELS:-$work}
mkdir -p "$models"

# The levels this CPU has, each with its llama-bench ($lbench_LEVEL).
variant() { case $1 in avx512) echo zen4 ;; avx2) echo haswell ;; esac; }
levels=
declare -A lbench
for level in $LEVELS; do
	why=$(LLMFS_CPU=$level "$bin/llmfs-run" -m "$VOCAB" -p x -n 1 2>&1 \
		>/dev/null | grep "LLMFS_CPU=$level")
	if [ -n "$why" ] || [ -z "$(variant "$level")" ]; then
		echo "level $level left out: ${why:-no llama.cpp variant for it}"
		continue
	fi
	LLAMA_CPU_VARIANT=$(variant "$level") bench_llama llama-bench
	lbench[$level]=$llama_bin/llama-bench
	levels="$levels $level"
done
[ -n "$levels" ] || bench_skip "no level of $LEVELS on this CPU"

shape=(--arch qwen3 --embd 1024 --layers 28 --heads 16 --kv-heads 8
	--head-dim 128 --ff 3072 --tied --ctx 4096 --seed 1 --vocab-from "$VOCAB")
names="q8_0 q4_k_m"
for type in q8_0 q4_k_m; do
	bench_write_model "$models/qwen3-0.6b-shape-$type.gguf" "${shape[@]}" \
		--type "$type"
done
if [ "$BIG" = 1 ]; then
	bench_write_model "$models/qwen3-8b-shape-q4_k_m.gguf" --arch qwen3 \
		--embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 \
		--ff 12288 --ctx 4096 --seed 1 --vocab-from "$VOCAB" \
		--type q4_k_m
	bench_write_model "$models/qwen3moe-30b-a3b-shape-8l-q4_k_m.gguf" \
		--arch qwen3moe --embd 2048 --layers 8 --heads 32 --kv-heads 4 \
		--head-dim 128 --ff 768 --experts 128 --experts-used 8 \
		--ctx 4096 --seed 1 --vocab-from "$VOCAB" --type q4_k_m
	names="$names 8b moe"
fi
# BENCH_CPU_ONLY: some of the models alone (e.g. "8b moe")
if [ -n "${BENCH_CPU_ONLY:-}" ]; then
	for n in $BENCH_CPU_ONLY; do
		case " $names " in
		*" $n "*) ;;
		*) bench_fail "BENCH_CPU_ONLY: no model $n among:$names" ;;
		esac
	done
	names=$BENCH_CPU_ONLY
fi
# the file of a model's name, and the figures it is measured on
file() {
	case $1 in
	8b) echo "$models/qwen3-8b-shape-q4_k_m.gguf" ;;
	moe) echo "$models/qwen3moe-30b-a3b-shape-8l-q4_k_m.gguf" ;;
	*) echo "$models/qwen3-0.6b-shape-$1.gguf" ;;
	esac
}
tests_of() {
	case $1 in
	8b | moe) echo "$TESTS" | tr ' ' '\n' | grep -vx tgd | tr '\n' ' ' ;;
	*) echo "$TESTS" ;;
	esac
}
label() {
	case $1 in
	8b) echo "Q4_K_M 8B" ;; moe) echo "Q4_K_M 30B-A3B, 8 layers" ;;
	q8_0) echo "Q8_0" ;; q4_k_m) echo "Q4_K_M" ;;
	esac
}

# llama-bench runs -p 512 and -n 128 unless told 0; llmfs-bench one of them
args() {
	case $1 in
	pp) echo "-p 512" ;;
	tg) echo "-n 128" ;;
	tgd) echo "-n 64 -d 1024" ;;
	esac
}
largs() {
	case $1 in
	pp) echo "-p 512 -n 0" ;;
	tg) echo "-p 0 -n 128" ;;
	tgd) echo "-p 0 -n 64 -d 1024" ;;
	esac
}
# t/s of one repetition on each side ("" on a failure), at level $2
exact=
[ "${BENCH_CPU_EXACT:-0}" = 1 ] && exact=--batch-exact
run_llmfs() {
	LLMFS_CPU=$3 "$bin/llmfs-bench" -m "$1" -t "$T" -r 1 $exact \
		$(args "$2") 2>"$work/err" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "t/s") print $(i + 1) }'
}
run_llama() {
	# llama-bench's CSV: the avg_ts column, found by its header
	"${lbench[$3]}" -m "$1" -t "$T" -r 1 $(largs "$2") -o csv 2>"$work/err" |
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "avg_ts") c = i }
			NR == 2 { gsub(/"/, "", $c); print $c }'
}

echo "threads $T, $ROUNDS interleaved rounds, one repetition per call," \
	"llmfs ${exact:-without --batch-exact}, levels:$levels;" \
	"load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A res
for r in $(seq "$ROUNDS"); do
	bw=$("$bin/llmfs-bench" --membw 256 -t "$T" -r 3 | awk '{ print $3 }')
	res[membw]+="$bw "
	for level in $levels; do
		for name in $names; do
			f=$(file "$name")
			for t in $(tests_of "$name"); do
				if [ $((r % 2)) -eq 1 ]; then
					a=$(run_llmfs "$f" "$t" "$level")
					b=$(run_llama "$f" "$t" "$level")
				else
					b=$(run_llama "$f" "$t" "$level")
					a=$(run_llmfs "$f" "$t" "$level")
				fi
				res[$level.$name.$t.llmfs]+="${a:-nan} "
				res[$level.$name.$t.llama]+="${b:-nan} "
				echo "round $r $level $name $t: llmfs ${a:-failed}" \
					"llama.cpp ${b:-failed} t/s"
			done
		done
	done
done

med() { bench_median ${res[$1]}; }
bw=$(med membw)
for level in $levels; do
	echo
	echo "$level (llama.cpp's $(variant "$level") variant):"
	echo
	echo "| figure | model | llama.cpp t/s | llmfs t/s | ratio |"
	echo "|---|---|---|---|---|"
	for name in $names; do
		for t in $(tests_of "$name"); do
			a=$(med "$level.$name.$t.llmfs")
			b=$(med "$level.$name.$t.llama")
			fig=$(case $t in pp) echo "pp512";; tg) echo "tg128";;
				tgd) echo "tg64 @ d1024";; esac)
			awk -v n="$fig" -v m="$(label "$name")" -v a="$a" -v b="$b" \
				'BEGIN { printf "| %s | %s | %.1f | %.1f | %.2f |\n",
					n, m, b, a, (b > 0 ? a / b : 0) }'
		done
	done
done
echo
echo "memory read bandwidth (llmfs-bench --membw, $T threads, median): $bw GB/s"
for level in $levels; do
	for type in q8_0 q4_k_m; do
		case " $names " in *" $type "*) ;; *) continue ;; esac
		f=$(file "$type")
		line=$(LLMFS_CPU=$level "$bin/llmfs-bench" -m "$f" -t "$T" -r 1 \
			-n 1 2>/dev/null)
		wb=$(echo "$line" | grep -o 'tensor_bytes [0-9]*' | cut -d' ' -f2)
		kv=$(echo "$line" | grep -o 'kv_bytes_per_token [0-9]*' | cut -d' ' -f2)
		for t in tg tgd; do
			case " $TESTS " in *" $t "*) ;; *) continue ;; esac
			for side in llmfs llama; do
				v=$(med "$level.$type.$t.$side")
				# at depth 1024 every token also reads ~1056 cached rows
				awk -v s="$side" -v m="$type" -v t="$t" -v v="$v" \
					-v w="$wb" -v kv="$kv" -v bw="$bw" \
					-v l="$level" 'BEGIN {
					d = t == "tgd" ? 1056 : 64
					bytes = w + kv * d
					printf "decode bandwidth %s %s %s %s: %.1f MB/token x %.1f t/s = %.2f GB/s, %.0f%% of %.2f GB/s\n",
						l, m, t == "tgd" ? "tg64@d1024" : "tg128", s,
						bytes / 1e6, v, bytes * v / 1e9,
						100 * bytes * v / 1e9 / bw, bw }'
			done
		done
	done
done

# Open to first token of the 8B, page cache warm, whole processes.
if [ "$BIG" = 1 ]; then
	f=$(file 8b)
	level=${levels# }
	level=${level%% *}
	cat "$f" >/dev/null # into the page cache
	wall() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
		awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'; }
	declare -A ttft
	for r in $(seq "$ROUNDS"); do
		ttft[pack]+="$(wall "$bin/llmfs-run" -m "$f" -t "$T" -n 1 \
			-p "Once upon a time") "
		ttft[nopack]+="$(wall "$bin/llmfs-run" -m "$f" -t "$T" -n 1 \
			--no-pack -p "Once upon a time") "
		ttft[llama]+="$(wall "${lbench[$level]}" -m "$f" -t "$T" -r 1 \
			-p 4 -n 0) "
	done
	p=$(bench_median ${ttft[pack]}); np=$(bench_median ${ttft[nopack]})
	l=$(bench_median ${ttft[llama]})
	echo
	awk -v p="$p" -v np="$np" -v l="$l" -v r="$ROUNDS" 'BEGIN {
		printf "open to first token, 8B Q4_K_M, page cache warm (median of %d): llmfs-run %.2f s (packing as it loads; %.2f s with --no-pack: packing adds %.0f%%), llama.cpp (llama-bench: load, warm-up, pp4) %.2f s\n",
			r, p, np, (np > 0 ? 100 * (p - np) / np : 0), l }'
fi

[ "${BENCH_CPU_MOUNT:-1}" = 1 ] || exit 0
BENCH_MOUNT_MODEL=$models/qwen3-0.6b-shape-q4_k_m.gguf \
	BENCH_MOUNT_SESSIONS=$SESSIONS BENCH_MOUNT_TOKENS=${BENCH_CPU_TOKENS:-128} \
	BENCH_MOUNT_ROUNDS=$ROUNDS BENCH_THREADS=$T tools/bench-mount.sh
