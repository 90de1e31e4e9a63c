#!/usr/bin/env bash
# Constrained decoding against llama.cpp itself (the pinned node-llama-cpp
# in ref/ and the llama.cpp source it ships).
#
# 1. JSON schema -> GBNF: the 81 cases of llama.cpp's own
#    tests/test-json-schema-to-grammar.cpp (schema, expected grammar or
#    expected failure), read from the source bundle: our converter must
#    write the same rules, line for line (test_grammar with
#    GRAMMAR_SCHEMA_CASES).
# 2. Greedy answers under grammars: for each case of
#    tests/engine/grammar-cases.json (llama.cpp's grammars/*.gbnf, our
#    own, a JSON schema through node-llama-cpp's createGrammarForJsonSchema)
#    and for some of the schema cases of step 1 (llmfs converts the schema
#    itself; the reference gets llama.cpp's expected grammar), the
#    reference tokens come from tools/golden-grammar.mjs and llmfs-run
#    --temp 0 --batch-exact must give the same tokens up to the first step
#    whose margin (the chosen token's logit minus the next allowed one's)
#    is under the model's threshold (../shared/golden/thresholds.json, as
#    the golden rule): all of them for most cases.
#
# The reference runs on the CPU variant the golden data was made with
# (tools/ref-cpu.sh). The references are kept in ${XDG_CACHE_HOME:-~/.cache}/llmfs/grammar-
# <release>/, named by the hash of the script, the cases and the model, so
# that a change of any of them makes them anew (a few minutes).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
REF=${LLAMA_REF_DIR:-$PWD/ref}
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json
bundle=$REF/node_modules/node-llama-cpp/llama/gitRelease.bundle
grammars=$REF/node_modules/node-llama-cpp/llama/grammars
test=$BUILD/tests/engine/test_grammar
run=$BUILD/bin/llmfs-run
py=python3

[ -x "$test" ] && [ -x "$run" ] || { echo "FAIL: $test or $run is not built"; exit 1; }
[ -f "$info" ] && [ -f "$bundle" ] ||
	{ echo "no llama.cpp reference in $REF (make ref): skipped"; exit 77; }
command -v node >/dev/null || { echo "node is absent: skipped"; exit 77; }
command -v $py >/dev/null || { echo "python3 is absent: skipped"; exit 77; }
[ -f "$SHARED/golden/thresholds.json" ] || { echo "no $SHARED: skipped"; exit 77; }
# node-llama-cpp restricted to the golden data's CPU variant (haswell
# where this CPU has no AVX-512: tools/ref-cpu.sh golden)
NODE_REF=$(tools/ref-cpu.sh golden) || { echo "FAIL: no reference variant runs here"; exit 1; }
variant=${NODE_REF##*-}

release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/grammar-${release:-unknown}-$variant
mkdir -p "$cache" || exit 1
exec 9>"$cache/.lock"
flock 9
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# llama.cpp's schema test cases, out of the source bundle
commit=$(git bundle list-heads "$bundle" | awk 'NR == 1 {print $1}')
src=$cache/test-json-schema-to-grammar-$commit.cpp
if [ ! -s "$src" ]; then
	git init -q --bare "$work/git" &&
		git --git-dir="$work/git" fetch -q "$bundle" 2>/dev/null &&
		git --git-dir="$work/git" show \
			"$commit:tests/test-json-schema-to-grammar.cpp" >"$src.tmp" &&
		mv "$src.tmp" "$src" || { echo "FAIL: cannot read $bundle"; exit 1; }
fi
$py - "$src" "$work/schema-cases.json" <<'EOF' || exit 1
import json, re, sys
text = open(sys.argv[1]).read()
# a schema or grammar is a raw string R"""(...)""" or a plain "..." one
lit = r'(?:R"""\((.*?)\)"""|"((?:[^"\\]|\\.)*)")'
pat = re.compile(r'test\(\{\s*(SUCCESS|FAILURE),\s*"((?:[^"\\]|\\.)*)",\s*'
                 + lit + r',\s*' + lit + r'\s*\}\);', re.S)
unq = lambda s: json.loads('"' + s + '"')
cases = [{"success": m[0] == "SUCCESS", "name": m[1],
          "schema": m[2] if m[2] or not m[3] else unq(m[3]),
          "grammar": m[4] if m[4] or not m[5] else unq(m[5])}
         for m in pat.findall(text)]
if len(cases) != text.count("test({"):
    sys.exit(f"{len(cases)} of {text.count('test({')} schema cases read")
if len(cases) < 70:
    sys.exit(f"only {len(cases)} schema cases found in {sys.argv[1]}")
json.dump(cases, open(sys.argv[2], "w"))
print(f"{len(cases)} JSON schema cases of llama.cpp")
EOF
GRAMMAR_SCHEMA_CASES=$work/schema-cases.json "$test" ||
	fail "our JSON schema -> GBNF differs from llama.cpp's"

# the cases of step 2, with grammar files and llama.cpp's schema grammars
$py - tests/engine/grammar-cases.json "$grammars" "$work/schema-cases.json" \
	"$work/cases.json" <<'EOF' || exit 1
import json, sys
cases = json.load(open(sys.argv[1]))
for c in cases:
    if "grammar_file" in c:
        c["grammar"] = open(sys.argv[2] + "/" + c.pop("grammar_file")).read()
schemas = {c["name"]: c for c in json.load(open(sys.argv[3]))}
prompt = "<|im_start|>user\nAnswer with JSON.<|im_end|>\n<|im_start|>assistant\n"
for name in ["required + optional props each in original order", "anyOf",
             "string w/ min & max length", "min -123 max 42", "regexp",
             "additional props", "top-level $ref", "nullable string array",
             "exotic formats"]:
    s = schemas[name]
    cases.append({"name": "schema: " + name, "prompt": prompt,
                  "grammar": s["grammar"], "json_schema": s["schema"]})
json.dump(cases, open(sys.argv[4], "w"), ensure_ascii=False)
EOF

for stem in tiny-qwen2-bpe152k-legacyq tiny-qwen3-bpe16k-f16 stories260K; do
	model=$SHARED/models/$stem.gguf
	[ -f "$model" ] || { fail "no $model"; continue; }
	# each step over the 152k vocabulary costs the reference ~1 s: a few
	# cases there, all of them on the small vocabularies
	$py - "$work/cases.json" "$stem" "$work/cases-$stem.json" <<'EOF'
import json, sys
cases = json.load(open(sys.argv[1]))
if "152k" in sys.argv[2]:
    keep = {"json-chatml", "yes-no", "tokens", "unicode", "node-schema", "list",
            "schema: anyOf", "schema: required + optional props each in original order"}
    cases = [c for c in cases if c["name"] in keep]
json.dump(cases, open(sys.argv[3], "w"), ensure_ascii=False)
EOF
	key=$(cat tools/golden-grammar.mjs "$work/cases-$stem.json" | sha256sum | cut -c1-16)
	refout=$cache/$stem.$key.jsonl
	if [ ! -s "$refout" ]; then
		echo "making the llama.cpp reference for $stem"
		node tools/golden-grammar.mjs "$NODE_REF" "$model" "$work/cases-$stem.json" \
			"$refout.tmp" || { rm -f "$refout.tmp"; fail "reference $stem"; continue; }
		mv "$refout.tmp" "$refout"
	fi
	margin=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["margin"])' \
		"$SHARED/golden/thresholds.json" "$stem")
	n=0
	while IFS= read -r line; do
		n=$((n + 1))
		echo "$line" >"$work/ref.json"
		$py - "$work/ref.json" "$work/cases.json" "$work" <<'EOF' || { fail "case $n"; continue; }
