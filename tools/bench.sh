#!/usr/bin/env bash
# make bench: every speed figure, each against its reference measured in
# the same run (never a timed unit test). Each part is a script of its own:
#   tools/bench-load.sh  cold-cache load vs the disk's O_DIRECT bandwidth,
#                        cold time-to-first-token vs llama.cpp
#   tools/bench-fs.sh    decode tokens/s through the mount vs llmfs-run
#   tools/bench-kv.sh    KV bytes per token and context ceilings per type
#                        pair; TTFT of a second turn and of a shared prefix
#   tools/bench-remote.sh decode tokens/s of a remote model vs a direct
#                        streaming client of the same llama-server
#   tools/bench-sessions.sh listing 3,000 sessions (linear) and a
#                        generation during it
#   tools/bench-cpu.sh   prefill and decode vs llama-bench on two models of
#                        Qwen3-0.6B shape, decode vs memory bandwidth, and
#                        1/4/16 sessions through the mount
#   tools/bench-grammar.sh constrained decoding's cost (format=json, a
#                        JSON schema) vs free decoding and vs llama.cpp's
#                        grammar sampling, on the Qwen3-0.6B shape
set -uo pipefail
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
export LLAMA_REF_DIR=${LLAMA_REF_DIR:-$PWD/ref}
status=0
for part in tools/bench-load.sh tools/bench-fs.sh tools/bench-kv.sh \
		tools/bench-remote.sh tools/bench-sessions.sh tools/bench-cpu.sh \
		tools/bench-grammar.sh; do
	[ -x "$part" ] || continue
	echo "== $part"
	"$part" || status=1
	echo
done
exit $status
