#!/usr/bin/env bash
# The generate paths give exactly llmfs-run's text for the same prompt and
# settings (greedy): one read-write descriptor, the shell idiom (cat prompt >
# generate; cat generate), sessions/N/generate, chat; tokenize gives the
# reference token ids; two process sessions at once get their own answers; a
# read with nothing submitted is EOF; killing a reader cancels its generation
# and the mount stays healthy; poll works; a slow reader stalls nobody.
. "$(dirname "$0")/mount-lib.bash"

N=48
P='Once upon a time, there was a little girl named Lily.'
printf 'temperature=0\nmax_tokens=%d\n' $N > "$WORK/greedy"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null
check "llmfs-run gave a reference text" [ -s "$WORK/expect" ]
"$RUN" -m "$MIXQ" -p "$P" --temp 0.8 -n $N > "$WORK/expect-mixq" 2>/dev/null

# The mount is there before the models are loaded: a prompt submitted at
# once waits for its model (mixq's other defaults are llama.cpp's: seeded
# sampling at temperature 0.8, so this also checks the sampler settings).
# mixq's file is held shut (tests/fs/fault_paths.c) until the prompt is in.
cp "$MIXQ" "$WORK/mixq.gguf"
mount_faulty "$WORK/mixq.gguf=$WORK/mixq-may-load" "" \
	--name stories="$STORIES" --name qwen="$QWEN" --name mixq="$WORK/mixq.gguf"
S=$MNT/stories
echo "max_tokens=$N" > "$MNT/mixq/config"
check "mixq is loading (its file is held shut)" grep -q '^mixq .* loading ' "$MNT/models"
printf '%s' "$P" > "$MNT/mixq/generate"
check "... and still is once a prompt was submitted to it" \
	grep -q '^mixq .* loading ' "$MNT/models"
touch "$WORK/mixq-may-load"
cat "$MNT/mixq/generate" > "$WORK/early"
same "$WORK/expect-mixq" "$WORK/early" "a prompt submitted while loading waits, then = llmfs-run (seeded, T=0.8)"
wait_loaded || fail "models loaded"
cat "$WORK/greedy" > "$S/config"

# mixq's Q4_K and Q6_K matrices are packed into panels in memory
# (Documentation/engine.md): its weights/ files still give the file's bytes,
# whole and from an offset inside a row.
while read -r name type shape bytes off dev; do
	tail -c +$((off + 1)) "$MIXQ" | head -c "$bytes" > "$WORK/expect-w"
	cat "$MNT/mixq/weights/$name" > "$WORK/got-w"
	same "$WORK/expect-w" "$WORK/got-w" "mixq weights/$name ($type): the file's bytes"
	dd if="$MNT/mixq/weights/$name" bs=4096 skip=1000 count=333 \
		iflag=skip_bytes,count_bytes status=none > "$WORK/got-w"
	tail -c +$((off + 1000 + 1)) "$MIXQ" | head -c 333 > "$WORK/expect-w"
	same "$WORK/expect-w" "$WORK/got-w" "mixq weights/$name: 333 bytes at 1000"
done < <(grep -E '^(token_embd|blk.0.ffn_down|blk.0.ffn_gate)\.' "$MNT/mixq/weights/index")

# 1. One descriptor: open read-write, write, read to EOF.
exec 3<>"$S/generate"
printf '%s' "$P" >&3
cat <&3 > "$WORK/rw"
exec 3>&-
same "$WORK/expect" "$WORK/rw" "one read-write descriptor = llmfs-run"

# 2. The shell idiom, and the same with echo's newline.
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/shell"
same "$WORK/expect" "$WORK/shell" "cat prompt > generate; cat generate = llmfs-run"
echo "$P" > "$S/generate"
cat "$S/generate" > "$WORK/echo"
same "$WORK/expect" "$WORK/echo" "echo's trailing newline is not part of the prompt"
cat "$S/generate" > "$WORK/again"
check "a read with nothing submitted is EOF at once" [ ! -s "$WORK/again" ]

# 3. sessions/N/generate, read from another process session.
n=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$n/generate"
setsid cat "$S/sessions/$n/generate" > "$WORK/session"
same "$WORK/expect" "$WORK/session" "sessions/N/generate = llmfs-run"
check "sessions/N/history has the prompt and the answer" \
	grep -qF -- "$P" "$S/sessions/$n/history"
