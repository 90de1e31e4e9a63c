#!/usr/bin/env bash
# Devices under the mount: --devices (and LLMFS_DEVICES) describe simulated
# GPUs; status lists them, placement shows the memory of every device, the
# plan and its estimates; weights are never moved onto a GPU that has no
# backend (ENODEV, one errors line), and a bad description stops the mount.
. "$(dirname "$0")/mount-lib.bash"

# (Under timeout: a daemon that took it would stay in the foreground.)
if timeout 60 "$LLMFS" -f --devices 'gpu0:vram=8G' "$STORIES" "$MNT" 2>"$WORK/bad"; then
	fail "--devices gpu0:vram= (a cap) with no GPU is refused"
elif mountpoint -q "$MNT"; then
	fail "--devices gpu0:vram= (a cap) with no GPU is refused (it mounted)"
	fusermount3 -u -z "$MNT"
else
	check "a cap with no GPU says why" \
		grep -q '^llmfs: --devices: gpu0:vram= without bw= and pcie= caps a real GPU: ' "$WORK/bad"
fi

mount_llmfs --devices 'gpu0:vram=8G,bw=272G,pcie=25G,cc=8.9,model=RTX-4060,product.q6_K=150G,cpu:bw=60G' \
	--name stories="$STORIES"
wait_loaded || fail "model loaded in 10 s"
M=$MNT/stories

check "status: the simulated GPU" grep -qx \
	'device gpu0 name=RTX-4060 cc=8.9 memory_total_bytes=8589934592 memory_free_bytes=8589934592 simulated no-backend' \
	"$MNT/status"
cat "$M/placement" > "$WORK/placement"
check "placement: gpu0's memory, a type's product rate" grep -qx \
	'memory gpu0 total 8589934592 free 8589934592 node - bw 272.0GB/s given product.q6_K 150.0GB/s given pcie 25.0GB/s simulated' \
	"$WORK/placement"
check "placement: the host's given bandwidth" \
	grep -qE '^memory cpu total [0-9]+ free [0-9]+ node - bw 60.0GB/s given$' "$WORK/placement"
check "placement: the plan" grep -qE '^plan all-gpu gpu gpu0 host - ctx [0-9]+$' "$WORK/placement"
for alt in all-gpu split all-cpu; do
	check "placement: estimate $alt" \
		grep -qE "^estimate $alt [0-9.]+ .+" "$WORK/placement"
done
before=$(grep -c ' cpu$' "$WORK/placement")
for cmd in 'blk.0 gpu0' 'output gpu0' 'auto'; do
	if echo "$cmd" > "$M/placement" 2>"$WORK/err"; then
		fail "placement: '$cmd' is refused"
	else
		check "placement: '$cmd' is ENODEV" grep -q 'No such device' "$WORK/err"
	fi
done
check "errors: why" grep -q 'placement: blk.0 gpu0: gpu0 is a simulated GPU (--devices): this build has no CUDA backend to compute on it' "$M/errors"
check "errors: auto says what the plan wanted" \
	grep -q 'placement: auto: the plan (all-gpu) puts weights on gpu0' "$M/errors"
check "nothing moved" [ "$(grep -c ' cpu$' "$M/placement")" = "$before" ]
check "host devices still take commands" sh -c "echo 'blk.0 numa0' > '$M/placement'"
check "... and the tensors are there" grep -qE '^layer blk.0 [0-9]+ tensors [0-9]+ bytes numa0$' "$M/placement"
unmount_llmfs

# The environment describes them as well; without either there is no gpu.
LLMFS_DEVICES='gpu1:vram=24G,bw=1008G,pcie=25G,node=0' mount_llmfs --name stories="$STORIES"
wait_loaded || fail "model loaded in 10 s"
check "LLMFS_DEVICES: status lists gpu1" \
	grep -qE '^device gpu1 name=- cc=- memory_total_bytes=25769803776 ' "$MNT/status"
unmount_llmfs
mount_llmfs --name stories="$STORIES"
check "no description: no gpu in status" sh -c "! grep -q '^device gpu' '$MNT/status'"
unmount_llmfs
finish
