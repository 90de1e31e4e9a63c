#!/usr/bin/env bash
# Stores (Documentation/stores.md): an Ollama models directory, a Hugging
# Face hub cache, an LM Studio tree and llama.cpp's flat cache, built here
# in their real layouts from the shared models, mounted as they are:
#
# - each model appears under its store's name, with where it came from
#   and its file type (general.file_type, as llama.cpp and Ollama name it);
# - each generates what the same file mounted directly generates (a split
#   model of the hub cache too); the Ollama params layer gives config its
#   defaults and num_ctx the context, the system layer chat's system prompt;
# - a broken manifest, a missing blob, a dangling snapshot link: one
#   errors line each, and the other models mount;
# - a pulled model appears and a removed one goes within a second while
#   another model generates undisturbed; removing the blob of a model being
#   read lets its reader finish;
# - nothing in the stores changes (names, sizes, checksums) while mounted.
. "$(dirname "$0")/mount-lib.bash"

SPLIT=$BUILD/bin/llmfs-split
WRITE=$BUILD/bin/llmfs-write-model
[ -x "$SPLIT" ] || skip "$SPLIT is not built"
[ -x "$WRITE" ] || skip "$WRITE is not built"
MOE=$SHARED/models/tiny-qwen3moe-bpe16k-q4km.gguf
N=24
P='Once upon a time'

sha() { sha256sum "$1" | cut -d' ' -f1; }

# Everything a store holds: every name, its type, size and bytes.
snapshot() {
	(cd "$1" && find . -printf '%y %p %s %l\n' | sort &&
		find . -type f -exec sha256sum {} + | sort)
}

# wait_for SECONDS COMMAND...: poll every 50 ms; prints the time taken.
wait_for() {
	local limit=$1 start end
	shift
	start=$(date +%s%N)
	while ! "$@"; do
		end=$(date +%s%N)
		[ $(((end - start) / 1000000)) -gt $((limit * 1000)) ] && return 1
		sleep 0.05
	done
	end=$(date +%s%N)
	echo "# after $(((end - start) / 1000000)) ms"
}

model_line() { grep -q "^$1 " "$MNT/models"; }
no_model_line() { ! grep -q "^$1 " "$MNT/models"; }

# ---- an Ollama models directory ------------------------------------------
OL=$WORK/ollama
mkdir -p "$OL/blobs" "$OL/manifests/registry.ollama.ai/library/stories" \
	"$OL/manifests/registry.ollama.ai/library/broken" \
	"$OL/manifests/registry.ollama.ai/library/noblob" \
	"$OL/manifests/registry.ollama.ai/llmfs/tinyq4"
# blob BYTES-FILE: store it under its digest, print the digest
blob() {
	local d
	d=$(sha "$1")
	cp "$1" "$OL/blobs/sha256-$d"
	echo "$d"
}
layer() { printf '{"mediaType":"application/vnd.ollama.image.%s","digest":"sha256:%s","size":%s}' "$1" "$2" "$(stat -c %s "$OL/blobs/sha256-$2" 2>/dev/null || echo 1)"; }
manifest() { # PATH CONFIG-DIGEST LAYER...
	local path=$1 config=$2 layers
	shift 2
	layers=$(IFS=,; echo "$*")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:%s","size":2},"layers":[%s]}\n' \
		"$config" "$layers" > "$OL/manifests/$path"
}
printf '{"num_ctx":256,"num_predict":%d,"repeat_penalty":1,"stop":["<|im_end|>"],"temperature":0,"top_k":20,"mirostat":0}\n' $N > "$WORK/params"
printf 'You are a storyteller.' > "$WORK/system"
printf '{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n' > "$WORK/template"
printf '<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>' > "$WORK/template-llama3"
printf '{"model_format":"gguf"}' > "$WORK/config"
D_STORIES=$(blob "$STORIES")
D_PARAMS=$(blob "$WORK/params")
D_SYSTEM=$(blob "$WORK/system")
D_TEMPLATE=$(blob "$WORK/template")
D_TEMPLATE3=$(blob "$WORK/template-llama3")
D_CONFIG=$(blob "$WORK/config")
manifest registry.ollama.ai/library/stories/260k "$D_CONFIG" \
	"$(layer model "$D_STORIES")" "$(layer params "$D_PARAMS")" \
	"$(layer system "$D_SYSTEM")" "$(layer template "$D_TEMPLATE")"
