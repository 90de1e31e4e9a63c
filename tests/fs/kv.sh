#!/usr/bin/env bash
# The KV cache through the mount (Documentation/kv.md): --kv-type-k/-v
# reach the engine (the answer equals llmfs-run's with the same types),
# the kv file's lines (types, bytes per token, budget, the ceiling table),
# type_k=/type_v= writes and their errors; a small --kv-mem: a prompt that
# can never fit fails with ENOSPC and an errors line, 64 concurrent
# sessions all finish with the right answer (the rest wait their turn) and
# the daemon's peak RSS stays under weights + budget + 64 MiB.
# Sessions keep their cache: a second turn (generate and chat) equals the
# whole conversation evaluated in one go and evaluates only its new
# tokens (stats: tokens_in_evaluated); a prompt sharing a prefix with an
# earlier one evaluates only its suffix; a session whose cache was dropped
# for others rebuilds it from its conversation.
# mixq (head_dim 128) is a model whose greedy answer the cache types change.
. "$(dirname "$0")/mount-lib.bash"

P='Once upon a time'
mount_llmfs --kv-type-k q8_0 --kv-type-v q4_0 --name qwen="$MIXQ"
wait_loaded || fail "model loaded in 10 s"
Q=$MNT/qwen

cat "$Q/kv" > "$WORK/kv"
check "kv: type_k q8_0" grep -qx 'type_k q8_0' "$WORK/kv"
check "kv: type_v q4_0" grep -qx 'type_v q4_0' "$WORK/kv"
# 2 layers x 2 KV heads x head_dim 128: q8_0 34 bytes a block of 32, q4_0 18
check "kv: k_bytes_per_token 544" grep -qx 'k_bytes_per_token 544' "$WORK/kv"
check "kv: v_bytes_per_token 288" grep -qx 'v_bytes_per_token 288' "$WORK/kv"
check "kv: bytes_per_token 832" grep -qx 'bytes_per_token 832' "$WORK/kv"
for k in budget used committed free blocks blocks_shared memory \
		block_tokens block_bytes context_ceiling; do
	check "kv: $k" grep -qE "^$k [0-9]+$" "$WORK/kv"
done
check "kv: a ceiling line per type pair (64)" \
	[ "$(grep -c '^ceiling ' "$WORK/kv")" = 64 ]
check "kv: ceiling f16/f16 at 2048 bytes a token" \
	grep -qE '^ceiling f16/f16 2048 [0-9]+$' "$WORK/kv"

echo 'temperature=0' > "$Q/config"
printf '%s' "$P" > "$Q/generate"
cat "$Q/generate" > "$WORK/got"
"$RUN" -m "$MIXQ" -p "$P" --temp 0 -n 256 --kv-type-k q8_0 --kv-type-v q4_0 \
	> "$WORK/expect" 2>/dev/null
same "$WORK/expect" "$WORK/got" "generate with q8_0/q4_0 = llmfs-run with the same types"
"$RUN" -m "$MIXQ" -p "$P" --temp 0 -n 256 > "$WORK/f16" 2>/dev/null
if cmp -s "$WORK/f16" "$WORK/got"; then fail "the types matter"; else ok "the types matter (f16 gives another answer)"; fi

echo 'type_k=f16' > "$Q/kv" && echo 'type_v=f16' > "$Q/kv"
check "kv: type_k= and type_v= apply" grep -qx 'type_v f16' "$Q/kv"
printf '%s' "$P" > "$Q/generate"
cat "$Q/generate" > "$WORK/got16"
same "$WORK/f16" "$WORK/got16" "after type_k=f16 type_v=f16: the f16 answer"
for bad in 'type_k=q9' 'n_ctx=1' 'type_v' 'type_k=q4_K'; do
	if echo "$bad" > "$Q/kv" 2>"$WORK/err"; then
		fail "kv: '$bad' is refused"
	else
		check "kv: '$bad' is EINVAL" grep -q 'Invalid argument' "$WORK/err"
	fi
done
check "kv: errors names the bad type" grep -q 'kv: type_k=q9' "$Q/errors"
check "kv: a refused write changes nothing" grep -qx 'type_k f16' "$Q/kv"
unmount_llmfs

# stories260K: 5 layers x 4 KV heads x 8 x 2 x F16 = 640 bytes a token,
# 40960 a block of 64; 200 KiB holds 5 blocks (320 tokens).
mount_llmfs --kv-mem 200k --name stories="$STORIES"
wait_loaded || fail "model loaded in 10 s"
S=$MNT/stories
check "kv: budget 204800" grep -qx 'budget 204800' "$S/kv"
check "kv: context_ceiling 320" grep -qx 'context_ceiling 320' "$S/kv"
long=$(for i in $(seq 40); do printf 'The cat sat on the mat. '; done)
printf '%s' "$long" > "$S/generate"
if cat "$S/generate" > /dev/null 2>"$WORK/err"; then
	fail "a prompt over the budget fails"
else
	check "a prompt over the budget is ENOSPC" grep -q 'No space left' "$WORK/err"
fi
cat "$S/errors" >"$WORK/errs"; check "errors: the budget line" grep -q "budget of 204800 bytes holds 320" "$WORK/errs"

printf 'temperature=0\nmax_tokens=40\n' > "$S/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 40 > "$WORK/expect-s" 2>/dev/null
# watch the running sequences meanwhile: never more than the 5 blocks
(most=0; while [ ! -e "$WORK/done" ]; do
	n=$(grep -c '^sequence ' "$S/kv"); [ "$n" -gt "$most" ] && most=$n
	echo "$most" > "$WORK/most"; sleep 0.02; done) &
