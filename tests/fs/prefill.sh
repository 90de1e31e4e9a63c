#!/usr/bin/env bash
# Chunked prefill (fs/sched.c): a long prompt is evaluated in chunks
# between the decode steps of the other generations, so an 8-token answer
# submitted while a 2,400-token prompt is being read finishes before that
# prompt's first token (before the fix it waited for the whole prompt).
# Checked on state, not on times: when the short answer is whole, the long
# prompt's reader has nothing yet and its generation is still active. The
# answers are the same as alone (the chunks change no logit). 24 layers:
# the long prompt must take long enough for the short answer to overtake
# it; with 4 layers the tiled prompt attention (engine.md, Speed) reads it
# before the short answer is even submitted.
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

( printf '%s' "$LONG" > "$M/sessions/$l/generate"
  cat "$M/sessions/$l/generate" > "$WORK/long" ) &
bg=$!
# Wait until the long prompt is being read: submitted (active 1), then
# three reads of kv, each a job of the model's scheduler, which runs its
# jobs between two steps: the second returns only after a step with the
# long prompt in it (its first chunk; the whole prompt, unchunked).
check "the long prompt is submitted" wait_for 120 grep -qx 'active 1' "$M/stats"
for _ in 1 2 3; do cat "$M/kv" > /dev/null; done
printf '%s' "$SHORT" > "$M/sessions/$s/generate"
cat "$M/sessions/$s/generate" > "$WORK/short"
check "the short answer ends before the long prompt's first token" \
	[ ! -s "$WORK/long" ]
check "... which is still being read (active 1)" grep -qx 'active 1' "$M/stats"
wait $bg
same "$WORK/expect-short" "$WORK/short" "the short answer is the one it gets alone"
same "$WORK/expect-long" "$WORK/long" "the chunked long prompt gives the same token"
unmount_llmfs
finish