# a Q4_K_M file with general.file_type, in another namespace
"$WRITE" -o "$WORK/q4km.gguf" --arch llama --embd 256 --layers 1 --heads 4 \
	--kv-heads 4 --head-dim 64 --ff 256 --type q4_k_m >/dev/null
D_Q4=$(blob "$WORK/q4km.gguf")
manifest registry.ollama.ai/llmfs/tinyq4/latest "$D_CONFIG" \
	"$(layer model "$D_Q4")" "$(layer template "$D_TEMPLATE3")"
printf '{"schemaVersion":2,"layers":[{"mediaType":' \
	> "$OL/manifests/registry.ollama.ai/library/broken/latest"
manifest registry.ollama.ai/library/noblob/latest "$D_CONFIG" \
	"$(layer model 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef)"
# what a pull writes later: the blob first, the manifest last
D_QWEN=$(sha "$QWEN")

# ---- a Hugging Face hub cache --------------------------------------------
HUB=$WORK/hub
REPO=$HUB/models--llmfs--tiny-GGUF
REV=0123456789abcdef0123456789abcdef01234567
OLDREV=89abcdef0123456789abcdef0123456789abcdef
mkdir -p "$REPO/refs" "$REPO/blobs" "$REPO/snapshots/$REV/sub" \
	"$REPO/snapshots/$OLDREV"
