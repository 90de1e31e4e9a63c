#!/usr/bin/env bash
# The KV cache through the mount (Documentation/kv.md): --kv-type-k/-v
# reach the engine (the answer equals llmfs-run's with the same types),
# the kv file's lines (types, bytes per token, budget, the ceiling table),
# type_k=/type_v= writes and their errors; a small --kv-mem: a prompt that
# can never fit fails with ENOSPC and an errors line, 64 concurrent
# sessions all finish with the right answer (the rest wait their turn) and
# the daemon's peak RSS stays under weights + budget + 64 MiB.
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
for k in budget used committed free blocks block_tokens block_bytes \
		context_ceiling; do
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
check "at most 5 generations held the pool at once (saw $(cat "$WORK/most"))" \
	[ "$(cat "$WORK/most")" -le 5 ]
bad=0
for i in $(seq 64); do
	cmp -s "$WORK/expect-s" "$WORK/many.$i" || bad=$((bad + 1))
done
check "64 sessions in a 5-block budget: all 64 answers right ($bad wrong)" [ $bad = 0 ]
check "kv: all blocks back after them" grep -qx 'used 0' "$S/kv"
weights=$(grep '^tensor_bytes ' "$S/info" | cut -d' ' -f2)
[ -n "$weights" ] || weights=$(stat -c %s "$STORIES")
hwm=$(awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$PID/status")
limit=$((weights + 204800 + 64 * 1024 * 1024))
check "daemon peak RSS $hwm <= weights + budget + 64 MiB ($limit)" [ "$hwm" -le "$limit" ]
unmount_llmfs
finish
