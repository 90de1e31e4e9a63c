#!/usr/bin/env bash
# The tree under the mount and the format of every file (Documentation/
# ABI.md): models, status, metrics, info, stats, config, errors, kv,
# placement, weights/ (bytes equal to the GGUF file's), sessions/; a file
# that is not a model stays a directory with errors; bad writes are EINVAL.
. "$(dirname "$0")/mount-lib.bash"

printf 'this is not a GGUF file\n' > "$WORK/broken.gguf"
mount_llmfs --name stories="$STORIES" "$QWEN" "$WORK/broken.gguf"
wait_loaded || fail "models loaded in 10 s"
M=$MNT/stories
Q=$MNT/tiny-qwen3-bpe16k-f16

check "root lists the three files and the models" \
	[ "$(ls "$MNT" | tr '\n' ' ')" = "broken metrics models status stories tiny-qwen3-bpe16k-f16 " ]
check "model directory lists its files" \
	[ "$(ls "$M" | tr '\n' ' ')" = "chat config embed embed.f32 errors generate info kv placement sessions stats tokenize weights " ]
cat "$MNT/models" > "$WORK/models"
check "models: one line per model" [ "$(wc -l < "$WORK/models")" = 3 ]
# the file type as llama.cpp names it: stories260K has no general.file_type,
# and llama.cpp's guess (the type of the most tensors) is F32
check "models: stories line (name arch params file-type state source)" \
	grep -qx "stories llama 293K F32 ready file:$STORIES" "$WORK/models"
check "models: qwen3 line" \
	grep -qE "^tiny-qwen3-bpe16k-f16 qwen3 [0-9.]+[KMB] [A-Z0-9_]+ ready file:$QWEN\$" "$WORK/models"
check "models: the broken file is a failed model" \
	grep -qx "broken - - - failed file:$WORK/broken.gguf" "$WORK/models"

cat "$MNT/status" > "$WORK/status"
for k in uptime_s memory_rss_bytes memory_available_bytes models_ready \
		models_failed sessions generations_active; do
	check "status has $k" grep -qE "^$k [0-9]+$" "$WORK/status"
done
check "status: device line" grep -qE '^device cpu threads=[0-9]+' "$WORK/status"
check "status: 2 ready" grep -qx 'models_ready 2' "$WORK/status"
check "status: 1 failed" grep -qx 'models_failed 1' "$WORK/status"

cat "$MNT/metrics" > "$WORK/metrics"
check "metrics: every line is Prometheus text format" \
	awk '!/^# (HELP|TYPE) llmfs_[a-z_]+ .+$/ &&
	     !/^llmfs_[a-z_]+\{model="[^"]+"\} -?[0-9.e+-]+$/ { bad = 1 }
	     END { exit bad }' "$WORK/metrics"
check "metrics: a sample per model" \
	[ "$(grep -c '^llmfs_model_state{' "$WORK/metrics")" = 3 ]
check "metrics: stories is ready (1)" \
	grep -qx 'llmfs_model_state{model="stories"} 1' "$WORK/metrics"

cat "$M/info" > "$WORK/info"
for k in architecture parameters layers heads heads_kv context vocab \
		tokenizer quant_mix file sha256; do
	check "info has $k" grep -q "^$k " "$WORK/info"
done
check "info: architecture llama" grep -qx 'architecture llama' "$WORK/info"
check "info: layers 5" grep -qx 'layers 5' "$WORK/info"
check "info: vocab 512" grep -qx 'vocab 512' "$WORK/info"
check "info: heads 8" grep -qx 'heads 8' "$WORK/info"
check "info: heads_kv 4" grep -qx 'heads_kv 4' "$WORK/info"
check "info: the digest is computed" \
	wait_for 120 eval "! grep -q computing '$M/info'"
check "info: sha256 equals sha256sum of the file" \
	grep -qx "sha256 $(sha256sum "$STORIES" | cut -d' ' -f1)" "$M/info"