echo "$REV" > "$REPO/refs/main"
hub_file() { # SNAPSHOT-PATH SOURCE: the blob, and the snapshot's link to it
	local d rel up
	d=$(sha "$2")
	cp "$2" "$REPO/blobs/$d"
	rel=${1#"$REPO/snapshots/"}
	up=$(echo "$rel" | sed 's|[^/]*/|../|g; s|[^/]*$||')
	ln -s "../$up/blobs/$d" "$1"
}
hub_file "$REPO/snapshots/$REV/tiny-qwen3-bpe16k-mixq.gguf" "$MIXQ"
"$SPLIT" --parts 2 "$STORIES" "$WORK/stories-F32" >/dev/null
hub_file "$REPO/snapshots/$REV/sub/stories-F32-00001-of-00002.gguf" \
	"$WORK/stories-F32-00001-of-00002.gguf"
hub_file "$REPO/snapshots/$REV/sub/stories-F32-00002-of-00002.gguf" \
	"$WORK/stories-F32-00002-of-00002.gguf"
hub_file "$REPO/snapshots/$REV/mmproj-tiny-f16.gguf" "$QWEN"
ln -s ../../blobs/0000000000000000000000000000000000000000000000000000000000000000 \
	"$REPO/snapshots/$REV/tiny-Q4_0.gguf"
hub_file "$REPO/snapshots/$OLDREV/tiny-old-Q8_0.gguf" "$QWEN"

# ---- an LM Studio tree and llama.cpp's flat cache -------------------------
LMS=$WORK/lmstudio
mkdir -p "$LMS/llmfs-community/tiny-moe-GGUF"
ln -s "$MOE" "$LMS/llmfs-community/tiny-moe-GGUF/tiny-qwen3moe-Q4_K_M.gguf"
LCPP=$WORK/llamacpp
mkdir -p "$LCPP"
cp "$QWEN" "$LCPP/llmfs_tiny-GGUF_tiny-qwen3-f16.gguf"
printf '{"ggufFile":{"rfilename":"tiny-qwen3-f16.gguf"}}' \
	> "$LCPP/manifest=llmfs=tiny-GGUF=F16.json"
echo "etag" > "$LCPP/llmfs_tiny-GGUF_tiny-qwen3-f16.gguf.etag"

for s in "$OL" "$HUB" "$LMS" "$LCPP"; do snapshot "$s"; done > "$WORK/before"

# ---- the references ----------------------------------------------------------
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect-stories" 2>/dev/null
"$RUN" -m "$MIXQ" -p "$P" --temp 0 -n $N > "$WORK/expect-mixq" 2>/dev/null
"$RUN" -m "$STORIES" --temp 0 -n $N -p "<|im_start|>system
You are a storyteller.<|im_end|>
<|im_start|>user
$P<|im_end|>
<|im_start|>assistant
" > "$WORK/expect-chat" 2>/dev/null
check "llmfs-run gave the references" eval '[ -s "$WORK/expect-stories" ] &&
	[ -s "$WORK/expect-mixq" ] && [ -s "$WORK/expect-chat" ]'

# ---- the mount: each store found by its layout ------------------------------
mount_llmfs "$OL" "$HUB" "$LMS" "$LCPP" --name direct="$STORIES"
wait_loaded || fail "models loaded in 10 s"
cp "$MNT/models" "$WORK/models"
sed 's/^/# /' "$WORK/models"
check "ollama: stories:260k, F32, from the Ollama store" \
	grep -qx "stories:260k llama 293K F32 ready ollama:$OL" "$WORK/models"
check "ollama: another namespace is llmfs--tinyq4:latest, file type Q4_K_M (general.file_type)" \
	grep -qE "^llmfs--tinyq4:latest llama [0-9.]+[KM] Q4_K_M ready ollama:$OL\$" "$WORK/models"
check "hf: ORG--NAME:TAG from the file's quantization (Q6_K mixq guessed as llama.cpp does)" \
	grep -qE "^llmfs--tiny-GGUF:MIXQ qwen3 [0-9.]+[KM] [A-Z0-9_]+ ready hf:$HUB\$" "$WORK/models"
check "hf: the two-part model is one model" \
	grep -qx "llmfs--tiny-GGUF:F32 llama 293K F32 ready hf:$HUB" "$WORK/models"
check "hf: no mmproj, no other snapshot than refs/main's" \
	[ "$(grep -c " hf:$HUB\$" "$WORK/models")" = 3 ]
# Without general.file_type, llama.cpp guesses the type of the most
# tensors: F32 for these tiny models, whose norms outnumber their matrices.
check "lmstudio: PUBLISHER--REPO:TAG (the file type guessed as llama.cpp does)" \
	grep -qE "^llmfs-community--tiny-moe-GGUF:Q4_K_M qwen3moe [0-9.]+[KM] F32 ready lmstudio:$LMS\$" "$WORK/models"
check "llamacpp: ORG--REPO:TAG from its manifest=... file" \
	grep -qE "^llmfs--tiny-GGUF:F16 qwen3 [0-9.]+[KM] F32 ready llamacpp:$LCPP\$" "$WORK/models"
check "a file named directly says so" \
	grep -qx "direct llama 293K F32 ready file:$STORIES" "$WORK/models"

# Broken entries: a failed model with one errors line each; the rest mount.
one_line() { # MODEL PATTERN
	[ "$(wc -l < "$MNT/$1/errors")" = 1 ] && grep -q "$2" "$MNT/$1/errors"
}
check "a manifest that is not JSON: failed, one errors line" \
	one_line broken:latest 'store: manifest of registry.ollama.ai/library/broken:latest: not JSON'
check "a missing blob: failed, one errors line" \
	one_line noblob:latest 'store: .*/blobs/sha256-0123.*: the model layer of .* is missing'
check "a dangling snapshot link: failed, one errors line" \
	one_line llmfs--tiny-GGUF:Q4_0 'store: .*/tiny-Q4_0.gguf: dangling symlink to ../../blobs/0000'
check "the failed ones are listed as failed" \
	[ "$(grep -c ' - - - failed ' "$WORK/models")" = 3 ]
# (a mounted file's size is 0 whatever it holds: read it)
check "the others have an empty errors file" eval \
	'[ -z "$(cat "$MNT/stories:260k/errors")" ] && [ -z "$(cat "$MNT/llmfs--tiny-GGUF:F32/errors")" ]'

# info: the file type, where it came from, Ollama's params and template.
I=$MNT/stories:260k/info
check "info: file_type F32 guessed (no general.file_type in stories260K)" \
	grep -qx 'file_type F32 guessed' "$I"
check "info: source ollama ROOT, source_name the full Ollama name" eval \
	'grep -qx "source ollama $OL" "$I" && grep -qx "source_name registry.ollama.ai/library/stories:260k" "$I"'
check "info: source_params as the params layer says, mirostat not used" eval \
	'grep -qx "source_params num_ctx=256 num_predict=$N repeat_penalty=1 stop=<|im_end|> temperature=0 top_k=20" "$I" &&
	grep -qx "source_params_ignored mirostat" "$I"'
check "info: the template layer, and its family (ChatML, as chat uses)" eval \
	'grep -qF "source_template {{ if .System }}<|im_start|>system\\n" "$I" &&
	grep -qx "source_template_family chatml" "$I" && ! grep -q differs "$I"'
check "info: a template of another family than the GGUF's says so" \
	grep -qx "source_template_differs chat uses the GGUF's template (chatml), not the store's (llama3)" \
	"$MNT/llmfs--tinyq4:latest/info"
check "info: general.file_type read, not guessed" \
	grep -qx 'file_type Q4_K_M' "$MNT/llmfs--tinyq4:latest/info"
check "info: the split model's two files" \
	[ "$(grep -c "^file $REPO/snapshots/$REV/sub/stories-F32-0000[12]-of-00002.gguf\$" "$MNT/llmfs--tiny-GGUF:F32/info")" = 2 ]

# The params layer's defaults, num_ctx as the context.
C=$MNT/stories:260k/config
check "config: the params layer's defaults" eval \
	'grep -qx temperature=0 "$C" && grep -qx top_k=20 "$C" &&
	grep -qx "max_tokens=$N" "$C" && grep -qx "stop=<|im_end|>" "$C"'
check "config: the system layer is chat's system prompt" \
	grep -qx 'system=You are a storyteller.' "$C"
check "kv: num_ctx 256 is the context" grep -qx 'n_ctx 256' "$MNT/stories:260k/kv"
check "kv: a model without it keeps the file's (stories260K: 512)" grep -qx 'n_ctx 512' "$MNT/direct/kv"

# Each model generates what the same file mounted directly does.
printf 'temperature=0\nmax_tokens=%d\n' $N > "$WORK/greedy"
for m in direct llmfs--tiny-GGUF:F32 llmfs--tiny-GGUF:MIXQ; do
	cat "$WORK/greedy" > "$MNT/$m/config"
done
gen() { # MODEL FILE: the shell idiom
	printf '%s' "$P" > "$MNT/$1/generate"
	cat "$MNT/$1/generate" > "$2"
}
gen direct "$WORK/direct"
same "$WORK/expect-stories" "$WORK/direct" "the file mounted directly = llmfs-run"
gen stories:260k "$WORK/ollama-gen"
same "$WORK/direct" "$WORK/ollama-gen" "ollama stories:260k, with the params layer's defaults, = the file mounted directly"
gen llmfs--tiny-GGUF:F32 "$WORK/split-gen"
same "$WORK/direct" "$WORK/split-gen" "hf: the two-part model = the one file mounted directly"
gen llmfs--tiny-GGUF:MIXQ "$WORK/mixq-gen"
same "$WORK/expect-mixq" "$WORK/mixq-gen" "hf: mixq through the snapshot's link = llmfs-run on the file"
printf '%s' "$P" > "$MNT/stories:260k/chat"
cat "$MNT/stories:260k/chat" > "$WORK/chat"
same "$WORK/expect-chat" "$WORK/chat" "chat: the system layer's prompt comes first (ChatML system turn)"
"$RUN" -m "$MOE" -p "$P" --temp 0 -n $N > "$WORK/expect-moe" 2>/dev/null
cat "$WORK/greedy" > "$MNT/llmfs-community--tiny-moe-GGUF:Q4_K_M/config"
gen llmfs-community--tiny-moe-GGUF:Q4_K_M "$WORK/moe-gen"
same "$WORK/expect-moe" "$WORK/moe-gen" "lmstudio: the MoE model through its link = llmfs-run on the file"

for s in "$OL" "$HUB" "$LMS" "$LCPP"; do snapshot "$s"; done > "$WORK/after"
same "$WORK/before" "$WORK/after" "nothing in the stores changed while mounted and used"

# ---- a pull and a removal while another model generates -------------------
# a long answer of the direct model, read slowly, the whole time
printf 'temperature=0\nmax_tokens=400\n' > "$MNT/direct/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 400 > "$WORK/expect-long" 2>/dev/null
(exec 3<>"$MNT/direct/generate"; printf '%s' "$P" >&3
	while IFS= read -r -N 64 -u 3 chunk; do printf '%s' "$chunk"; sleep 0.02; done
	printf '%s' "$chunk") > "$WORK/long" &
READER=$!
mkdir -p "$OL/manifests/registry.ollama.ai/library/qwen"
blob "$QWEN" >/dev/null
manifest registry.ollama.ai/library/qwen/tiny "$D_CONFIG" "$(layer model "$D_QWEN")"
check "a pulled model appears in models within a second" wait_for 1 model_line qwen:tiny
check "and its directory is there" [ -d "$MNT/qwen:tiny" ]
rm "$OL/manifests/registry.ollama.ai/library/qwen/tiny"
check "a removed model leaves models within a second" wait_for 1 no_model_line qwen:tiny
check "and its directory is gone" [ ! -e "$MNT/qwen:tiny" ]
wait $READER
same "$WORK/expect-long" "$WORK/long" "the model generating meanwhile was undisturbed"

# ---- the blob of a model being read goes ---------------------------------------
# (200 tokens: its context is num_ctx, 256)
printf 'temperature=0\nmax_tokens=200\n' > "$MNT/stories:260k/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 200 > "$WORK/expect-200" 2>/dev/null
exec 3<>"$MNT/stories:260k/generate"
printf '%s' "$P" >&3
IFS= read -r -N 16 -u 3 head
rm "$OL/blobs/sha256-$D_STORIES"
check "the model whose blob went is replaced by a failed one" \
	wait_for 1 grep -q '^stories:260k - - - failed ' "$MNT/models"
check "which says why, in one line" \
	one_line stories:260k 'the model layer of registry.ollama.ai/library/stories:260k is missing'
cat <&3 > "$WORK/tail"
exec 3>&-
printf '%s' "$head" | cat - "$WORK/tail" > "$WORK/blob-gone"
same "$WORK/expect-200" "$WORK/blob-gone" "its reader finished its answer from the model it had open"
check "the directory gives no access to the old model any more" \
	grep -qx 'state failed' "$MNT/stories:260k/info"

for s in "$OL" "$HUB" "$LMS" "$LCPP"; do snapshot "$s"; done > "$WORK/before2"
unmount_llmfs
for s in "$OL" "$HUB" "$LMS" "$LCPP"; do snapshot "$s"; done > "$WORK/after2"
same "$WORK/before2" "$WORK/after2" "nothing in the stores changed by the unmount"

# ---- named stores: -o store=KIND:PATH, and a kind's usual place --------------
mount_llmfs -o "store=hf:$HUB,store=lmstudio:$LMS"
check "-o store=hf:PATH,store=lmstudio:PATH mount those stores" eval \
	'model_line llmfs--tiny-GGUF:MIXQ &&
	model_line llmfs-community--tiny-moe-GGUF:Q4_K_M'
unmount_llmfs
mkdir -p "$WORK/home/.cache/huggingface"
ln -s "$HUB" "$WORK/home/.cache/huggingface/hub"
HOME=$WORK/home mount_llmfs --store hf
check "--store hf: the cache where huggingface_hub keeps it (~/.cache/huggingface/hub)" \
	model_line llmfs--tiny-GGUF:F32
unmount_llmfs
check "--store ollama with no store anywhere is refused with its reason" \
	sh -c "HOME=$WORK/home OLLAMA_MODELS= '$LLMFS' --store ollama '$MNT' 2>&1 | grep -q 'no ollama store found'"

finish
