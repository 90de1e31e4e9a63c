#!/usr/bin/env bash
# CPU speed against llama.cpp's llama-bench, measured in the same run.
#
# Two models of Qwen3-0.6B shape (n_embd 1024, 28 layers, 16 heads, 8 KV
# heads, head_dim 128, n_ff 3072, tied embeddings, the real 151,936-token
# Qwen2 vocabulary), random seeded weights written by llmfs-write-model:
# Q8_0, and a Q4_K_M-style mix (Q4_K; Q6_K for attn_v, ffn_down and
# token_embd). For each, three figures as llama-bench defines them:
#   pp512          a 512-token prompt               (llama-bench -p 512)
#   tg128          128 tokens from an empty context (llama-bench -n 128)
#   tg64 @ d1024   64 tokens after 1024 of context  (llama-bench -n 64 -d 1024)
# llmfs-bench measures the same thing the same way (tools/llmfs-bench.c).
# Rounds are interleaved (each round runs every figure on both sides, the
# side that goes first alternating), one repetition per call; the table
# gives the median over the rounds (the machine is shared: say how loaded).
#
# Decode bandwidth: bytes read per token (the weights, plus the K/V cache
# at depth) x t/s, against the read bandwidth llmfs-bench --membw measures
# in every round (median).
#
# Through the mount: aggregate decode tokens/s of 1, 4 and 16 concurrent
# sessions on the Q4_K_M model (each a process session of its own, shell
# idiom: write the prompt, read the answer), tokens after each reader's
# first over the span from the earliest first byte to the last EOF; 128
# tokens each (64 until the fourth round of issue 12: a longer span
# leaves less to the steps in which the sessions join and end).
#
# Environment: BENCH_CPU_ROUNDS (3), BENCH_THREADS (2), BENCH_CPU_MODELS (a
# folder to keep the two models in between runs; default: a temporary
# one), BENCH_CPU_MOUNT (1; 0 skips the mount part), BENCH_CPU_SESSIONS
# ("1 4 16"), BENCH_CPU_TOKENS (128, per session through the mount),
# BENCH_CPU_TESTS ("pp tg tgd"), BENCH_CPU_EXACT (0; 1 runs
# llmfs-bench with --batch-exact: batches in the one-token path's order,
# Documentation/engine.md "The rows-in-lanes GEMM").
. "$(dirname "$0")/bench-lib.bash"
ROUNDS=${BENCH_CPU_ROUNDS:-3}
T=${BENCH_THREADS:-2}
TESTS=${BENCH_CPU_TESTS:-pp tg tgd}
SESSIONS=${BENCH_CPU_SESSIONS:-1 4 16}
VOCAB=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf

bench_need_tools llmfs-bench llmfs-write-model
[ -f "$VOCAB" ] || bench_skip "no $VOCAB (the Qwen2 vocabulary)"
bench_llama llama-bench
lbench=$llama_bin/llama-bench
bench_workdir
models=${BENCH_CPU_MODELS:-$work}
mkdir -p "$models"

shape=(--arch qwen3 --embd 1024 --layers 28 --heads 16 --kv-heads 8
	--head-dim 128 --ff 3072 --tied --ctx 4096 --seed 1 --vocab-from "$VOCAB")
for type in q8_0 q4_k_m; do
	bench_write_model "$models/qwen3-0.6b-shape-$type.gguf" "${shape[@]}" \
		--type "$type"
done

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
# t/s of one repetition on each side ("" on a failure)
exact=
[ "${BENCH_CPU_EXACT:-0}" = 1 ] && exact=--batch-exact
run_llmfs() {
	"$bin/llmfs-bench" -m "$1" -t "$T" -r 1 $exact $(args "$2") 2>"$work/err" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "t/s") print $(i + 1) }'
}
run_llama() {
	# llama-bench's CSV: the avg_ts column, found by its header
	"$lbench" -m "$1" -t "$T" -r 1 $(largs "$2") -o csv 2>"$work/err" |
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "avg_ts") c = i }
			NR == 2 { gsub(/"/, "", $c); print $c }'
}

echo "threads $T, $ROUNDS interleaved rounds, one repetition per call," \
	"llmfs ${exact:-without --batch-exact};" \
	"load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A res
for r in $(seq "$ROUNDS"); do
	bw=$("$bin/llmfs-bench" --membw 256 -t "$T" -r 3 | awk '{ print $3 }')
	res[membw]+="$bw "
	for type in q8_0 q4_k_m; do
		f=$models/qwen3-0.6b-shape-$type.gguf
		for t in $TESTS; do
			if [ $((r % 2)) -eq 1 ]; then
				a=$(run_llmfs "$f" "$t"); b=$(run_llama "$f" "$t")
			else
				b=$(run_llama "$f" "$t"); a=$(run_llmfs "$f" "$t")
			fi
			res[$type.$t.llmfs]+="${a:-nan} "
			res[$type.$t.llama]+="${b:-nan} "
			echo "round $r $type $t: llmfs ${a:-failed} llama.cpp ${b:-failed} t/s"
		done
	done
done

med() { bench_median ${res[$1]}; }
bw=$(med membw)
echo
echo "| figure | model | llama.cpp t/s | llmfs t/s | ratio |"
echo "|---|---|---|---|---|"
for type in q8_0 q4_k_m; do
	for t in $TESTS; do
		a=$(med "$type.$t.llmfs"); b=$(med "$type.$t.llama")
		name=$(case $t in pp) echo "pp512";; tg) echo "tg128";;
			tgd) echo "tg64 @ d1024";; esac)
		awk -v n="$name" -v m="$type" -v a="$a" -v b="$b" 'BEGIN {
			printf "| %s | %s | %.1f | %.1f | %.2f |\n", n, m, b, a,
				(b > 0 ? a / b : 0) }'
	done
