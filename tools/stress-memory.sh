#!/usr/bin/env bash
# The memory budget under the load of issue 30's first defect, by hand
# (Documentation/reliability.md): N models of Qwen3-0.6B's shape (Q8_0,
# the real 152k Qwen2 vocabulary, random weights, written by
# llmfs-write-model as tools/bench-cpu.sh writes them) mounted with the
# default settings, S sessions each whose prompts share a long prefix.
# One session per model runs first (its cache is the prefix the others
# copy), then all the others are submitted at once and read at once. It
# reports the budget, the daemon's peak RSS against the memory available
# before, how many generations waited for room or got ENOSPC, whether the
# kernel killed anything for memory, and checks every answer against
# llmfs-run on the same text (greedy).
#
#   STRESS_MODELS=2 STRESS_SESSIONS=40 tools/stress-memory.sh
#
# STRESS_MODEL=FILE reuses a model written before (writing one takes
# minutes); STRESS_PREFIX_WORDS (410, about 2000 tokens), STRESS_SUFFIXES
# (4 distinct endings), STRESS_MAX_TOKENS (16), STRESS_LLMFS_ARGS (extra
# llmfs options; none by default). It fills most of the machine's memory
# for minutes: not part of make check or make bench.
. "$(dirname "$0")/bench-lib.bash"
MODELS=${STRESS_MODELS:-2}
SESSIONS=${STRESS_SESSIONS:-40}
WORDS=${STRESS_PREFIX_WORDS:-410}
SUFFIXES=${STRESS_SUFFIXES:-4}
MAXTOK=${STRESS_MAX_TOKENS:-16}
VOCAB=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf

bench_need_tools llmfs llmfs-run llmfs-write-model
bench_have_fuse || bench_skip "no /dev/fuse or fusermount3"
bench_workdir
model=${STRESS_MODEL:-$work/qwen3-0.6b-shape-q8_0.gguf}
bench_write_model "$model" --arch qwen3 --embd 1024 --layers 28 --heads 16 \
	--kv-heads 8 --head-dim 128 --ff 3072 --tied --ctx 4096 --seed 1 \
	--vocab-from "$VOCAB" --type q8_0

words() {
	local i
	for ((i = 0; i < WORDS; i++)); do
		printf '%s ' "w$(( (i * 104729 + 7919) % 9973 ))"
	done
}
prefix=$(words)
for k in $(seq 0 $((SUFFIXES - 1))); do
	printf '%sQuestion %d: and then?' "$prefix" "$k" > "$work/p$k"
done
meminfo() { awk -v k="$1:" '$1 == k { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }
ooms() { dmesg 2>/dev/null | grep -c 'Out of memory' ; }
avail=$(meminfo MemAvailable)
oom0=$(ooms)

names=()
for i in $(seq "$MODELS"); do names+=(--name "m$i=$model"); done
# shellcheck disable=SC2086
bench_mount "m$MODELS" "${names[@]}" ${STRESS_LLMFS_ARGS:-}
for i in $(seq "$MODELS"); do
	for _ in $(seq 600); do
		grep -q "^m$i .* ready " "$mnt/models" && break
		sleep 0.5
	done
	printf 'temperature=0\nmax_tokens=%d\n' "$MAXTOK" > "$mnt/m$i/config"
done
grep '^memory_budget' "$mnt/status" > "$work/budget"
rss0=$(awk '/^VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status")

# the daemon's RSS and the budget's KV bytes, every second
(
	while kill -0 "$pid" 2>/dev/null; do
		r=$(awk '/^VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status" 2>/dev/null)
		k=$(awk '$1 == "memory_budget_kv_bytes" { print $2 }' "$mnt/status" 2>/dev/null)
		echo "$SECONDS ${r:-0} ${k:-0}"
		sleep 1
	done
) > "$work/samples" &
bench_pids+=($!)

start=$SECONDS
# one session per model first: the prefix the others copy
for i in $(seq "$MODELS"); do
	n=$(cat "$mnt/m$i/sessions/new")
	cat "$work/p0" > "$mnt/m$i/sessions/$n/generate"
	cat "$mnt/m$i/sessions/$n/generate" > "$work/got-$i-1" 2>"$work/err-$i-1"
	echo "$? 0" > "$work/rc-$i-1"
done
first=$((SECONDS - start))
# then all the others at once
readers=()
for i in $(seq "$MODELS"); do
	for s in $(seq 2 "$SESSIONS"); do
		k=$((s % SUFFIXES))
		n=$(cat "$mnt/m$i/sessions/new")
		cat "$work/p$k" > "$mnt/m$i/sessions/$n/generate"
		( cat "$mnt/m$i/sessions/$n/generate" > "$work/got-$i-$s" \
			2>"$work/err-$i-$s"
		  echo "$? $k" > "$work/rc-$i-$s" ) &
		readers+=($!)
	done
done
wait "${readers[@]}"
secs=$((SECONDS - start))
hwm=$(awk '/^VmHWM/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status")
grep '^memory_budget' "$mnt/status" > "$work/budget-end"
waited=0
for i in $(seq "$MODELS"); do
	w=$(awk '$1 == "kv_waited" { print $2 }' "$mnt/m$i/stats")
	waited=$((waited + ${w:-0}))
done
fusermount3 -u "$mnt" && wait "$pid"
rc=$?
pid=
oom1=$(ooms)

# llmfs-run on each text: the answers to check against
for k in $(seq 0 $((SUFFIXES - 1))); do
	"$bin/llmfs-run" -m "$model" -f "$work/p$k" --temp 0 -n "$MAXTOK" \
		> "$work/want$k" 2>/dev/null
done
good=0 nospc=0 bad=0
for i in $(seq "$MODELS"); do
	for s in $(seq "$SESSIONS"); do
		read -r r k < "$work/rc-$i-$s"
		if [ "$r" = 0 ] && cmp -s "$work/want$k" "$work/got-$i-$s"; then
			good=$((good + 1))
		elif grep -q 'No space left' "$work/err-$i-$s"; then
			nospc=$((nospc + 1))
		else
			bad=$((bad + 1))
			echo "  m$i session $s: rc $r $(cat "$work/err-$i-$s")"
		fi
	done
done
kvpeak=$(awk '$1 == "memory_budget_kv_peak_bytes" { print $2 }' "$work/budget-end")
peakrss=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { printf "%.0f\n", m }' "$work/samples")
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }
echo "models $MODELS x $SESSIONS sessions, prompts of $(wc -c < "$work/p0") bytes" \
	"sharing $WORDS words, max_tokens $MAXTOK"
echo "memory available before: $(gib "$avail"); budget $(gib \
	"$(awk '$1 == "memory_budget_bytes" { print $2 }' "$work/budget")")," \
	"KV peak $(gib "$kvpeak")"
echo "daemon RSS: $(gib "$rss0") loaded, peak $(gib "$hwm") (VmHWM)," \
	"$(gib "$peakrss") sampled"
echo "first sessions ${first} s, all ${secs} s; generations that waited" \
	"for room: $waited; answers equal to llmfs-run's: $good, ENOSPC:" \
	"$nospc, other: $bad"
echo "daemon exit $rc; kernel OOM kills during the run: $((oom1 - oom0))"
[ "$bad" = 0 ] && [ "$((oom1 - oom0))" = 0 ] && [ "$hwm" -lt "$avail" ]