import json, sys
ref = json.load(open(sys.argv[1]))
case = next(c for c in json.load(open(sys.argv[2])) if c["name"] == ref["name"])
open(sys.argv[3] + "/prompt", "w").write(ref["prompt"])
if "json_schema" in case:
    open(sys.argv[3] + "/arg", "w").write("--json-schema")
    open(sys.argv[3] + "/file", "w").write(case["json_schema"])
else:
    open(sys.argv[3] + "/arg", "w").write("--grammar")
    open(sys.argv[3] + "/file", "w").write(ref["grammar"])
EOF
		"$run" -m "$model" -f "$work/prompt" --temp 0 --batch-exact -n 100 \
			-t 2 -c 1024 "$(cat "$work/arg")" "$work/file" --print-tokens \
			>/dev/null 2>"$work/err" || { fail "$stem case $n: $(tail -n 1 "$work/err")"; continue; }
		got=$(sed -n 's/^tokens=//p' "$work/err")
		$py - "$work/ref.json" "$margin" "$got" "$stem" <<'EOF' || fails=$((fails + 1))
import json, sys
ref = json.load(open(sys.argv[1]))
margin = float(sys.argv[2])
got = [int(t) for t in sys.argv[3].split()]
want, margins = ref["tokens"], ref["margins"]
n = len(want)
for i, m in enumerate(margins):
    if m < margin:
        n = i
        break
# the first n tokens must agree (all of them when no step is a near tie)
ok = got[:n] == want[:n] and (n < len(want) or len(want) == 48 or got == want)
tag = f"{sys.argv[4]} '{ref['name']}'"
if ok:
    print(f"ok   {tag}: {n}/{len(want)} tokens compared" + ("" if n == len(want) else f" (near tie at step {n})"))
else:
    first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    print(f"FAIL {tag}: differs at token {first}: llama.cpp {want[first:first+5]} llmfs {got[first:first+5]} (margin there {margins[first] if first < len(margins) else '-'})")
    sys.exit(1)
EOF
	done <"$refout"
	[ "$n" -gt 0 ] || fail "$stem: empty reference"
done
[ $fails -eq 0 ] || exit 1
echo "ok"
