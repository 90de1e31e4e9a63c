#!/usr/bin/env bash
# `placement` writes that move layers between the CPU and the reference
# backend (ref0: LLMFS_REF_DEVICE=1 in the daemon's environment) while a
# session generates change no token: the answer is llmfs-run's, greedy,
# on the CPU alone. stories260K's every op is the one-token path on both
# backends, so the bits agree whenever a move lands. The placement file
# shows ref0; a move that would split a layer is EINVAL and moves nothing.
. "$(dirname "$0")/mount-lib.bash"

N=400
P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null
check "llmfs-run gave a reference text" [ -s "$WORK/expect" ]

LLMFS_REF_DEVICE=1 mount_llmfs --name stories="$STORIES"
S=$MNT/stories
wait_loaded || fail "model loaded in 10 s"
printf 'temperature=0\nmax_tokens=%d\n' $N > "$S/config"

moves=("blk.0-1 ref0" "all ref0" "all cpu" "blk.3-4 ref0" "blk.0-4 ref0"
	"all cpu")
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/got" &
reader=$!
i=0 seen=0
while kill -0 $reader 2>/dev/null; do
	echo "${moves[i % ${#moves[@]}]}" > "$S/placement" || fail "placement write ${moves[i % ${#moves[@]}]}"
	grep -q ' ref0$' "$S/placement" && seen=1
	i=$((i + 1))
done
wait $reader
echo "# $i placement writes during the answer"
check "placement writes landed while the answer was made" [ $i -ge 2 ]
check "the placement file showed ref0 during the answer" [ $seen = 1 ]
same "$WORK/expect" "$WORK/got" "layers moved cpu <-> ref0 mid-answer: llmfs-run's text"

echo "all ref0" > "$S/placement"
check "the placement file shows tensors on ref0" \
	grep -q '^blk.0.attn_q.weight .* ref0$' "$S/placement"
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/all"
same "$WORK/expect" "$WORK/all" "all of the model on ref0: llmfs-run's text"
if echo "blk.0.attn_q.weight cpu" > "$S/placement" 2>"$WORK/err"; then
	fail "a move splitting a layer was accepted"
else
	check "a move splitting a layer is EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "nothing moved" grep -q '^blk.0.attn_q.weight .* ref0$' "$S/placement"
check "the errors file says why" grep -q 'one device' "$S/errors"
echo "all cpu" > "$S/placement"
unmount_llmfs
finish
