#!/usr/bin/env bash
# Constrained output through the mount: config's format, json_schema and
# grammar keys and sessions/N/logprobs.
#
# - Bad grammars and schemas fail the write with EINVAL and an errors line
#   that names the position (line and column; the JSON pointer of a schema
#   that parses but is not one); the config keeps its old value.
# - The answers follow the config: llmfs-run --grammar gives the same text.
# - 200 answers with a JSON schema (sampled, a seed each, on the random
#   152k-vocabulary model, max_tokens 96) are all valid: Python's
#   jsonschema validates each (Debian's python3-jsonschema, make deps).
# - sessions/N/logprobs of a greedy answer: the golden tokens, and for
#   each the reference log-softmax (tools/golden-logprobs.mjs: llama.cpp's
#   full logits, one token at a time, on the golden data's CPU variant:
#   tools/ref-cpu.sh) within the model's tolerance.
. "$(dirname "$0")/mount-lib.bash"

Q152=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf
[ -f "$Q152" ] || skip "$Q152 is absent"
PY=
for p in python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import jsonschema' 2>/dev/null; then
		PY=$p
		break
	fi
done
[ -n "$PY" ] || { echo "not ok - no python3 with jsonschema (make deps: python3-jsonschema)"; exit 1; }

mount_llmfs --name q="$Q152" --name qwen="$QWEN"
wait_loaded || fail "models loaded in 10 s"
C=$MNT/q/config

# ---- errors -------------------------------------------------------------
bad() { # bad DESC TEXT WANT: the write fails with EINVAL, errors has WANT
	local out
	out=$(printf '%s\n' "$2" 2>&1 > "$C")
	if [ $? -ne 0 ] && grep -q "Invalid argument" <<<"$out" &&
		tail -n 1 "$MNT/q/errors" | grep -qF -- "$3"; then
		ok "$1"
	else
		fail "$1: write said '$out', errors: $(tail -n 1 "$MNT/q/errors")"
	fi
}
bad "grammar: an undefined rule" 'grammar=root ::= item\nitem ::= "a" foo' \
	"config: grammar: line 2 column 14: undefined rule 'foo'"
bad "grammar: a syntax error" 'grammar=root ::= ("a" | "b"' \
	"grammar: line 1 column 20: expecting ')'"
bad "grammar: a bad escape in the value" 'grammar=root ::= "a"\q' \
	"grammar: a bad escape"
bad "json_schema: not JSON" 'json_schema={"type": "object",' \
	"config: json_schema: line 1 column 18:"
bad "json_schema: not a schema" 'json_schema={"type":"object","properties":{"age":{"type":"integr"}}}' \
	"json_schema: #/properties/age: unrecognized type integr"
bad "json_schema: a missing file" 'json_schema=/nonexistent/x.json' \
	"config: json_schema: /nonexistent/x.json: No such file"
bad "format: only json" 'format=xml' "config: format: 'xml' is not json"
check "a failed write changed nothing" grep -qx 'format=' "$C"

# ---- answers follow the config --------------------------------------------
printf 'root ::= " "? ("yes" | "no") (", because " [a-z ]{1,20})? "."\n' > "$WORK/yn.gbnf"
printf 'grammar=%s\ntemperature=0\nmax_tokens=48\n' "$WORK/yn.gbnf" > "$C"
check "grammar= shows what was written" grep -qF "grammar=$WORK/yn.gbnf" "$C"
printf 'Is the sky blue? Answer:' > "$MNT/q/generate"
cat "$MNT/q/generate" > "$WORK/got"
"$RUN" -m "$Q152" -p 'Is the sky blue? Answer:' --temp 0 -n 48 \
	--grammar "$WORK/yn.gbnf" > "$WORK/want" 2>/dev/null
same "$WORK/want" "$WORK/got" "an answer under grammar= is llmfs-run --grammar's"
printf 'grammar=root ::= "x" [0-9]{2}\\n\n' > "$C"
check "an inline grammar takes C escapes" grep -qx 'grammar=root ::= "x" \[0-9\]{2}\\n' "$C"
printf 'x' > "$MNT/q/generate"
check "an answer under an inline grammar" grep -qE '^x[0-9]{2}$' <(cat "$MNT/q/generate"; echo)
echo format=json > "$C"
check "format=json clears grammar=" grep -qx 'grammar=' "$C"
printf 'A JSON object:' > "$MNT/q/generate"
cat "$MNT/q/generate" > "$WORK/obj"
check "a format=json answer parses" "$PY" -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), dict)' "$WORK/obj"

# a session's own constraint, over the model's
s=$(cat "$MNT/q/sessions/new")
echo 'format=' > "$MNT/q/sessions/$s/config"
check "a session clears the model's format" grep -qx 'format=' "$MNT/q/sessions/$s/config"
check "the model keeps its own" grep -qx 'format=json' "$C"

# ---- 200 answers under a schema -------------------------------------------
cat > "$WORK/schema.json" <<'EOF'
{"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 12},
  "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "born": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
  "kind": {"enum": ["cat", "dog", null, 3]},
  "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,5}$"}, "maxItems": 3},
  "ok": {"type": "boolean"}},
 "required": ["name", "age"], "additionalProperties": false}
