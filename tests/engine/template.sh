#!/usr/bin/env bash
# Chat templates against the reference: every template llama.cpp's source
# ships (models/templates/*.jinja, from the bundle the pinned
# node-llama-cpp carries: tools/build-llama.sh --source clones it), for
# every conversation of tests/engine/template-conversations.json (system
# and user, several turns, thinking on and off, tool calls), rendered by
# @huggingface/jinja as node-llama-cpp installs it (tools/template-ref.mjs)
# and by llmfs's interpreter (test_template's reference test): the same
# bytes, the same raise_exception() messages. The renderings the
# reference itself cannot make are listed (Documentation/generation.md
# keeps the list).
#
# The reference file is cached in
# ${XDG_CACHE_HOME:-~/.cache}/llmfs/template-ref-<release>-<hash>.jsonl,
# the hash over the script, the conversations and the templates.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
REF=${LLAMA_REF_DIR:-$PWD/ref}
test=$BUILD/tests/engine/test_template
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json
conv=tests/engine/template-conversations.json

[ -x "$test" ] || { echo "FAIL: $test is not built"; exit 1; }
[ -f "$info" ] || { echo "no llama.cpp reference in $REF (make ref): skipped"; exit 77; }
[ -d "$REF/node_modules/@huggingface/jinja" ] ||
	{ echo "no @huggingface/jinja in $REF: skipped"; exit 77; }
command -v node >/dev/null || { echo "node is absent: skipped"; exit 77; }
src=$(tools/build-llama.sh --source) || {
	rc=$?
	[ $rc -eq 77 ] && { echo "no llama.cpp source: skipped"; exit 77; }
	echo "FAIL: tools/build-llama.sh --source"; exit 1
}
dir=$src/models/templates
[ -d "$dir" ] || { echo "FAIL: no $dir"; exit 1; }

release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
hash=$(cat tools/template-ref.mjs "$conv" "$dir"/*.jinja | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmfs
out=$cache/template-ref-${release:-unknown}-$hash.jsonl
mkdir -p "$cache" || exit 1
if [ ! -s "$out" ]; then
	echo "rendering the references with @huggingface/jinja"
	node tools/template-ref.mjs "$REF" "$dir" "$conv" "$out.tmp" ||
		{ rm -f "$out.tmp"; echo "FAIL: tools/template-ref.mjs"; exit 1; }
	mv "$out.tmp" "$out"
fi
n=$(ls "$dir"/*.jinja | wc -l)
echo "$n templates x $(grep -c '^  "name"' "$conv") conversations"
TZ=UTC TEMPLATE_REF=$out TEMPLATE_DIR=$dir TEMPLATE_CONVERSATIONS=$conv \
	"$test" || exit 1
