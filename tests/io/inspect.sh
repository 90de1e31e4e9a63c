#!/usr/bin/env bash
# llmfs-inspect on a real model (metadata, tensors, totals) and on a
# corrupt copy of it (exit 1, one line on stderr naming the file).
set -u
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
bin=$BUILD/bin/llmfs-inspect
model=$SHARED/models/stories260K.gguf
[ -x "$bin" ] || { echo "inspect.sh: $bin is not built"; exit 77; }
[ -r "$model" ] || { echo "inspect.sh: no $model (set SHARED)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "inspect.sh: $*"; exit 1; }

"$bin" "$model" >"$tmp/out" 2>"$tmp/err" || fail "exit $? on $model"
[ -s "$tmp/err" ] && fail "stderr on a good model: $(cat "$tmp/err")"
grep -q '^GGUF v3, alignment 32, 17 keys, 48 tensors$' "$tmp/out" ||
	fail "no summary line"
grep -q '^general.architecture  string  "llama"$' "$tmp/out" ||
	fail "no general.architecture"
grep -q '^llama.embedding_length  uint32  64$' "$tmp/out" ||
	fail "no embedding_length"
grep -q '^tokenizer.ggml.tokens  array\[string\] x512 \["<unk>", "<s>", "</s>",' \
	"$tmp/out" || fail "token array not summarized"
grep -Eq '^token_embd.weight +f32 +\[64, 512\]  131072 bytes  @ 14080$' \
	"$tmp/out" || fail "token_embd.weight line"
grep -Eq '^f32 +48 tensors +1171200 bytes$' "$tmp/out" || fail "by-type total"

# a copy cut inside the tensor infos
head -c 13000 "$model" >"$tmp/cut.gguf"
"$bin" "$tmp/cut.gguf" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "exit $rc on a truncated file"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "stderr is not one line: $(cat "$tmp/err")"
grep -q "^llmfs-inspect: $tmp/cut.gguf: truncated: tensor " "$tmp/err" ||
	fail "message: $(cat "$tmp/err")"

# not a GGUF at all
"$bin" "$0" >/dev/null 2>"$tmp/err" && fail "accepted a shell script"
grep -q "not a GGUF file" "$tmp/err" || fail "message: $(cat "$tmp/err")"
echo "inspect.sh: ok"
