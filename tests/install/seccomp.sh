#!/usr/bin/env bash
# The daemon as a container engine's default seccomp profile runs it:
# io_uring_setup/enter/register failing with EPERM (Docker's profile) or
# ENOSYS (Podman's default errno). The loader must fall back to pread, say
# so in the model's errors file, and the mount must generate what llmfs-run
# generates (Documentation/containers.md, section 3).
. "$(dirname "$0")/../fs/mount-lib.bash"
SECCOMP=$BUILD/tests/install/seccomp_exec
[ -x "$SECCOMP" ] || skip "$SECCOMP is not built"

P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 32 > "$WORK/expect" 2>/dev/null
REAL_LLMFS=$(realpath "$LLMFS")

# Without a filter: the ring is used where this kernel allows it (so the
# checks below see the filter's doing, not the machine's).
mount_llmfs --name stories="$STORIES"
wait_loaded || fail "model loaded"
if grep -q 'io_uring unavailable' "$MNT/stories/errors"; then
	skip "io_uring is unavailable here already: $(grep 'io_uring' "$MNT/stories/errors")"
fi
ok "without a filter no io_uring notice"
unmount_llmfs

for e in 1:"Operation not permitted" 38:"Function not implemented"; do
	errno=${e%%:*} msg=${e#*:}
	printf '#!/bin/sh\nexec "%s" %s "%s" "$@"\n' "$(realpath "$SECCOMP")" \
		"$errno" "$REAL_LLMFS" > "$WORK/llmfs-seccomp"
	chmod +x "$WORK/llmfs-seccomp"
	LLMFS=$WORK/llmfs-seccomp
	mount_llmfs --name stories="$STORIES"
	wait_loaded || fail "errno $errno: model loaded"
	check "errno $errno: the model is ready" grep -q '^stories .* ready ' "$MNT/models"
	line=$(grep 'io_uring unavailable' "$MNT/stories/errors")
	echo "# errors: $line"
	check "errno $errno: one errors line says the loader reads with pread" \
		grep -q "load: io_uring unavailable (io_uring_setup: $msg): reading with pread\$" \
		"$MNT/stories/errors"
	printf 'temperature=0\nmax_tokens=32\n' > "$MNT/stories/config"
	printf '%s' "$P" > "$MNT/stories/generate"
	cat "$MNT/stories/generate" > "$WORK/got"
	same "$WORK/expect" "$WORK/got" "errno $errno: generates what llmfs-run does"
	unmount_llmfs
done
finish