check "sessions/N/history has the answer" \
	grep -qF -- "$(head -c 40 "$WORK/expect")" "$S/sessions/$n/history"
echo 'max_tokens=5' > "$S/sessions/$n/config"
printf '%s' "$P" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/five"
# a session is a conversation: the second prompt continues the first turn
"$RUN" -m "$STORIES" -p "$P$(cat "$WORK/expect")$P" --temp 0 -n 5 \
	> "$WORK/expect5" 2>/dev/null
same "$WORK/expect5" "$WORK/five" "sessions/N/config overrides max_tokens (second turn)"

# 4. chat on a model with a ChatML template.
cat "$WORK/greedy" > "$MNT/qwen/config"
C='What is the capital of France?'
"$RUN" -m "$QWEN" -p "$C" --temp 0 -n $N --chat > "$WORK/expect-chat" 2>/dev/null
printf '%s' "$C" > "$MNT/qwen/chat"
cat "$MNT/qwen/chat" > "$WORK/chat"
same "$WORK/expect-chat" "$WORK/chat" "chat = llmfs-run --chat"
"$RUN" -m "$QWEN" -p "$C" --temp 0 -n $N > "$WORK/expect-gen" 2>/dev/null
printf '%s' "$C" > "$MNT/qwen/generate"
cat "$MNT/qwen/generate" > "$WORK/gen"
same "$WORK/expect-gen" "$WORK/gen" "qwen generate = llmfs-run"

# 5. tokenize against the reference tokenizer's ids (golden file).
if command -v python3 >/dev/null; then
	python3 - "$SHARED/golden/tiny-qwen3-bpe16k-f16.jsonl" "$WORK" <<'PY'
import json, sys
for i, line in enumerate(open(sys.argv[1])):
    if i == 3: break
    d = json.loads(line)
    open(f"{sys.argv[2]}/tok{i}.txt", "w").write(d["prompt"])
    open(f"{sys.argv[2]}/tok{i}.ids", "w").write(" ".join(map(str, d["prompt_tokens"])) + "\n")
PY
	for i in 0 1 2; do
		exec 3<>"$MNT/qwen/tokenize"
		cat "$WORK/tok$i.txt" >&3
		cat <&3 > "$WORK/tok$i.got"
		exec 3>&-
		same "$WORK/tok$i.ids" "$WORK/tok$i.got" "tokenize = llama.cpp's ids (golden prompt $i)"
	done
	# The shell idiom works for tokenize too (echo's newline dropped).
	head -c -0 "$WORK/tok0.txt" > "$MNT/qwen/tokenize"
	cat "$MNT/qwen/tokenize" > "$WORK/tok0.shell"
	same "$WORK/tok0.ids" "$WORK/tok0.shell" "tokenize: shell idiom"
else
	echo "# python3 absent: tokenize against the golden ids not checked"
fi

# 6. Two process sessions at once, each with its own answer.
P2='The dog ran to the park.'
"$RUN" -m "$STORIES" -p "$P2" --temp 0 -n $N > "$WORK/expect2" 2>/dev/null
# Each writes its prompt, then waits for the other's before reading (both
# answers are pending at once).
both_in() { # MINE OTHER: says MINE is in, waits (60 s at most) for OTHER
	echo "touch '$WORK/$1'; for _ in \$(seq 3000); do [ -e '$WORK/$2' ] && break; sleep 0.02; done"
}
for i in 1 2 3; do
	setsid bash -c "printf '%s' '$P' > '$S/generate'; $(both_in a.$i b.$i); cat '$S/generate' > '$WORK/c1.$i'" &
	a=$!
	setsid bash -c "printf '%s' '$P2' > '$S/generate'; $(both_in b.$i a.$i); cat '$S/generate' > '$WORK/c2.$i'" &
	b=$!
	wait $a $b
	same "$WORK/expect" "$WORK/c1.$i" "concurrent shell A ($i) gets its own answer"
	same "$WORK/expect2" "$WORK/c2.$i" "concurrent shell B ($i) gets its own answer"
done
setsid bash -c "printf '%s' '$P' > '$S/generate'"
cat "$S/generate" > "$WORK/other"
check "another process session does not get the answer" [ ! -s "$WORK/other" ]

