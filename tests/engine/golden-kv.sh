#!/usr/bin/env bash
# The engine with a quantized KV cache against llama.cpp with the same
# cache types: for q8_0/q8_0 and q8_0/q4_0 on tiny-qwen3-bpe16k-f16
# (head_dim 32, F16 weights, the tight 2e-3 rule) and
# tiny-llama-spm32k-kquant (K-quants), reference generations are made by
# the pinned llama.cpp (tools/golden-kv.mjs through node-llama-cpp in
# ref/, its type_k/type_v context parameters) and judged by test_golden's
# rule (../shared/README.md, section 4: teacher-forced top-5 logits within
# the model's rel_tol, free-running tokens equal up to the first near tie).
#
# Past 256 positions llama.cpp splits F16 attention by ranges of cells,
# one per thread, and merges the partial sums (kv.md): two prompts of 425
# and 491 tokens (tests/engine/prompts-long.json) with f16/f16, the
# engine at the reference's 2 threads, must match too.
#
# The generator is first checked to be the golden path: with f16/f16 it
# must write the shared golden file byte for byte. On a CPU without
# AVX-512 the zen4 variant cannot run: the references are made by the
# haswell variant (tools/ref-cpu.sh golden), the llama.cpp such a machine
# runs, whose F16 sums are 8 lanes wide where zen4's are 16, so its f16/f16
# file differs from the shared one in the last bits (the same tokens); the
# generator's check is then that the engine meets test_golden's rule
# against that file too. Its files are kept in
# ${XDG_CACHE_HOME:-~/.cache}/llmfs/golden-kv-<release>-<variant>-<inputs>/ (a minute
# per model and pair on the 2-core machine), so CI runs make them once;
# <inputs> is a digest of everything they are made from (the generator,
# the prompt files, the models), so an edited prompt or generator makes new
# references instead of reading stale ones.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
REF=${LLAMA_REF_DIR:-$PWD/ref}
test=$BUILD/tests/engine/test_golden
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json

[ -x "$test" ] || { echo "FAIL: $test is not built"; exit 1; }
[ -f "$SHARED/models/tiny-qwen3-bpe16k-f16.gguf" ] ||
	{ echo "no $SHARED models: skipped"; exit 77; }
[ -f "$info" ] || { echo "no llama.cpp reference in $REF (make ref): skipped"; exit 77; }
command -v node >/dev/null || { echo "node is absent: skipped"; exit 77; }

release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
# The golden files were made by the zen4 CPU variant; the prebuilt would
# pick another on other CPUs (Sapphire Rapids: other logits).
REF=$(tools/ref-cpu.sh golden) || { echo "FAIL: no reference variant runs here"; exit 1; }
variant=${REF##*-}
inputs=$(cat tools/golden-kv.mjs "$SHARED"/golden/prompts-qwen.json \
	"$SHARED"/golden/prompts-llama.json tests/engine/prompts-long.json \
	"$SHARED"/golden/tiny-qwen3-bpe16k-f16.jsonl \
	"$SHARED"/models/tiny-qwen3-bpe16k-f16.gguf \
	"$SHARED"/models/tiny-llama-spm32k-kquant.gguf | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/golden-kv-${release:-unknown}-$variant-$inputs
mkdir -p "$cache" || exit 1
exec 9>"$cache/.lock"
flock 9

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# make $dir/<stem>.<k>-<v>.jsonl unless it is there
make_ref_in() {
	local dir=$1 stem=$2 k=$3 v=$4 prompts=$5 out
	out=$dir/$stem.$k-$v.jsonl
	[ -s "$out" ] && return 0
	echo "making the llama.cpp reference $stem $k/$v ($(basename "$prompts"))"
	node tools/golden-kv.mjs "$REF" "$SHARED/models/$stem.gguf" \
		"$prompts" "$out.tmp" "$k" "$v" ||
		{ rm -f "$out.tmp"; return 1; }
	mv "$out.tmp" "$out"
}
make_ref() {
	make_ref_in "$cache" "$1" "$2" "$3" "$SHARED/golden/prompts-$4.json"
}

if [ ! -s "$cache/checked-f16" ]; then
	make_ref tiny-qwen3-bpe16k-f16 f16 f16 qwen ||
		{ echo "FAIL: the generator failed"; exit 1; }
	if [ "$variant" = zen4 ]; then
		cmp -s "$cache/tiny-qwen3-bpe16k-f16.f16-f16.jsonl" \
			"$SHARED/golden/tiny-qwen3-bpe16k-f16.jsonl"
	else
		GOLDEN_KV=f16/f16 GOLDEN_DIR=$cache "$test"
	fi
	checked=$?
	rm -f "$cache/tiny-qwen3-bpe16k-f16.f16-f16.jsonl"
	if [ $checked -ne 0 ]; then
		# the other references would be made by the same wrong path
		echo "FAIL: tools/golden-kv.mjs f16/f16 ($variant) is not the shared golden file's path"
		exit 1
	fi
	echo ok > "$cache/checked-f16"
fi

for pair in q8_0/q8_0 q8_0/q4_0; do
	k=${pair%/*} v=${pair#*/}
	make_ref tiny-qwen3-bpe16k-f16 "$k" "$v" qwen || fail "reference $pair"
	make_ref tiny-llama-spm32k-kquant "$k" "$v" llama || fail "reference $pair"
	GOLDEN_KV=$pair GOLDEN_DIR=$cache "$test" || fail "test_golden $pair"
done
mkdir -p "$cache/long"
make_ref_in "$cache/long" tiny-qwen3-bpe16k-f16 f16 f16 \
	tests/engine/prompts-long.json || fail "reference of the long prompts"
GOLDEN_THREADS=2 GOLDEN_KV=f16/f16 GOLDEN_DIR=$cache/long "$test" ||
	fail "test_golden: long prompts, split attention"
[ $fails -eq 0 ] || exit 1
echo "ok"
