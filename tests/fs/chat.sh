#!/usr/bin/env bash
# chat through the model's own (Jinja) template, and think=on|off|hide:
# a model written with a thinking template (its generation prompt opens a
# <think> block unless enable_thinking is false) answers `chat` as
# llmfs-run --chat does, thinking on and off; with think=hide nothing
# streams while it reasons and sessions/N/reasoning holds the reasoning;
# a session's second turn is the template's rendering of the whole
# conversation (config's system= first); a template that does not parse
# falls back to ChatML and says so; info names the template used.
. "$(dirname "$0")/mount-lib.bash"

N=24
cat > "$WORK/think.jinja" <<'EOF'
{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and m.reasoning_content %}<think>{{ m.reasoning_content }}</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is false %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}
EOF
printf '{%% for %%}<|im_start|>' > "$WORK/broken.jinja"
for t in think broken; do
	"$BUILD/bin/llmfs-write-model" -o "$WORK/$t.gguf" --arch qwen3 \
		--embd 64 --layers 2 --heads 4 --kv-heads 1 --head-dim 32 \
		--ff 192 --type f16 --vocab-from "$QWEN" --seed 7 \
		--chat-template "$WORK/$t.jinja" > /dev/null ||
		{ echo "llmfs-write-model failed"; exit 1; }
done
T=$WORK/think.gguf
Q1='Is 17 prime?'
Q2='And 21?'
ref() { "$RUN" -m "$T" --temp 0 -n $N "$@" 2>/dev/null; }
ref -p "$Q1" --chat > "$WORK/on"
ref -p "$Q1" --chat --think off > "$WORK/off"
check "llmfs-run gave reference answers" [ -s "$WORK/on" -a -s "$WORK/off" ]

mount_llmfs --name think="$T" --name broken="$WORK/broken.gguf" \
	--name qwen="$QWEN"
wait_loaded || fail "models loaded"
M=$MNT/think
for m in think qwen broken; do
	printf 'temperature=0\nmax_tokens=%d\n' $N > "$MNT/$m/config"
done
check "info: chat_template jinja (the model's own)" \
	grep -qx 'chat_template jinja' "$M/info"
check "info: a template that does not parse gives the built-in chatml" \
	grep -qx 'chat_template chatml' "$MNT/broken/info"
check "... and its errors say why" \
	grep -q "load: the model's chat template does not parse" "$MNT/broken/errors"
check "config: think=on by default" grep -qx 'think=on' "$M/config"

# think=on: the answer streams with its reasoning, as llmfs-run's
printf '%s' "$Q1" > "$M/chat"
cat "$M/chat" > "$WORK/got"
same "$WORK/on" "$WORK/got" "chat = llmfs-run --chat (think=on)"
echo think=off > "$M/config"
printf '%s' "$Q1" > "$M/chat"
cat "$M/chat" > "$WORK/got"
same "$WORK/off" "$WORK/got" "think=off: chat = llmfs-run --chat --think off"
check "think=off reads back" grep -qx 'think=off' "$M/config"
! echo think=maybe > "$M/config" 2>/dev/null
check "think=maybe: EINVAL" [ $? = 0 ]
check "... and errors names the value" grep -q "think: 'maybe'" "$M/errors"

# think=hide: the prompt opened a block the model never closes here: all
# of it is reasoning, nothing streams; a session's reasoning file has it
echo think=hide > "$M/config"
printf '%s' "$Q1" > "$M/chat"
cat "$M/chat" > "$WORK/got"
check "think=hide: nothing streams while the model reasons" [ ! -s "$WORK/got" ]
s=$(cat "$M/sessions/new")
printf '%s' "$Q1" > "$M/sessions/$s/chat"
cat "$M/sessions/$s/chat" > "$WORK/got"
check "think=hide in a session: nothing streams" [ ! -s "$WORK/got" ]
cat "$M/sessions/$s/reasoning" > "$WORK/reasoning"
same "$WORK/on" "$WORK/reasoning" "sessions/N/reasoning = the reasoning llmfs-run streams"
check "sessions/N/reasoning is 0400" \
	[ "$(stat -c %a "$M/sessions/$s/reasoning")" = 400 ]

# think=hide under a grammar: the grammar shapes the answer from its first
# token, so what follows the prompt's open block is the answer and streams
ref -p "$Q1" --chat --json > "$WORK/json"
g=$(cat "$M/sessions/new")
echo format=json > "$M/sessions/$g/config"
printf '%s' "$Q1" > "$M/sessions/$g/chat"
cat "$M/sessions/$g/chat" > "$WORK/got"
same "$WORK/json" "$WORK/got" "think=hide, format=json: the answer streams (= llmfs-run --chat --json)"
check "... it is a JSON object" \
	python3 -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), dict)' "$WORK/got"
cat "$M/sessions/$g/reasoning" > "$WORK/reasoning"
check "... and the reasoning is empty" [ ! -s "$WORK/reasoning" ]

# think=hide where no block comes (Qwen2's template): the answer, whole
"$RUN" -m "$QWEN" -p "$Q1" --chat --temp 0 -n $N > "$WORK/qwen" 2>/dev/null
echo think=hide > "$MNT/qwen/config"
q=$(cat "$MNT/qwen/sessions/new")
printf '%s' "$Q1" > "$MNT/qwen/sessions/$q/chat"
cat "$MNT/qwen/sessions/$q/chat" > "$WORK/got"
same "$WORK/qwen" "$WORK/got" "think=hide without a block: the answer streams whole"
cat "$MNT/qwen/sessions/$q/reasoning" > "$WORK/reasoning"
check "... and the reasoning is empty" [ ! -s "$WORK/reasoning" ]

# a session's second turn: the template renders the whole conversation
echo think=off > "$M/config"
c=$(cat "$M/sessions/new")
printf '%s' "$Q1" > "$M/sessions/$c/chat"
cat "$M/sessions/$c/chat" > "$WORK/c1"
same "$WORK/off" "$WORK/c1" "session, first turn = llmfs-run --chat --think off"
printf '%s' "$Q2" > "$M/sessions/$c/chat"
cat "$M/sessions/$c/chat" > "$WORK/c2"
conv="<|im_start|>user
$Q1<|im_end|>
<|im_start|>assistant
$(cat "$WORK/c1")<|im_end|>
<|im_start|>user
$Q2<|im_end|>
<|im_start|>assistant
<think>

</think>

"
ref -p "$conv" > "$WORK/c-one-go"
same "$WORK/c-one-go" "$WORK/c2" "second turn = the template's whole conversation in one go"
check "history shows both turns" \
	[ "$(grep -c -- '--- chat' "$M/sessions/$c/history")" = 2 ]

# config's system= is the conversation's first message, for every turn
d=$(cat "$M/sessions/new")
echo 'system=Be brief.' > "$M/sessions/$d/config"
printf '%s' "$Q1" > "$M/sessions/$d/chat"
cat "$M/sessions/$d/chat" > "$WORK/d1"
printf '%s' "$Q2" > "$M/sessions/$d/chat"
cat "$M/sessions/$d/chat" > "$WORK/d2"
conv="<|im_start|>system
Be brief.<|im_end|>
<|im_start|>user
$Q1<|im_end|>
<|im_start|>assistant
$(cat "$WORK/d1")<|im_end|>
<|im_start|>user
$Q2<|im_end|>
<|im_start|>assistant
<think>

</think>

"
ref -p "$conv" > "$WORK/d-one-go"
same "$WORK/d-one-go" "$WORK/d2" "system=: the second turn has it first, as one go"

unmount_llmfs
finish