# 7. Many generations at once all finish with the right text.
pids=
for i in $(seq 6); do
	n=$(cat "$S/sessions/new")
	printf '%s' "$P" > "$S/sessions/$n/generate"
	(cat "$S/sessions/$n/generate" > "$WORK/many.$i") &
	pids="$pids $!"
done
wait $pids
for i in $(seq 6); do
	same "$WORK/expect" "$WORK/many.$i" "6 at once: generation $i"
done

# 8. Kill a reader mid-generation: cancelled, the mount stays healthy.
printf 'temperature=0\nmax_tokens=3000\n' > "$WORK/long"
cat "$WORK/long" > "$MNT/mixq/config"
before=$(grep '^cancelled ' "$MNT/mixq/stats" | cut -d' ' -f2)
printf 'Once upon a time' > "$MNT/mixq/generate"
cat "$MNT/mixq/generate" > "$WORK/killed" &
r=$!
check "the reader to be killed got text" wait_for 60 test -s "$WORK/killed"
kill $r
wait $r 2>/dev/null
check "killed reader: its generation stopped (active 0)" \
	wait_for 60 grep -qx 'active 0' "$MNT/mixq/stats"
check "killed reader: counted as cancelled" \
	[ "$(grep '^cancelled ' "$MNT/mixq/stats" | cut -d' ' -f2)" = $((before + 1)) ]
check "killed reader: fewer than 3000 tokens were made" \
	[ "$(grep '^tokens_out ' "$MNT/mixq/stats" | cut -d' ' -f2)" -lt 3000 ]
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/after"
same "$WORK/expect" "$WORK/after" "after the kill the mount still generates"

# Closing a read-write descriptor early cancels too.
before=$(grep '^cancelled ' "$MNT/mixq/stats" | cut -d' ' -f2)
exec 3<>"$MNT/mixq/generate"
printf 'Once upon a time' >&3
head -c 10 <&3 > /dev/null
exec 3>&-
cancelled_one_more() {
	[ "$(grep '^cancelled ' "$MNT/mixq/stats" | cut -d' ' -f2)" = $((before + 1)) ]
}
check "closing early cancels" wait_for 60 cancelled_one_more
check "... and the generation stopped (active 0)" \
	grep -qx 'active 0' "$MNT/mixq/stats"

# Two long generations of one model progress together (one batch per step).
a=$(cat "$MNT/mixq/sessions/new")
b=$(cat "$MNT/mixq/sessions/new")
printf 'Once upon a time' > "$MNT/mixq/sessions/$a/generate"
printf 'The quick brown fox' > "$MNT/mixq/sessions/$b/generate"
cat "$MNT/mixq/sessions/$a/generate" > "$WORK/long.a" &
ra=$!
cat "$MNT/mixq/sessions/$b/generate" > "$WORK/long.b" &
rb=$!
# Both have text; then each grows again while both are still active (one
# run after the other would leave one at 0 bytes or end one first).
size() { stat -c %s "$1"; }
both_started() { [ -s "$WORK/long.a" ] && [ -s "$WORK/long.b" ]; }
both_grew() {
	[ "$(size "$WORK/long.a")" -gt "$sa" ] &&
		[ "$(size "$WORK/long.b")" -gt "$sb" ] &&
		grep -qx 'active 2' "$MNT/mixq/stats"
}
check "two generations of one model: both stream" wait_for 60 both_started
sa=$(size "$WORK/long.a") sb=$(size "$WORK/long.b")
check "... and both go on at the same time (active 2)" wait_for 60 both_grew
kill $ra $rb 2>/dev/null
wait $ra $rb 2>/dev/null

