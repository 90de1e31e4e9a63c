#!/usr/bin/env bash
# make demo: mount a model, submit a prompt with `cat prompt > generate`,
# stream the answer with `cat generate`, unmount.
#
# MODEL=file.gguf if given; else ../shared/models/stories260K.gguf when
# present; else a model written by llmfs-write-model, whose weights are
# random (it says so).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin=$BUILD/bin
model=${MODEL:-}
prompt=${PROMPT:-"Once upon a time, there was a little girl named Lily."}
work=$(mktemp -d /tmp/llmfs-demo.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"

cleanup() {
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || true
	[ -n "${pid:-}" ] && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

if [ -z "$model" ]; then
	if [ -f ../shared/models/stories260K.gguf ]; then
		model=../shared/models/stories260K.gguf
	else
		model=$work/random-llama.gguf
		echo "demo: no MODEL given and ../shared is absent: writing a model" \
			"with RANDOM weights; its output is gibberish by design."
		"$bin/llmfs-write-model" -o "$model" --arch llama --embd 64 \
			--layers 2 --heads 4 --kv-heads 2 --head-dim 16 --ff 128 \
			--type f32 --seed 1
	fi
fi
[ -f "$model" ] || { echo "demo: $model: no such file" >&2; exit 1; }

echo "\$ llmfs $model $mnt"
"$bin/llmfs" -f --name demo="$model" "$mnt" &
pid=$!
for _ in $(seq 100); do [ -e "$mnt/demo/generate" ] && break; sleep 0.1; done
[ -e "$mnt/demo/generate" ] || { echo "demo: the mount did not come up" >&2; exit 1; }

echo "\$ ls $mnt/demo"
ls "$mnt/demo"
echo "\$ echo temperature=0 > $mnt/demo/config"
echo temperature=0 > "$mnt/demo/config"
echo "\$ echo 'max_tokens=96' > $mnt/demo/config"
echo max_tokens=96 > "$mnt/demo/config"
echo "\$ echo '$prompt' > $mnt/demo/generate"
printf '%s' "$prompt" > "$mnt/demo/generate"
echo "\$ cat $mnt/demo/generate"
cat "$mnt/demo/generate"
echo
echo "\$ cat $mnt/demo/stats"
cat "$mnt/demo/stats"
echo "\$ fusermount3 -u $mnt"
