#!/usr/bin/env bash
# The aarch64 build, run under qemu-user: the engine's tests cross-built
# with Debian's gcc-aarch64-linux-gnu into build/aarch64 (make aarch64),
# then run by qemu-aarch64 on this machine (Documentation/engine.md,
# "aarch64: built here, tested under qemu-user"). What proves the NEON
# code right, as make check runs it:
#
#   test_golden     the shared models against llama.cpp's logits, at the
#                   best level qemu's CPU has (neon-dotprod), the models
#                   split over the two queues (GOLDEN_DIR)
#   test_isa        every level (neon-dotprod, neon, scalar) gives the same
#                   logits, bit for bit, on every shared model (prompt
#                   rows through the GEMM, then decoding)
#   test_simd, test_gemm_packed, test_elem
#                   each NEON kernel of both levels against its scalar twin
#                   (the steps the two levels share, once)
#   test_tokenizer  the tokenizer vectors
#
# and with AARCH64_FULL=1 (make check-aarch64: about twice as long) also
# test_attention (every attention step, type pair, KV chunk merge and
# the vector expf against libm) and test_gemm (every GEMM tile against a
# scalar model of its order), which test_golden and test_isa cover only
# through the shared models.
#
# Then, on a CPU without the dot product instructions (qemu's cortex-a72,
# a Raspberry Pi 4's core): the neon level is chosen, and LLMFS_CPU=
# neon-dotprod is refused with one line, as LLMFS_CPU=avx2 is (no level
# of this build). Speed means nothing under qemu: this is a test of the
# bits only. The tests run in two queues, one qemu each: about 3 minutes
# of CPU each, 6 with AARCH64_FULL=1.
#
# Skipped (77) where the cross compiler or qemu is missing (make deps
# installs them; tests/run counts that skip as a failure) or the shared
# models are; make aarch64 fails naming the arm64 libraries it lacks.
set -u
cd "$(dirname "$0")/../.." || exit 1
SHARED=${SHARED:-../shared}
export SHARED=$(cd "$SHARED" 2>/dev/null && pwd)
cross=build/aarch64

command -v aarch64-linux-gnu-gcc >/dev/null ||
	{ echo "no aarch64-linux-gnu-gcc (make deps): skipped"; exit 77; }
command -v qemu-aarch64 >/dev/null ||
	{ echo "no qemu-aarch64 (make deps): skipped"; exit 77; }
[ -f "$SHARED/models/stories260K.gguf" ] ||
	{ echo "no $SHARED models: skipped"; exit 77; }

start=$SECONDS
out=$(make -s --no-print-directory -j2 aarch64 2>&1) ||
	{ echo "FAIL: make aarch64"; echo "$out" | tail -n 30; exit 1; }
echo "ok: make aarch64 ($((SECONDS - start)) s)"

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
log=$(mktemp -d) || exit 1
trap 'rm -rf "$log"' EXIT
# qemu runs the tests ten to thirty times slower than the machine:
# Check's per-test timeouts (wall clock) scaled to match
export CK_TIMEOUT_MULTIPLIER=20

# run NAME [ENV=...] PROGRAM ARGS: the program under qemu, its log kept
run() {
	local name=$1 t0=$SECONDS rc
	shift
	env "$@" >"$log/$name" 2>&1
	rc=$?
	echo "$rc $((SECONDS - t0))" >"$log/$name.rc"
	return $rc
}
# judge NAME: ok with the log's Check line, or FAIL with its tail
judge() {
	local rc secs
	read -r rc secs <"$log/$1.rc"
	if [ "$rc" -eq 0 ]; then
		echo "ok: $1 ($secs s) $(grep -E '^[0-9]+%: Checks' "$log/$1")"
	else
		fail "$1 exited $rc"
		tail -n 20 "$log/$1" | sed 's/^/    /'
	fi
}
# queue TEST...: the tests one after the other, each under qemu;
# test_golden.N is test_golden over the golden files in $log/golden.N
queue() {
	local t
	for t in "$@"; do
		case $t in
		test_golden.*)
			run "$t" GOLDEN_DIR="$log/golden.${t#*.}" qemu-aarch64 \
				"$cross/tests/engine/test_golden" ;;
		*) run "$t" qemu-aarch64 "$cross/tests/engine/$t" ;;
		esac
	done
}

# the golden models, every other one in each queue
mkdir "$log/golden.1" "$log/golden.2" || exit 1
i=0
for f in "$SHARED"/golden/*.jsonl; do
	ln -s "$f" "$log/golden.$((i % 2 + 1))/" || exit 1
	i=$((i + 1))
done

# two queues of about equal CPU time, one core each
a=(test_golden.1 test_tokenizer test_gemm_packed test_elem)
b=(test_golden.2 test_isa test_simd)
if [ "${AARCH64_FULL:-0}" = 1 ]; then
	a+=(test_attention)
	b+=(test_gemm)
fi
queue "${a[@]}" &
qa=$!
queue "${b[@]}"
wait $qa
for t in "${a[@]}" "${b[@]}"; do
	judge "$t"
done
grep -h "= scalar" "$log/test_isa" | sed 's/^/    /'
grep -h "max rel err" "$log"/test_golden.* | sed 's/^/    /'

# A CPU without SDOT: the neon level runs, neon-dotprod is refused.
run simd_a72 QEMU_CPU=cortex-a72 qemu-aarch64 $cross/tests/engine/test_simd
read -r rc _ <"$log/simd_a72.rc"
if [ "$rc" -eq 77 ] &&
	grep -q "neon-dotprod: not on this CPU" "$log/simd_a72" &&
	grep -q "^neon stories260K.gguf: [0-9]* tensors compared" \
		"$log/simd_a72"; then
	echo "ok: cortex-a72: the neon kernels compared, neon-dotprod left out"
else
	fail "test_simd on cortex-a72 (exit $rc)"
	tail -n 20 "$log/simd_a72" | sed 's/^/    /'
fi
all=$(QEMU_CPU=cortex-a72 LLMFS_CPU=neon-dotprod qemu-aarch64 \
	$cross/bin/llmfs-run -m "$SHARED/models/stories260K.gguf" -p x -n 1 \
	2>&1 >/dev/null)
rc=$?
why=$(echo "$all" | grep LLMFS_CPU)
if [ $rc -eq 1 ] && [ "$(echo "$why" | wc -l)" -eq 1 ] &&
	echo "$why" | grep -q "this CPU lacks .*dotprod"; then
	echo "ok: cortex-a72: $why"
else
	fail "LLMFS_CPU=neon-dotprod on cortex-a72 gave exit $rc: $all"
fi
# a level of another architecture is no level of this build
all=$(LLMFS_CPU=avx2 qemu-aarch64 $cross/bin/llmfs-run \
	-m "$SHARED/models/stories260K.gguf" -p x -n 1 2>&1 >/dev/null)
rc=$?
why=$(echo "$all" | grep LLMFS_CPU)
if [ $rc -eq 1 ] && [ "$(echo "$why" | wc -l)" -eq 1 ] &&
	echo "$why" | grep -q \
		"LLMFS_CPU=avx2: no such CPU level (neon-dotprod, neon, scalar)"; then
	echo "ok: $why"
else
	fail "LLMFS_CPU=avx2 on aarch64 gave exit $rc: $all"
fi

echo "aarch64 under qemu: $((SECONDS - start)) s in all"
[ $fails -eq 0 ]