# 9. A slow reader stalls nobody: mixq's reader reads one byte and keeps
# its file open until told to go (the file RELEASE); the other reads run
# meanwhile (under timeout: a stall fails instead of hanging) and the
# sleeper must still be there when they are done.
sleeper() { # FILE RELEASE READY
	(exec 4<"$1"; head -c 1 <&4 >/dev/null; touch "$3"
	 while [ ! -e "$2" ]; do sleep 0.02; done; exec 4<&-) &
}
printf 'Once upon a time' > "$MNT/mixq/generate"
sleeper "$MNT/mixq/generate" "$WORK/wake1" "$WORK/slept1"
slow=$!
check "a reader of mixq holds its answer unread" wait_for 60 test -e "$WORK/slept1"
printf '%s' "$P" > "$S/generate"
timeout 120 cat "$S/generate" > "$WORK/fast"
same "$WORK/expect" "$WORK/fast" "another model answers while a reader sleeps"
n=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$n/generate"
timeout 120 cat "$S/sessions/$n/generate" > "$WORK/fast2"
same "$WORK/expect" "$WORK/fast2" "and so does a session of the same mount"
printf '%s' "$P" > "$S/generate"
sleeper "$S/generate" "$WORK/wake2" "$WORK/slept2"
slow2=$!
check "a reader of stories holds its answer unread" wait_for 60 test -e "$WORK/slept2"
n=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$n/generate"
timeout 120 cat "$S/sessions/$n/generate" > "$WORK/fast3"
same "$WORK/expect" "$WORK/fast3" "and the same model while its other reader sleeps"
check "without waiting for the sleepers (both still hold their files)" \
	bash -c "kill -0 $slow && kill -0 $slow2"
touch "$WORK/wake1" "$WORK/wake2"
wait $slow $slow2

# 10. poll/select: the descriptor becomes readable, the text arrives.
if command -v python3 >/dev/null; then
	python3 - "$S/generate" "$P" > "$WORK/polled" <<'PY'
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, sys.argv[2].encode())
p = select.poll()
p.register(fd, select.POLLIN)
out = b""
while True:
    ev = p.poll(10000)
    if not ev:
        sys.exit("poll timed out")
    chunk = os.read(fd, 65536)
    if not chunk:
        break
    out += chunk
os.close(fd)
sys.stdout.buffer.write(out)
PY
	same "$WORK/expect" "$WORK/polled" "poll(2) then read gives the same text"
fi

# 10b. max_tokens=0 runs to the end of the context: EOF, not an error.
printf 'temperature=0\nmax_tokens=0\n' > "$WORK/full"
n=$(cat "$S/sessions/new")
cat "$WORK/full" > "$S/sessions/$n/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n -1 > "$WORK/expect-full" 2>/dev/null
printf '%s' "$P" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/full.out"
check "a generation to the end of the context ends with EOF" [ $? = 0 ]
same "$WORK/expect-full" "$WORK/full.out" "to the end of the context = llmfs-run -n -1"

# 11. Signals interrupt reads blocked for text (EINTR); nothing is lost:
# the next reads go on with the same answer. The client is C
# (tests/fs/read_interrupted.c): its handler only counts, so a read that
# completed keeps its bytes. First while the answer is computed (whether a
# signal finds a read blocked is chance), then on a model held loading, so
# that every read is blocked until the client has been interrupted 5 times
# and lets the model load.
LP="$P $P $P $P"
printf 'temperature=0\nmax_tokens=16\n' > "$WORK/short"
cat "$WORK/short" > "$MNT/mixq/config"
"$RUN" -m "$MIXQ" -p "$LP" --temp 0 -n 16 > "$WORK/expect-intr" 2>/dev/null
"$BUILD/tests/fs/read_interrupted" "$MNT/mixq/generate" "$LP" \
	> "$WORK/intr" 2>"$WORK/intr.note"
check "the interrupted reader reached EOF" [ $? -eq 0 ]
echo "# $(grep '^interrupted' "$WORK/intr.note") reads while the answer was computed"
same "$WORK/expect-intr" "$WORK/intr" "after EINTR the answer goes on, whole"
unmount_llmfs

cp "$MIXQ" "$WORK/held.gguf"
mount_faulty "$WORK/held.gguf=$WORK/held-may-load" "" --name held="$WORK/held.gguf"
cat "$WORK/short" > "$MNT/held/config"
"$BUILD/tests/fs/read_interrupted" "$MNT/held/generate" "$LP" \
	"$WORK/held-may-load" 5 > "$WORK/intr2" 2>"$WORK/intr2.note"
check "held model: the interrupted reader reached EOF ($(tail -n 1 "$WORK/intr2.note"))" [ $? -eq 0 ]
interrupted=$(sed -n 's/^interrupted //p' "$WORK/intr2.note")
check "held model: at least 5 blocked reads were interrupted (${interrupted:-none})" \
	[ "${interrupted:-0}" -ge 5 ]
same "$WORK/expect-intr" "$WORK/intr2" "held model: after EINTR the answer goes on, whole"
unmount_llmfs
finish
