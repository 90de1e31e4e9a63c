#!/usr/bin/env bash
# Access from elsewhere: another uid with -o allow_other (and without it),
# another mount namespace (unshare -m), a read-only mount (-o ro), and the
# idle timeout of sessions/N.
. "$(dirname "$0")/mount-lib.bash"
command -v setpriv >/dev/null || skip "setpriv is absent"
command -v unshare >/dev/null || skip "unshare is absent"

chmod 755 "$WORK"    # nobody must reach the mount point
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
OTHER="setpriv --reuid=65533 --regid=65533 --clear-groups"
P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 32 > "$WORK/expect" 2>/dev/null

mount_llmfs -o allow_other --name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=32\n' > "$S/config"

check "nobody reads models" $NOBODY grep -q '^stories ' "$MNT/models"
$NOBODY bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/nobody"
same "$WORK/expect" "$WORK/nobody" "nobody generates with the shell idiom"
if $NOBODY bash -c "echo top_k=1 > '$S/config'" 2>"$WORK/err"; then
	fail "nobody cannot change the model's config"
else
	check "nobody: config is EACCES" grep -q 'Permission denied' "$WORK/err"
fi
n=$($NOBODY cat "$S/sessions/new")
check "nobody makes a session" [ -d "$S/sessions/$n" ]
check "the session belongs to nobody" [ "$(stat -c %u "$S/sessions/$n")" = 65534 ]
$NOBODY bash -c "echo max_tokens=32 > '$S/sessions/$n/config'; printf '%s' '$P' > '$S/sessions/$n/generate'; cat '$S/sessions/$n/generate'" > "$WORK/nobody-session"
same "$WORK/expect" "$WORK/nobody-session" "nobody generates in its session"
check "another user cannot remove it (sticky sessions/)" \
	bash -c "! $OTHER rmdir '$S/sessions/$n' 2>/dev/null"
check "another user cannot write its config" \
	bash -c "! $OTHER bash -c 'echo top_k=1 > $S/sessions/$n/config' 2>/dev/null"
check "nobody removes its own session" $NOBODY rmdir "$S/sessions/$n"

# Another mount namespace sees the mount made before it, and generates.
unshare -m bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/ns"
same "$WORK/expect" "$WORK/ns" "generate from another mount namespace (unshare -m)"
unshare -m --propagation private bash -c "n=\$(cat '$S/sessions/new'); printf '%s' '$P' > '$S/sessions/'\$n'/generate'; cat '$S/sessions/'\$n'/generate'" > "$WORK/ns2"
same "$WORK/expect" "$WORK/ns2" "sessions/N from another mount namespace"
unmount_llmfs

# Without allow_other, the kernel keeps other users out.
mount_llmfs --name stories="$STORIES"
check "without allow_other nobody is refused" \
	bash -c "! $NOBODY cat '$MNT/models' 2>/dev/null"
unmount_llmfs

# -o ro: inspection only.
mount_llmfs -o ro --name stories="$STORIES"
wait_loaded
check "ro: models readable" grep -q '^stories llama' "$MNT/models"
check "ro: info readable" grep -q '^layers 5' "$MNT/stories/info"
check "ro: no write bits" [ "$(stat -c %A "$MNT/stories/generate")" = "-r--r--r--" ]
if { printf 'x' > "$MNT/stories/generate"; } 2>"$WORK/err"; then
	fail "ro: generate refuses prompts"
else
	check "ro: generate is EROFS" grep -q 'Read-only file system' "$WORK/err"
fi
check "ro: config refuses writes" bash -c "! echo top_k=1 > '$MNT/stories/config' 2>/dev/null"
check "ro: sessions/new refuses" bash -c "! cat '$MNT/stories/sessions/new' 2>/dev/null"
check "ro: status says ro" grep -q '^device cpu .* ro$' "$MNT/status"
unmount_llmfs

# Idle sessions go after --idle-timeout; an open file keeps one alive; an
# answer nobody read is cancelled then, a session's and the shell idiom's
# (still running: the tiny stream buffer holds them paused).
mount_llmfs --idle-timeout 1 --stream-buffer 64 --name stories="$STORIES"
wait_loaded
S=$MNT/stories
printf 'temperature=0\nmax_tokens=0\n' > "$S/config"
m=$(cat "$S/sessions/new")
exec 5<"$S/sessions/$m/history"
u=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$u/generate"
setsid bash -c "printf '%s' '$P' > '$S/generate'"
check "an unread session answer and a shell idiom's are running" \
	wait_for 60 grep -qx 'active 2' "$S/stats"
n=$(cat "$S/sessions/new")
cancelled() { awk '$1 == "cancelled" { print $2 }' "$S/stats"; }
c0=$(cancelled)
check "a new session exists" [ -d "$S/sessions/$n" ]
# n was made last: once it is gone, the others' timeouts have passed too.
# Polled by listing sessions/ (a lookup of N itself could count as use).
listed() { ls "$S/sessions" | grep -qx "$1"; }
check "an idle session is removed after the timeout" \
	wait_for 60 eval "! listed $n"
check "a session with an open file stays" [ -d "$S/sessions/$m" ]
check "the session with an unread answer is removed too" eval "! listed $u"
check "... and both generations are cancelled (active 0)" \
	wait_for 60 grep -qx 'active 0' "$S/stats"
two_more_cancelled() { [ "$(cancelled)" -ge $((c0 + 2)) ]; }
check "... and counted cancelled" wait_for 60 two_more_cancelled
exec 5<&-
unmount_llmfs
finish
