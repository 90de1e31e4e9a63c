#!/usr/bin/env bash
# llmfs-gpus on the machine's GPUs: skipped (77, with the reason) where the
# CUDA module is not built (no nvcc); on a GPU machine every GPU has a
# line, measured bandwidths, and a --devices text that llmfs accepts.
# Without a usable CUDA device the same on the module's simulator (one
# simulated GPU), whose rates are its own: kB/s to GB/s, some under the
# least rate --devices takes (1 MB/s), which the text must leave out.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
GPUS=$BUILD/bin/llmfs-gpus
RUN=$BUILD/bin/llmfs-run
SIM=$BUILD/lib/llmfs-cuda-sim.so
SHARED=${SHARED:-$(cd .. && pwd)/shared}

[ -x "$GPUS" ] || { echo "skip: $GPUS is not built (no nvcc, or CUDA=0)"; exit 77; }
out=$("$GPUS" 2>&1)
rc=$?
if [ $rc != 0 ] && [ -f "$SIM" ]; then
	case $out in
	"llmfs-gpus: no CUDA device"*)
		echo "# $out: the simulator instead"
		export LLMFS_CUDA_MODULE=$SIM
		out=$("$GPUS" 2>&1)
		rc=$?
		;;
	esac
fi
if [ $rc != 0 ]; then
	case $out in
	"llmfs-gpus: no CUDA device"* | "llmfs-gpus: no CUDA module"*)
		echo "skip: $out"; exit 77 ;;
	*) echo "not ok - llmfs-gpus failed ($rc): $out"; exit 1 ;;
	esac
fi
fails=0
check() {
	if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi
}
echo "$out"
# a card's rates are GB/s; the simulator's may print as 0.0GB/s
rate='[1-9][0-9.]*GB/s'
grep -q '^gpu0 llmfs-CUDA-simulator ' <<<"$out" && rate='[0-9.]+GB/s'
check "one line per GPU with measured bandwidths, each type's product rate" \
	"echo \"\$out\" | grep -qE '^gpu0 [^ ]+ cc [0-9]+\\.[0-9]+ total [0-9]+ free [0-9]+ node -?[0-9]+ vram_read $rate pcie_h2d $rate product $rate product.f16 $rate product.q8_0 $rate product.q4_K $rate product.q6_K $rate product.bf16 $rate\$'"
spec=$(echo "$out" | sed -n 's/^devices //p')
check "a devices line" "[ -n \"\$spec\" ]"
# llmfs-run loads with LLMFS_DEVICES: a description it refuses fails the load.
check "llmfs accepts the description" \
	"LLMFS_DEVICES=\"\$spec\" $RUN -m $SHARED/models/stories260K.gguf -p Once -n 1 >/dev/null 2>&1"
[ $fails = 0 ]