watcher=$!
pids=
for i in $(seq 64); do
	n=$(cat "$S/sessions/new")
	printf '%s' "$P" > "$S/sessions/$n/generate"
	(cat "$S/sessions/$n/generate" > "$WORK/many.$i") &
	pids="$pids $!"
done
wait $pids
touch "$WORK/done"; wait $watcher
first=$(ls -d "$S"/sessions/[0-9]* | head -n 1)
printf '%s' "$P" > "$first/generate"
cat "$first/generate" > "$WORK/rebuilt"
"$RUN" -m "$STORIES" -p "$P$(cat "$WORK/expect-s")$P" --temp 0 -n 40 \
	> "$WORK/expect-rebuilt" 2>/dev/null
same "$WORK/expect-rebuilt" "$WORK/rebuilt" "a session whose cache was dropped rebuilds it: second turn right"
check "at most 5 generations held the pool at once (saw $(cat "$WORK/most"))" \
	[ "$(cat "$WORK/most")" -le 5 ]
bad=0
for i in $(seq 64); do
	cmp -s "$WORK/expect-s" "$WORK/many.$i" || bad=$((bad + 1))
done
check "64 sessions in a 5-block budget: all 64 answers right ($bad wrong)" [ $bad = 0 ]
check "kv: the sessions keep blocks, within the budget" \
	awk '$1 == "committed" && $2 <= 204800 { ok = 1 } END { exit !ok }' "$S/kv"
for d in "$S"/sessions/[0-9]*; do rmdir "$d"; done
check "kv: every block back once the sessions are gone" grep -qx 'used 0' "$S/kv"
weights=$(grep '^tensor_bytes ' "$S/info" | cut -d' ' -f2)
[ -n "$weights" ] || weights=$(stat -c %s "$STORIES")
hwm=$(awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$PID/status")
limit=$((weights + 204800 + 64 * 1024 * 1024))
check "daemon peak RSS $hwm <= weights + budget + 64 MiB ($limit)" [ "$hwm" -le "$limit" ]
unmount_llmfs

evaluated() { awk '$1 == "tokens_in_evaluated" { print $2 }' "$1/stats"; }
ntok() { printf '%s' "$2" > "$1/tokenize"; wc -w < "$1/tokenize"; }
mount_llmfs --name stories="$STORIES" --name qwen="$QWEN"
wait_loaded || fail "models loaded in 10 s"
S=$MNT/stories
Q=$MNT/qwen
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"
printf 'temperature=0\nmax_tokens=24\n' > "$Q/config"
P1='Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.'
P2=' One day, her mom said'
n=$(cat "$S/sessions/new")
printf '%s' "$P1" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/a1"
e0=$(evaluated "$S")
printf '%s' "$P2" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/a2"
e1=$(evaluated "$S")
"$RUN" -m "$STORIES" -p "$P1$(cat "$WORK/a1")$P2" --temp 0 -n 24 > "$WORK/one-go" 2>/dev/null
same "$WORK/one-go" "$WORK/a2" "two-turn session = the conversation in one go"
full=$(ntok "$S" "$P1$(cat "$WORK/a1")$P2")
first=$(ntok "$S" "$P1")
check "the second turn evaluates only new tokens ($((e1 - e0)) of $full, first turn $first)" \
	[ $((e1 - e0)) -le $((full - first - 24 + 2)) ]

# chat: the model's template (Qwen2's, its default system message
# included) around every turn, only the new one evaluated
c=$(cat "$Q/sessions/new")
printf 'Tell me a story.' > "$Q/sessions/$c/chat"
cat "$Q/sessions/$c/chat" > "$WORK/c1"
e0=$(evaluated "$Q")
printf 'And then?' > "$Q/sessions/$c/chat"
cat "$Q/sessions/$c/chat" > "$WORK/c2"
e1=$(evaluated "$Q")
conv="<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Tell me a story.<|im_end|>
<|im_start|>assistant
$(cat "$WORK/c1")<|im_end|>
<|im_start|>user
And then?<|im_end|>
<|im_start|>assistant
"
"$RUN" -m "$QWEN" -p "$conv" --temp 0 -n 24 > "$WORK/c-one-go" 2>/dev/null
same "$WORK/c-one-go" "$WORK/c2" "two-turn chat = the templated conversation in one go"
check "the second chat turn evaluates only its turn ($((e1 - e0)) tokens)" \
	[ $((e1 - e0)) -le 16 ]
check "history shows both chat turns" \
	[ "$(grep -c -- '--- chat' "$Q/sessions/$c/history")" = 2 ]

# prefix cache: a second prompt sharing the first one's prefix
printf '%s' "$P1 Then" > "$S/generate"
cat "$S/generate" > /dev/null
e0=$(evaluated "$S")
printf '%s' "$P1 But one day" > "$S/generate"
cat "$S/generate" > "$WORK/p2"
e1=$(evaluated "$S")
"$RUN" -m "$STORIES" -p "$P1 But one day" --temp 0 -n 24 > "$WORK/p2-fresh" 2>/dev/null
same "$WORK/p2-fresh" "$WORK/p2" "a reused prefix gives the text of a fresh evaluation"
check "a shared prefix: only the suffix evaluated ($((e1 - e0)) tokens)" \
	[ $((e1 - e0)) -le 5 ]
unmount_llmfs
finish
