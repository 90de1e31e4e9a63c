#!/usr/bin/env bash
# Cold-cache load bandwidth and cold time-to-first-token, each against its
# reference measured in the same run (called by tools/bench.sh, make bench).
#
#   1. a synthetic llama model of about 1.4 GB (tools/llmfs-write-model,
#      q8_0, 6 layers of 4096/11008, the vocabulary of a shared model) in a
#      directory on a real disk ($BENCH_DIR, default build/bench; not tmpfs)
#   2. the disk's O_DIRECT sequential read bandwidth: dd bs=4M iflag=direct
#      vs llmfs-load (io_uring + O_DIRECT into the final memory), each after
#      dropping the page cache, $BENCH_ROUNDS times alternating; medians
#   3. cold time-to-first-token: llmfs-run -n 1 (whole process: load, prompt,
#      one token) vs llama.cpp through node-llama-cpp (tools/bench/ttft.mjs),
#      each after dropping the page cache; medians
#
# Dropping the page cache needs root (or sudo -n); without it the figures
# are warm-cache and say so. Environment: BUILD, BENCH_DIR, BENCH_ROUNDS (3),
# BENCH_THREADS (CPUs), LLAMA_REF_DIR (folder with node_modules of
# node-llama-cpp; default ./ref, then ../ref), SHARED (../shared).
. "$(dirname "$0")/bench-lib.bash"
BENCH_DIR=${BENCH_DIR:-$BUILD/bench}
ROUNDS=${BENCH_ROUNDS:-3}
THREADS=${BENCH_THREADS:-$(nproc)}
PROMPT="Once upon a time"
MODEL=$BENCH_DIR/synth-llama-q8_0.gguf

bench_need_tools llmfs-write-model llmfs-load llmfs-run
mkdir -p "$BENCH_DIR" || exit 1
fstype=$(stat -f -c %T "$BENCH_DIR")
case $fstype in
tmpfs|ramfs) echo "bench-load: $BENCH_DIR is on $fstype, not a disk: set BENCH_DIR"; exit 1 ;;
esac

[ -s "$MODEL" ] || echo "writing $MODEL ..."
bench_write_model "$MODEL" --arch llama --embd 4096 --layers 6 --heads 32 \
	--kv-heads 8 --head-dim 128 --ff 11008 --type q8_0 \
	--vocab-from "$SHARED/models/tiny-llama-spm32k-kquant.gguf" --seed 1
size=$(stat -c %s "$MODEL")

cold=1
drop() {
	sync
	if [ "$(id -u)" = 0 ]; then
		echo 3 >/proc/sys/vm/drop_caches 2>/dev/null && return 0
	elif sudo -n true 2>/dev/null; then
		sudo -n sh -c 'echo 3 > /proc/sys/vm/drop_caches' && return 0
	fi
	cold=0
	return 1
}
now() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f%%", (b > 0) ? 100*a/b : 0}'; }

echo "model $MODEL: $size bytes on $fstype ($(df --output=source "$BENCH_DIR" | tail -1)), $ROUNDS rounds"
# dd reads one 4 MiB request at a time; a disk that serves several at once
# (NVMe, virtio) is faster than that, so four dd on the four quarters of
# the file, together, are the second reference.
dd4() {
	local q=$(( (size + 4 * 4194304 - 1) / (4 * 4194304) )) i s e
	s=$(now)
	for i in 0 1 2 3; do
		dd if="$MODEL" of=/dev/null bs=4M iflag=direct skip=$((i * q)) \
			count=$q 2>/dev/null &
	done
	wait
	e=$(now)
	awk -v b="$size" -v s="$s" -v e="$e" 'BEGIN {printf "%.3f", b/(e-s)/1e9}'
}