cat "$M/stats" > "$WORK/stats"
for k in requests tokens_in tokens_out ttft_ms_last ttft_ms_p50 prefill_tps \
		decode_tps load_s; do
	check "stats has $k" grep -qE "^$k [0-9.]+$" "$WORK/stats"
done
check "stats: weights_merge says where the idle merge into huge pages is" \
	grep -qE '^weights_merge (merging|done|unsupported)$' "$WORK/stats"
merged=0
for m in "$M" "$Q"; do
	check "stats: the idle merge of ${m##*/} ends" wait_for 120 \
		grep -qE '^weights_merge (done|unsupported)$' "$m/stats"
	b=$(sed -n 's/^weights_merged_bytes //p' "$m/stats")
	check "stats: weights_merged_bytes of ${m##*/} is whole 2 MiB pages" \
		[ "$((${b:-1} % 2097152))" = 0 ]
	grep -qx 'weights_merge unsupported' "$m/stats" &&
		check "stats: nothing merged where the kernel cannot" [ "$b" = 0 ]
	merged=$((merged + ${b:-0}))
done
huge_kb=$(sed -n 's/^AnonHugePages: *\([0-9]*\) kB$/\1/p' /proc/$PID/smaps_rollup)
check "the daemon's huge pages (smaps) hold what the stats say was merged" \
	[ "${huge_kb:-0}" -ge $((merged / 1024)) ]

# config: defaults, a round trip, all-or-nothing, EINVAL with a reason.
check "config lists the fourteen keys" \
	[ "$(cut -d= -f1 "$M/config" | tr '\n' ' ')" = "temperature top_k top_p min_p repeat_penalty seed max_tokens stop system format json_schema grammar logprobs think " ]
printf 'temperature=0.5\ntop_k=7\nstop=\\n\\n\n' > "$M/config"
check "config: written values read back" \
	grep -qx 'top_k=7' "$M/config"
check "config: stop strings are escaped" grep -qx 'stop=\\n\\n' "$M/config"
# One write(2) applies all or nothing (bash's printf writes line by line;
# cat writes the file at once).
printf 'top_k=3\ntemperature=hot\n' > "$WORK/conf"
if cat "$WORK/conf" > "$M/config" 2>"$WORK/err"; then
	fail "config: a bad value fails the write"
else
	check "config: a bad value fails with EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "config: nothing of a failed write applies" grep -qx 'top_k=7' "$M/config"
check "config: errors names the bad value" \
	grep -qE '^[0-9T:-]+Z config: bad value for temperature' "$M/errors"
if echo 'temp=1' > "$M/config" 2>"$WORK/err"; then
	fail "config: an unknown key fails the write"
else
	check "config: an unknown key fails with EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "config: errors names the unknown key" grep -q "unknown key 'temp'" "$M/errors"
for bad in 'top_p=2' 'max_tokens=-1' 'seed=x' 'nokey' 'min_p=nan'; do
	if echo "$bad" > "$M/config" 2>/dev/null; then
		fail "config: '$bad' is refused"
	else
		ok "config: '$bad' is refused"
	fi
done
if echo 'n_ctx=1' > "$M/kv" 2>"$WORK/err"; then
	fail "kv: an unknown key fails"
else
	check "kv: an unknown key is EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "kv: errors names the unknown key" grep -q "kv: unknown key 'n_ctx'" "$M/errors"
check "errors: at most 100 lines" [ "$(wc -l < "$M/errors")" -le 100 ]

cat "$M/kv" > "$WORK/kv"
check "kv: type f16" grep -qx 'type f16' "$WORK/kv"
check "kv: bytes per token = layers*kv_heads*head_dim*2*2 = 640" \
	grep -qx 'bytes_per_token 640' "$WORK/kv"
check "kv: n_ctx" grep -qE '^n_ctx [0-9]+$' "$WORK/kv"
check "kv: capacity" grep -qE '^bytes_per_sequence [0-9]+$' "$WORK/kv"
check "placement: readable" test -n "$(cat "$M/placement")"
if echo 'blk.0 nowhere42' > "$M/placement" 2>"$WORK/err"; then
	fail "placement: a bad command fails"
