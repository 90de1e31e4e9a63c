#!/usr/bin/env bash
# Chunked prefill (fs/sched.c): a long prompt is evaluated in chunks
# between the decode steps of the other generations, so an 8-token answer
# submitted while a 2,400-token prompt is being read finishes long before
# that prompt's first token (before the fix it waited for the whole
# prompt). Orders of magnitude, not tight timings: the short answer must
# end before the long one's first token and take under half its time. The
# answers are the same as alone (the chunks change no logit). 24 layers:
# the long prompt must take about a second for the short answer to
# overtake it; with 4 layers the tiled prompt attention (engine.md, Speed)
# reads it in under 0.2 s, before the short answer is even submitted.
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 is absent"
WRITE=$BUILD/bin/llmfs-write-model
[ -x "$WRITE" ] || skip "$WRITE is not built"

"$WRITE" -o "$WORK/pf.gguf" --arch llama --embd 128 --layers 24 --heads 4 \
	--kv-heads 2 --head-dim 32 --ff 384 --type f32 --ctx 4096 \
	--vocab-from "$STORIES" > /dev/null 2>&1 || fail "llmfs-write-model"
LONG=$(python3 -c "print('Once upon a time there was a little girl. ' * 200, end='')")
SHORT='Once upon a time'
"$RUN" -m "$WORK/pf.gguf" -p "$LONG" --temp 0 -n 1 > "$WORK/expect-long" 2>/dev/null
"$RUN" -m "$WORK/pf.gguf" -p "$SHORT" --temp 0 -n 8 > "$WORK/expect-short" 2>/dev/null

mount_llmfs --prefill-chunk 32 --name pf="$WORK/pf.gguf"
wait_loaded || fail "model loaded"
M=$MNT/pf
echo temperature=0 > "$M/config"
l=$(cat "$M/sessions/new")
s=$(cat "$M/sessions/new")
echo max_tokens=1 > "$M/sessions/$l/config"
echo max_tokens=8 > "$M/sessions/$s/config"
n=$(printf '%s' "$LONG" > "$M/tokenize"; wc -w < "$M/tokenize")
check "the long prompt is over 2,000 tokens ($n)" [ "$n" -gt 2000 ]

now() { date +%s%N; }
t0=$(now)
( printf '%s' "$LONG" > "$M/sessions/$l/generate"
  cat "$M/sessions/$l/generate" > "$WORK/long"; now > "$WORK/long-end" ) &
bg=$!
# Wait until the long prompt is being read (stats does not wait for the
# scheduler; kv would).
for _ in $(seq 100); do grep -qx 'active 1' "$M/stats" && break; sleep 0.02; done
sleep 0.2
t1=$(now)
printf '%s' "$SHORT" > "$M/sessions/$s/generate"
cat "$M/sessions/$s/generate" > "$WORK/short"
t2=$(now)
wait $bg
t3=$(cat "$WORK/long-end")
short_ms=$(((t2 - t1) / 1000000))
long_ms=$(((t3 - t0) / 1000000))
echo "# short answer ${short_ms} ms, long prompt's first token ${long_ms} ms"
check "the short answer ends before the long prompt's first token" [ "$t2" -lt "$t3" ]
check "... in under half its time (${short_ms} ms vs ${long_ms} ms)" [ $((2 * short_ms)) -lt "$long_ms" ]
same "$WORK/expect-short" "$WORK/short" "the short answer is the one it gets alone"
same "$WORK/expect-long" "$WORK/long" "the chunked long prompt gives the same token"
unmount_llmfs
finish
