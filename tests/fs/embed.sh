#!/usr/bin/env bash
# The embed files against llama.cpp: for every shared model and every text
# of tests/fs/embed-texts.json, `embed` gives node-llama-cpp's embedding
# context's vector (tools/embed-ref.mjs: LlamaEmbeddingContext of the
# pinned package, its zen4 CPU variant, fed one token at a time as the
# golden data was) bit for bit (within rel_tol where this CPU runs only
# the haswell variant: below), a float per line, on a mount with
# --batch-exact (the one-token bits); with the default batch kernels,
# against the reference fed the text in one batch, within the model's
# rel_tol (../shared/README.md section 4) relative to the vector's largest
# element (|a - b| <= rel_tol * max(1, max |b|)), on the dense models.
# embed.f32 is the same floats as little-endian float32; writers at once
# get the vectors they get alone (one batch of the scheduler); a text
# over the context is EIO with a reason.
#
# The references are cached in
# ${XDG_CACHE_HOME:-~/.cache}/llmfs/embed-ref-<release>-<hash>/ (the hash
# over the script and the texts), made by the zen4 CPU variant of
# llama.cpp (tools/ref-cpu.sh) as the golden data was.
. "$(dirname "$0")/mount-lib.bash"

REF=${LLAMA_REF_DIR:-$PWD/ref}
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json
texts=tests/fs/embed-texts.json
[ -f "$info" ] || skip "no llama.cpp reference in $REF (make ref)"
command -v node >/dev/null || skip "node is absent"

models=$(ls "$SHARED"/models/*.gguf)
release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
# the golden files' CPU variant; the prebuilt would pick another on other
# CPUs (Sapphire Rapids: other numbers)
# (without AVX-512: haswell, tools/ref-cpu.sh golden)
REF=$(tools/ref-cpu.sh golden) || { echo "FAIL: no reference variant runs here"; exit 1; }
variant=${REF##*-}
hash=$(cat tools/embed-ref.mjs "$texts" | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/embed-ref-${release:-unknown}-$variant-$hash
mkdir -p "$cache" || exit 1
exec 9>"$cache/.lock"
flock 9
for batch in 1 full; do
	[ -d "$cache/$batch" ] && continue
	echo "making the reference embeddings (batch $batch)"
	rm -rf "$cache/$batch.tmp"
	mkdir -p "$cache/$batch.tmp"
	# shellcheck disable=SC2086
	node tools/embed-ref.mjs "$REF" "$texts" "$cache/$batch.tmp" $batch \
		$models || { echo "FAIL: tools/embed-ref.mjs"; exit 1; }
	mv "$cache/$batch.tmp" "$cache/$batch"
done
exec 9>&-

# compare MODEL_STEM MODE DIR_OF_ANSWERS [exact]: answer N against line N
compare() {
	python3 - "$SHARED/golden/thresholds.json" "$cache/$2/$1.jsonl" "$3" \
		"$1" "${4:-}" <<'EOF'
import json, struct, sys
thr, ref, got, stem, exact = sys.argv[1:]
tol = 0.0 if exact else json.load(open(thr))[stem]["rel_tol"]
worst = worst_l2 = 0.0
for i, line in enumerate(open(ref)):
    want = json.loads(line)["vector"]
    scale = max(1.0, max(abs(x) for x in want))
    text = [float(x) for x in open(f"{got}/{i}.txt").read().split()]
    raw = open(f"{got}/{i}.f32", "rb").read()
    binary = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if len(text) != len(want) or binary != [struct.unpack("<f", struct.pack("<f", x))[0] for x in text]:
        sys.exit(f"text {i}: {len(text)} numbers, {len(binary)} floats, want {len(want)}")
    l2 = (sum((a - b) ** 2 for a, b in zip(text, want)) /
          sum(b * b for b in want)) ** 0.5
    worst_l2 = max(worst_l2, l2)
    for a, b in zip(text, want):
        err = abs(a - b) / scale
        worst = max(worst, err)
        if err > tol:
            sys.exit(f"text {i}: {a} vs {b} (rel {err:.3g} > {tol}, l2 {l2:.3g})")
print(f"{stem}: max rel {worst:.3g}, l2 {worst_l2:.3g} (tolerance {tol})")
EOF
}

args=()
for m in $models; do
	args+=(--name "$(basename "$m" .gguf | tr 'A-Z' 'a-z')=$m")
done
n_texts=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$texts")

# text_of I: text I of the list, and a newline (the one llmfs drops)
text_of() {
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[$1])" \
		"$texts"
}

# embed_all MODEL_DIR OUT_DIR: every text through embed and embed.f32
embed_all() {
	mkdir -p "$2"
	for ((i = 0; i < n_texts; i++)); do
		text_of $i > "$2/in"
		cat "$2/in" > "$1/embed"
		cat "$1/embed" > "$2/$i.txt"
		cat "$2/in" > "$1/embed.f32"
		cat "$1/embed.f32" > "$2/$i.f32"
	done
}

# Bit for bit against zen4 only: the avx2 level does not sum everywhere
# in haswell's order (on an AVX2-only EPYC every model's one-token vector
# was 5e-9 to 1e-5 relative apart from haswell's), so against haswell
# the one-token vectors are held to the model's rel_tol too.
exact_bits=exact
[ "$variant" = zen4 ] || exact_bits=
mount_llmfs --batch-exact "${args[@]}"
wait_loaded || fail "models loaded"
for m in $models; do
	stem=$(basename "$m" .gguf)
	name=$(echo "$stem" | tr 'A-Z' 'a-z')
	embed_all "$MNT/$name" "$WORK/exact/$stem"
	if out=$(compare "$stem" 1 "$WORK/exact/$stem" $exact_bits 2>&1); then
		ok "embed = node-llama-cpp's embedding context ($variant${exact_bits:+, bit for bit}): $out"
	else
		fail "embed of $stem: $out"
	fi
done

# writers at once: one batch, each its own vector
S=$MNT/tiny-qwen3-bpe16k-f16
writers=()
for ((i = 0; i < n_texts; i++)); do
	text_of $i > "$WORK/par-in-$i"
done
for ((i = 0; i < n_texts; i++)); do
	(
		exec 3<>"$S/embed"
		cat "$WORK/par-in-$i" >&3
		cat <&3 > "$WORK/par-$i.txt"
	) &
	writers+=($!)
done
wait "${writers[@]}"
for ((i = 0; i < n_texts; i++)); do
	same "$WORK/exact/tiny-qwen3-bpe16k-f16/$i.txt" "$WORK/par-$i.txt" \
		"embed $i among $n_texts writers at once = alone"
done

# a text longer than the context: EIO, and why
python3 -c "print('Once upon a time ' * 2000)" > "$S/embed"
! cat "$S/embed" > /dev/null 2>&1
check "embed over the context: EIO" [ $? = 0 ]
check "... and errors says why" grep -q 'embed: .*the context holds' "$S/errors"
check "an embed read with nothing written is EOF" [ -z "$(cat "$MNT/stories260k/embed")" ]
unmount_llmfs

# the default batch kernels, on the dense models
mount_llmfs "${args[@]}"
wait_loaded || fail "models loaded"
for m in $models; do
	stem=$(basename "$m" .gguf)
	case $stem in *moe*) continue ;; esac
	embed_all "$MNT/$(echo "$stem" | tr 'A-Z' 'a-z')" "$WORK/batch/$stem"
	if out=$(compare "$stem" full "$WORK/batch/$stem" 2>&1); then
		ok "embed (batch kernels) = the reference's batch: $out"
	else
		fail "embed of $stem with batch kernels: $out"
	fi
done
unmount_llmfs
finish
