#!/usr/bin/env bash
# llmfs-run end to end: stdout is llama.cpp's greedy golden text for every
# prompt whose golden min_margin is >= 0.05 (stories260K, the legacy-quant
# Qwen2 and the F16 Qwen3 models), the last stderr
# line has the documented format, errors exit 1 with one line, bad options
# exit 2, and peak RSS stays within tensor bytes + KV cache bytes + 64 MiB
# on stories260K and on the largest shared model.
#
# Needs python3 to read the golden JSON lines and to measure the peak RSS
# of the child (getrusage), and $SHARED (default ../shared).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
run=$BUILD/bin/llmfs-run
stories=$SHARED/models/stories260K.gguf
big=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf
golden=$SHARED/golden/stories260K.jsonl

[ -x "$run" ] || { echo "FAIL: $run is not built"; exit 1; }
if [ ! -f "$stories" ] || [ ! -f "$golden" ]; then
	echo "no $SHARED models: skipped"; exit 77
fi
command -v python3 >/dev/null || { echo "python3 needed to read the golden JSON: skipped"; exit 77; }

work=$(mktemp -d /tmp/llmfs-run-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

stats_re='^prompt_tokens=[0-9]+ gen_tokens=[0-9]+ ttft_ms=[0-9]+\.[0-9]{2} prefill_tps=[0-9]+\.[0-9]{2} decode_tps=[0-9]+\.[0-9]{2}$'

# One file set per safe prompt: N.model, N.prompt, N.text (exact bytes),
# N.ntok; stories260K's come first, so 0.* is its empty prompt. The other
# models are those whose llama.cpp builds agree bit for bit (F32, legacy
# quants, F16), so the margin rule is enough (../shared/README.md, 4).
python3 - "$SHARED" "$work" <<'EOF'
import json, os, sys
shared, work = sys.argv[1], sys.argv[2]
n = 0
for stem in ["stories260K", "tiny-qwen2-bpe152k-legacyq",
             "tiny-qwen3-bpe16k-f16"]:
    path = "%s/golden/%s.jsonl" % (shared, stem)
    if not os.path.exists(path):
        continue
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        if d["min_margin"] < 0.05:
            continue
        base = "%s/%d" % (work, n)
        open(base + ".model", "w").write("%s/models/%s.gguf" % (shared, stem))
        open(base + ".prompt", "wb").write(d["prompt"].encode())
        open(base + ".text", "wb").write(d["text"].encode())
        open(base + ".ntok", "w").write("%d\n" % len(d["prompt_tokens"]))
        n += 1
EOF
n_safe=$(find "$work" -name '*.prompt' | wc -l)
[ "$n_safe" -ge 4 ] || fail "only $n_safe safe golden prompts"
[ -s "$work/0.prompt" ] && fail "0.prompt is not stories260K's empty prompt"

# 1. greedy text equals the golden text, stats line last on stderr
for p in "$work"/*.prompt; do
	base=${p%.prompt}
	prompt=$(cat "$p"; echo x); prompt=${prompt%x}
	model=$(cat "$base.model")
	"$run" -m "$model" -p "$prompt" -n 48 --temp 0 -t 1 \
		>"$base.out" 2>"$base.err"
	rc=$?
	[ $rc -eq 0 ] || { fail "exit $rc for '$prompt': $(tail -n 1 "$base.err")"; continue; }
	cmp -s "$base.out" "$base.text" ||
		fail "$(basename "$model") '$prompt': got '$(cat "$base.out")', golden '$(cat "$base.text")'"
	last=$(tail -n 1 "$base.err")
	[[ $last =~ $stats_re ]] || fail "last stderr line: '$last'"
	[[ $last == "prompt_tokens=$(cat "$base.ntok") gen_tokens=48 "* ]] ||
		fail "counts in '$last' (prompt tokens $(cat "$base.ntok"))"
done

# 2. -f FILE and -f - read the same prompt
p=$work/0.prompt
"$run" -m "$stories" -f "$p" -n 48 --temp 0 -t 1 >"$work/f.out" 2>/dev/null ||
	fail "-f FILE exit $?"
cmp -s "$work/f.out" "$work/0.text" || fail "-f FILE output differs"
"$run" -m "$stories" -f - -n 48 --temp 0 -t 1 <"$p" >"$work/s.out" 2>/dev/null ||
	fail "-f - exit $?"
cmp -s "$work/s.out" "$work/0.text" || fail "-f - output differs"

# 3. --stop cuts before the stop string; -n bounds the count
text=$(cat "$work/0.text")
word=$(echo "$text" | awk '{print $4}')
want=${text%%"$word"*}
got=$("$run" -m "$stories" -f "$p" -n 48 --temp 0 -t 1 --stop "$word" 2>"$work/stop.err")
[ "$got" == "$want" ] || fail "--stop '$word': got '$got', want '$want'"
[[ $(tail -n 1 "$work/stop.err") =~ $stats_re ]] || fail "--stop: stats line"
"$run" -m "$stories" -f "$p" -n 3 --temp 0 -t 1 2>"$work/n3.err" >/dev/null
[[ $(tail -n 1 "$work/n3.err") == *" gen_tokens=3 "* ]] || fail "-n 3: $(tail -n 1 "$work/n3.err")"

# 4. errors: one line, exit 1; bad command lines: exit 2
"$run" -m "$work/absent.gguf" -p hi >/dev/null 2>"$work/e1"
rc=$?
[ $rc -eq 1 ] || fail "missing model: exit $rc"
if [ "$(wc -l <"$work/e1")" -ne 1 ] || ! grep -q '^llmfs-run: ' "$work/e1"; then
	fail "missing model: stderr '$(cat "$work/e1")'"
fi
for args in "-p hi" "-m $stories" "-m $stories -p hi -f $p" \
	    "-m $stories -p hi --temp abc" "-m $stories -p hi -n x" \
	    "-m $stories -p hi --bogus" "-m $stories -p hi --repeat-penalty 0"; do
	# shellcheck disable=SC2086
	"$run" $args >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "'$args': exit $rc, want 2"
done

# 5. peak RSS <= tensor bytes + KV bytes + 64 MiB
peak_check() {
	local model=$1 verbose maxrss tensor kv limit
	verbose=$("$run" -m "$model" -p "Hello" -n 16 --temp 0 -t 1 -v 2>&1 >/dev/null |
		grep '^llmfs-run: model ')
	tensor=$(sed -n 's/.* tensor_bytes \([0-9]*\).*/\1/p' <<<"$verbose")
	kv=$(sed -n 's/.* kv_bytes \([0-9]*\).*/\1/p' <<<"$verbose")
	if [ -z "$tensor" ] || [ -z "$kv" ]; then
		fail "no figures from -v: '$verbose'"; return
	fi
	[ "$tensor" -le "$(stat -c %s "$model")" ] || fail "tensor_bytes $tensor > file size"
	maxrss=$(python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if r.returncode != 0:
    sys.exit("exit %d" % r.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
' "$run" -m "$model" -p "Hello" -n 16 --temp 0 -t 1) || { fail "peak run of $model"; return; }
	limit=$((tensor + kv + 64 * 1024 * 1024))
	echo "peak RSS $(basename "$model"): $maxrss bytes; limit $limit" \
		"(tensors $tensor + KV $kv + 64 MiB)"
	if [ -n "$sanitized" ]; then
		echo "  (ASan build: shadow memory counts, the bound is not checked)"
	else
		[ "$maxrss" -le "$limit" ] || fail "peak RSS $maxrss > $limit for $model"
	fi
}
# ASan's shadow memory and quarantine are not the program's
sanitized=$(grep -c __asan_init "$run" 2>/dev/null | grep -v '^0$')
peak_check "$stories"
if [ -f "$big" ]; then peak_check "$big"; else fail "no $big"; fi

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
peak=ok
[ -n "$sanitized" ] && peak="not checked (ASan)"
echo "llmfs-run: $n_safe golden prompts, stop, -f, errors: ok; peak RSS: $peak"
