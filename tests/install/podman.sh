#!/usr/bin/env bash
# The Containerfile, built and run by a real engine (Documentation/
# containers.md): podman builds it on a Debian 12 image imported from a
# debootstrap tree (no registry can be reached from here); the image's
# daemon mounts the shared models inside a container run with
# --device /dev/fuse --cap-add SYS_ADMIN, into a directory bound rshared;
# a second container, of another uid, reads that mount through its own
# bind mount and generates what llmfs-run does; podman's seccomp profile
# refuses io_uring (ENOSYS) and the model says so in errors; podman stop is
# SIGTERM, the daemon exits 0 and the mount goes.
#
# Two things of this machine, each with its workaround (both in
# containers.md): its root lacks CAP_SYS_RESOURCE, so the engine's default
# RLIMIT_NOFILE/NPROC (raised past the hard limits) fail: --ulimit keeps
# them within; crun refuses its hybrid cgroups (v1, plus a cgroup2 that
# holds hugetlb): runc runs the containers.
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"
. "$(dirname "$0")/debian-lib.bash"
command -v podman >/dev/null || skip "podman is absent (make deps)"
command -v runc >/dev/null || skip "runc is absent (make deps)"

PODMAN="podman --runtime runc"
NPROC=$(ulimit -Hu)
[ "$NPROC" = unlimited ] || [ "$NPROC" -gt 4096 ] && NPROC=4096
LIMITS="--ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=$NPROC:$NPROC"
NAME=llmfs-test-$$
IMAGE=localhost/llmfs-test:$$
PM=$WORK/pm

podman_cleanup() {
	$PODMAN rm -f -t 5 "$NAME" >/dev/null 2>&1
	$PODMAN rmi -f "$IMAGE" >/dev/null 2>&1
	mountpoint -q "$PM" && umount -l "$PM"
	cleanup
}
trap podman_cleanup EXIT

debian_tree_tar || { fail "debootstrap made the Debian tree"; finish; }
BASE=localhost/llmfs-test-base:$(basename "$DEBIAN_TAR" .tar)
if ! $PODMAN image exists "$BASE"; then
	$PODMAN import "$DEBIAN_TAR" "$BASE" >/dev/null 2>&1
fi
check "the Debian 12 base image is there ($BASE)" $PODMAN image exists "$BASE"

# podman build of the Containerfile as it is, the base given
$PODMAN image prune -f --filter until=24h >/dev/null 2>&1
start=$SECONDS
$PODMAN build $LIMITS --build-arg BASE="$BASE" -t "$IMAGE" -f Containerfile . \
	>"$WORK/build.log" 2>&1
rc=$?
echo "# podman build: exit $rc after $((SECONDS - start)) s"
check "podman build -f Containerfile succeeds" [ "$rc" = 0 ]
[ "$rc" = 0 ] || { tail -n 30 "$WORK/build.log"; finish; }
check "the image's llmfs is this version" \
	[ "$($PODMAN run --rm $LIMITS "$IMAGE" llmfs --version)" = "llmfs $VERSION" ]

# The daemon in a container, its mount point bound rshared to $PM (a shared
# mount here): the mount it makes shows on this side and in any container
# that binds $PM too.
mkdir -p "$PM"
mount --bind "$PM" "$PM" && mount --make-shared "$PM"
$PODMAN run -d --name "$NAME" $LIMITS --device /dev/fuse --cap-add SYS_ADMIN \
	-v "$SHARED/models:/models:ro" -v "$PM:/mnt/llm:rshared" "$IMAGE" \
	>/dev/null
container_ready() { grep -q '^stories260k .* ready ' "$PM/models" 2>/dev/null; }
wait_for 120 container_ready
check "the container's mount is up and its models ready" \
	grep -q '^stories260k llama 293K F32 ready file:/models/stories260K.gguf$' "$PM/models"
check "podman's seccomp profile refuses io_uring: the loader says so, reads with pread" \
	grep -q 'load: io_uring unavailable (io_uring_setup: Function not implemented): reading with pread' \
	"$PM/stories260k/errors"

# A second container, as uid 65534, reads it through its bind mount (the
# mount has allow_other: the image's command line).
N=48
P='Once upon a time'
printf 'temperature=0\nmax_tokens=%d\n' $N > "$PM/stories260k/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null
$PODMAN run --rm $LIMITS --user 65534:65534 -v "$PM:/mnt/llm:rslave" "$BASE" \
	sh -c "cat /mnt/llm/models >/dev/null &&
		printf '%s' '$P' > /mnt/llm/stories260k/generate &&
		cat /mnt/llm/stories260k/generate" > "$WORK/got" 2>"$WORK/second.log"
same "$WORK/expect" "$WORK/got" "a second container (uid 65534) generates through the bind mount = llmfs-run"

# podman stop: SIGTERM to the daemon (PID 1 of the container), exit 0.
$PODMAN stop -t 20 "$NAME" >/dev/null
check "podman stop: the daemon exits 0" \
	[ "$($PODMAN inspect "$NAME" --format '{{.State.ExitCode}}')" = 0 ]
check "and its mount is gone" [ ! -e "$PM/models" ]
$PODMAN logs "$NAME" > "$WORK/daemon.log" 2>&1

finish