done
echo
echo "memory read bandwidth (llmfs-bench --membw, $T threads, median): $bw GB/s"
for type in q8_0 q4_k_m; do
	f=$models/qwen3-0.6b-shape-$type.gguf
	line=$("$bin/llmfs-bench" -m "$f" -t "$T" -r 1 -n 1 2>/dev/null)
	wb=$(echo "$line" | grep -o 'tensor_bytes [0-9]*' | cut -d' ' -f2)
	kv=$(echo "$line" | grep -o 'kv_bytes_per_token [0-9]*' | cut -d' ' -f2)
	for t in tg tgd; do
		case " $TESTS " in *" $t "*) ;; *) continue ;; esac
		for side in llmfs llama; do
			v=$(med "$type.$t.$side")
			# at depth 1024 every token also reads ~1056 cached rows
			awk -v s="$side" -v m="$type" -v t="$t" -v v="$v" \
				-v w="$wb" -v kv="$kv" -v bw="$bw" 'BEGIN {
				d = t == "tgd" ? 1056 : 64
				bytes = w + kv * d
				printf "decode bandwidth %s %s %s: %.1f MB/token x %.1f t/s = %.2f GB/s, %.0f%% of %.2f GB/s\n",
					m, t == "tgd" ? "tg64@d1024" : "tg128", s,
					bytes / 1e6, v, bytes * v / 1e9,
					100 * bytes * v / 1e9 / bw, bw }'
		done
	done
done

[ "${BENCH_CPU_MOUNT:-1}" = 1 ] || exit 0
bench_have_fuse || bench_skip "mount part: no llmfs, /dev/fuse or fusermount3"
f=$models/qwen3-0.6b-shape-q4_k_m.gguf
bench_mount q4km --threads "$T" --name q4km="$f"
NTOK=${BENCH_CPU_TOKENS:-128}
printf 'temperature=0\nmax_tokens=%d\n' "$NTOK" > "$mnt/q4km/config"
# One reader: prompt in, first byte and EOF times out. It starts when the
# round's lock is released (flock $3): the readers are processes of their
# own, and on 2 busy cores starting one takes milliseconds, so without the
# lock the later sessions joined tens of milliseconds after the first.
reader() {
	setsid bash -c '
		touch "$3.$4"
		flock -s "$3" true
		printf "%s" "$2" > "$1/q4km/generate"
		{ IFS= read -r -n 1 _; t0=$(date +%s.%N); cat >/dev/null
		  echo "$t0 $(date +%s.%N)"; } < "$1/q4km/generate"' _ \
		"$mnt" "$1" "$work/go" "$2"
}
tokens_out() { grep '^tokens_out ' "$mnt/q4km/stats" | cut -d' ' -f2; }
# an untimed generation first (llama-bench warms up too): the first one
# after a load pays for page faults the others do not
echo warm-up > "$mnt/q4km/generate" && cat "$mnt/q4km/generate" >/dev/null
# and a quiet daemon: after a load it hashes the model file for info's
# sha256 line, which took a core from the first round (at most a minute),
# and merges the weights into huge pages while idle (stats:
# weights_merge), without which the first rounds ran on 4 KiB pages: 4
# sessions' panels then cost 37-47% more per token (engine.md)
for w in $(seq 600); do
	grep -q '^sha256 [0-9a-f]' "$mnt/q4km/info" &&
		grep -qE '^weights_merge (done|unsupported)$' \
			"$mnt/q4km/stats" && break
	sleep 0.1
done
echo
echo "through the mount (Q4_K_M, $NTOK tokens each, greedy, threads $T, $ROUNDS rounds, median):"
# Rounds interleaved as above: round r runs every session count in turn,
# so that a drift of the machine over the run (neighbours come and go)
# weighs on every count alike.
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
		sleep 0.2   # the stats line follows the last EOF
		# tokens the engine made, less each reader's first one
		got=$(( $(tokens_out) - before - n ))
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
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