dd_gbps=() dd4_gbps=() load_gbps=()
for ((r = 1; r <= ROUNDS; r++)); do
	drop
	out=$(dd if="$MODEL" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1)
	secs=$(echo "$out" | sed -E 's/.* copied, ([0-9.]+) s.*/\1/')
	dd_gbps+=("$(awk -v b="$size" -v s="$secs" 'BEGIN {printf "%.3f", b/s/1e9}')")
	drop
	dd4_gbps+=("$(dd4)")
	drop
	res=$("$BUILD/bin/llmfs-load" "$MODEL" 2>/dev/null | grep '^result ')
	path=$(echo "$res" | sed -E 's/.*uring=([01]) direct=([01]) fixed=([01]).*/uring=\1 direct=\2 fixed=\3/')
	load_gbps+=("$(echo "$res" | sed -E 's/.*gbps=([0-9.]+).*/\1/')")
	echo "  round $r: dd ${dd_gbps[-1]} GB/s, 4 x dd ${dd4_gbps[-1]} GB/s," \
		"llmfs-load ${load_gbps[-1]} GB/s ($path)"
done
dd_med=$(bench_median "${dd_gbps[@]}")
dd4_med=$(bench_median "${dd4_gbps[@]}")
load_med=$(bench_median "${load_gbps[@]}")
best=$(printf '%s\n' "$dd_med" "$dd4_med" | sort -g | tail -1)
[ $cold = 1 ] || echo "  (page cache NOT dropped: not root; warm-cache figures)"
echo "load bandwidth (medians): disk O_DIRECT dd bs=4M $dd_med GB/s, 4 x dd $dd4_med GB/s;" \
	"llmfs-load $load_med GB/s = $(ratio "$load_med" "$best") of the better disk figure (target >= 90%)"

ours=() ours_gen=() theirs=() theirs_init=()
ref_ok=1
for ((r = 1; r <= ROUNDS; r++)); do
	drop
	s=$(now)
	stats=$("$BUILD/bin/llmfs-run" -m "$MODEL" -p "$PROMPT" -n 1 --temp 0 \
		-t "$THREADS" 2>&1 >/dev/null) || { echo "bench-load: llmfs-run failed: $stats"; exit 1; }
	e=$(now)
	ours+=("$(awk -v s="$s" -v e="$e" 'BEGIN {printf "%.0f", (e-s)*1000}')")
	# llmfs-run's own ttft_ms runs from the first prepare: prompt + 1 token
	ours_gen+=("$(echo "$stats" | sed -nE 's/.*ttft_ms=([0-9.]+).*/\1/p' | tail -1)")
	drop
	json=$(node tools/bench/ttft.mjs "$MODEL" "$PROMPT" "$THREADS" 2>&1 | tail -1)
	if ! echo "$json" | grep -q '"ttft_ms"'; then
		echo "  llama.cpp reference unavailable: $json"
		ref_ok=0
		echo "  round $r: llmfs-run ${ours[-1]} ms (prompt + first token ${ours_gen[-1]} ms)"
		continue
	fi
	theirs+=("$(echo "$json" | sed -E 's/.*"ttft_ms":([0-9.]+).*/\1/')")
	theirs_init+=("$(echo "$json" | sed -E 's/.*"init_ms":([0-9.]+).*/\1/')")
	echo "  round $r: llmfs-run ${ours[-1]} ms (whole process; prompt + first token ${ours_gen[-1]} ms)," \
		"llama.cpp ${theirs[-1]} ms (+ ${theirs_init[-1]} ms node-llama-cpp init)"
done
ours_med=$(bench_median "${ours[@]}")
if [ $ref_ok = 1 ]; then
	theirs_med=$(bench_median "${theirs[@]}")
	echo "cold TTFT ($THREADS threads): llmfs $ours_med ms, llama.cpp $theirs_med ms," \
		"llmfs takes $(ratio "$ours_med" "$theirs_med") of llama.cpp's time"
else
	echo "cold TTFT ($THREADS threads): llmfs $ours_med ms, llama.cpp: not measured"
fi