EOF
printf 'json_schema=%s\ntemperature=1\nmax_tokens=96\n' "$(tr -d '\n' < "$WORK/schema.json")" > "$C"
check "json_schema= inline" grep -q '^json_schema={"type": "object"' "$C"
mkdir -p "$WORK/answers"
for i in $(seq 200); do
	echo "seed=$i" > "$C"
	printf 'A person as JSON:' > "$MNT/q/generate"
	cat "$MNT/q/generate" > "$WORK/answers/$i.json"
done
"$PY" - "$WORK/schema.json" "$WORK/answers" <<'EOF' > "$WORK/valid" 2>&1
import json, os, sys, jsonschema
schema = json.load(open(sys.argv[1]))
v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
bad = 0
files = sorted(os.listdir(sys.argv[2]), key=lambda f: int(f.split(".")[0]))
for f in files:
    text = open(os.path.join(sys.argv[2], f)).read()
    try:
        v.validate(json.loads(text))
    except Exception as e:
        bad += 1
        print(f"{f}: {text!r}: {str(e).splitlines()[0]}")
print(f"{len(files) - bad} of {len(files)} valid")
EOF
check "200 answers under the schema all validate ($(tail -n 1 "$WORK/valid"))" \
	grep -qx '200 of 200 valid' "$WORK/valid"
grep -v ' valid$' "$WORK/valid" | head -5

# ---- sessions/N/logprobs against llama.cpp's softmax ----------------------
REF=${LLAMA_REF_DIR:-$PWD/ref}
GOLDEN=$SHARED/golden/tiny-qwen2-bpe152k-legacyq.jsonl
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json
NODE_REF=
[ -f "$info" ] && NODE_REF=$(tools/ref-cpu.sh golden 2>/dev/null)
if [ -n "$NODE_REF" ] && command -v node >/dev/null && [ -f "$GOLDEN" ]; then
	release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/grammar-${release:-unknown}-${NODE_REF##*-}
	mkdir -p "$cache"
	key=$(cat tools/golden-logprobs.mjs "$GOLDEN" | sha256sum | cut -c1-16)
	ref=$cache/logprobs.$key.jsonl
	if [ ! -s "$ref" ]; then
		node tools/golden-logprobs.mjs "$NODE_REF" "$Q152" "$GOLDEN" 3 16 "$ref.tmp" &&
			mv "$ref.tmp" "$ref"
	fi
	check "the llama.cpp logprobs reference" [ -s "$ref" ]
	tol=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["rel_tol"])' \
		"$SHARED/golden/thresholds.json" tiny-qwen2-bpe152k-legacyq)
	n=0
	while IFS= read -r line; do
		n=$((n + 1))
		s=$(cat "$MNT/q/sessions/new")
		printf 'format=\ntemperature=0\nmax_tokens=16\nlogprobs=5\n' \
			> "$MNT/q/sessions/$s/config"
		"$PY" -c 'import json,sys; sys.stdout.write(json.loads(sys.argv[1])["prompt"])' \
			"$line" > "$MNT/q/sessions/$s/generate"
		cat "$MNT/q/sessions/$s/generate" >/dev/null
		cat "$MNT/q/sessions/$s/logprobs" > "$WORK/lp.$n"
		echo "$line" > "$WORK/ref.$n"
		"$PY" - "$WORK/ref.$n" "$WORK/lp.$n" "$tol" > "$WORK/lpcmp.$n" 2>&1 <<'EOF'
import json, math, sys
ref = json.load(open(sys.argv[1]))
got = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert [g["id"] for g in got] == ref["tokens"], ("tokens", [g["id"] for g in got], ref["tokens"])
worst = 0.0
for g, r in zip(got, ref["steps"]):
    assert len(g["top_logprobs"]) == 5
    pairs = [(g["logprob"], r["token"][1])]
    for a, b in zip(g["top_logprobs"], r["top"]):
        assert a["id"] == b[0] or abs(a["logprob"] - b[1]) < 1e-6, ("top ids", a, b)
        pairs.append((a["logprob"], b[1]))
    for a, b in pairs:
        d = abs(a - b)
        worst = max(worst, d)
        assert d <= tol * max(1.0, abs(b)), ("logprob", a, b)
    assert sum(math.exp(a["logprob"]) for a in g["top_logprobs"]) <= 1 + 1e-5
    if all(b < 0x80 for b in g["bytes"]):
        assert bytes(g["bytes"]).decode() == g["token"], ("text", g)
print(f"{len(got)} tokens, largest difference {worst:.2e}")
EOF
		check "logprobs of golden prompt $n = llama.cpp's softmax ($(tail -n 1 "$WORK/lpcmp.$n"))" \
			grep -q ' tokens, largest difference' "$WORK/lpcmp.$n"
	done < "$ref"
else
	LEFT_OUT="no llama.cpp reference pinned to one CPU variant (make ref; tools/ref-cpu.sh): logprobs not compared"
fi

unmount_llmfs
if [ "$FAILS" = 0 ] && [ -n "${LEFT_OUT:-}" ]; then
	echo "$CHECKS checks passed; $LEFT_OUT"
	exit 77
fi
finish