else
	check "placement: a bad command is EINVAL" grep -q 'Invalid argument' "$WORK/err"
	check "placement: errors has the line" grep -q 'placement: blk.0 nowhere42' "$M/errors"
fi

# weights/: the loaded bytes are the file's bytes at the index's offsets.
cat "$M/weights/index" > "$WORK/index"
check "weights/index: one line per tensor" \
	[ "$(wc -l < "$WORK/index")" = "$(grep '^tensors ' "$WORK/info" | cut -d' ' -f2)" ]
check "weights/: index plus one file per tensor" \
	[ "$(ls "$M/weights" | wc -l)" = "$(( $(wc -l < "$WORK/index") + 1 ))" ]
check "weights/index: name type shape bytes offset device" \
	awk 'NF != 6 || $4 !~ /^[0-9]+$/ || $5 !~ /^[0-9]+$/ { bad = 1 } END { exit bad }' "$WORK/index"
while read -r name type shape bytes off dev; do
	tail -c +$((off + 1)) "$STORIES" | head -c "$bytes" > "$WORK/expect"
	cat "$M/weights/$name" > "$WORK/got"
	same "$WORK/expect" "$WORK/got" "weights/$name: $bytes bytes equal the file at $off"
	check "weights/$name: stat size is $bytes" [ "$(stat -c %s "$M/weights/$name")" = "$bytes" ]
done < <(grep -E '^(token_embd|blk.4.ffn_down|output_norm)' "$WORK/index")
read -r name _ _ bytes off _ < <(grep '^token_embd' "$WORK/index")
dd if="$M/weights/$name" bs=4096 skip=1000 count=333 iflag=skip_bytes,count_bytes \
	status=none > "$WORK/got"
tail -c +$((off + 1000 + 1)) "$STORIES" | head -c 333 > "$WORK/expect"
same "$WORK/expect" "$WORK/got" "weights: pread at offset 1000 works"

# The failed model: a directory with its errors.
check "failed model: still a directory with its files" [ -e "$MNT/broken/generate" ]
check "failed model: errors says why" grep -q 'load: .*broken.gguf' "$MNT/broken/errors"
check "failed model: info says failed" grep -qx 'state failed' "$MNT/broken/info"
if echo hi > "$MNT/broken/generate" 2>"$WORK/err"; then
	fail "failed model: generate refuses prompts"
else
	check "failed model: generate is EIO" grep -q 'Input/output error' "$WORK/err"
fi

# sessions/: the clone file.
n=$(cat "$M/sessions/new")
check "sessions/new returns a number" [ "$n" -ge 1 ]
check "sessions/N is a directory" [ -d "$M/sessions/$n" ]
check "sessions/N lists its files" \
	[ "$(ls "$M/sessions/$n" | tr '\n' ' ')" = "chat config generate history kv logprobs reasoning " ]
echo 'top_k=3' > "$M/sessions/$n/config"
check "sessions/N/config: override read back" grep -qx 'top_k=3' "$M/sessions/$n/config"
check "sessions/N/config: other keys inherited" grep -qx 'temperature=0.5' "$M/sessions/$n/config"
check "sessions/N/config: model config unchanged" grep -qx 'top_k=7' "$M/config"
m=$(cat "$M/sessions/new")
check "a second session has another number" [ "$m" != "$n" ]
check "rmdir sessions/N" rmdir "$M/sessions/$n"
check "sessions/N is gone" [ ! -e "$M/sessions/$n" ]
check "mkdir is refused" bash -c "! mkdir '$M/sessions/99' 2>/dev/null"
check "rm of a file is refused" bash -c "! rm -f '$M/info' 2>/dev/null"
check "ENOENT for unknown names" bash -c "! cat '$M/nothing' 2>/dev/null"

unmount_llmfs
finish
