#!/usr/bin/env bash
# Unmounting: fusermount3 -u with generations in flight, SIGTERM, SIGINT
# and SIGHUP with readers blocked in read(2) (they get the text so far and
# then EIO, the daemon exits 0 and the mount is gone), and a
# mount/generate/cancel/unmount cycle under valgrind --leak-check=full (or,
# in a SANITIZE=1 build, under ASan's leak checker) that must report no
# error and no leak.
. "$(dirname "$0")/mount-lib.bash"

P='Once upon a time'

# wait_gone: the daemon exits within 60 s and the mount point is free.
wait_gone() {
	local rc
	if ! wait_for 60 gone "$PID"; then
		fail "$1: the daemon is still there after 60 s"
		return
	fi
	wait "$PID"
	rc=$?
	PID=
	check "$1: daemon exits 0 (got $rc)" [ "$rc" = 0 ]
	check "$1: the mount is gone" bash -c "! mountpoint -q '$MNT'"
}

# 1. fusermount3 -u while generations run with nobody reading them. With
# --stream-buffer 64 and no max_tokens they pause and would never end: a
# daemon that waited for them would not exit (wait_gone's 60 s).
mount_llmfs --stream-buffer 64 --name mixq="$MIXQ" --name stories="$STORIES"
wait_loaded
printf 'temperature=0\nmax_tokens=3000\n' > "$WORK/long"
printf 'temperature=0\nmax_tokens=0\n' > "$MNT/mixq/config"
for i in 1 2 3; do
	setsid bash -c "printf '%s' '$P $i' > '$MNT/mixq/generate'"
done
n=$(cat "$MNT/mixq/sessions/new")
printf '%s' "$P" > "$MNT/mixq/sessions/$n/generate"
check "generations are in flight (active 4)" \
	wait_for 60 grep -qx 'active 4' "$MNT/mixq/stats"
check "fusermount3 -u succeeds with generations in flight" fusermount3 -u "$MNT"
wait_gone "fusermount3 -u"

# 2 and 3. A signal with a reader blocked in read(2).
for sig in TERM INT HUP; do
	mount_llmfs --name mixq="$MIXQ"
	wait_loaded
	cat "$WORK/long" > "$MNT/mixq/config"
	printf '%s' "$P" > "$MNT/mixq/generate"
	cat "$MNT/mixq/generate" > "$WORK/reader.$sig" 2>"$WORK/reader-err.$sig" &
	r=$!
	check "SIG$sig: the reader has text" wait_for 60 test -s "$WORK/reader.$sig"
	kill -$sig "$PID"
	if wait_for 60 gone $r; then
		wait $r
		rc=$?
	else
		kill -9 $r
		rc="still blocked after 60 s"
	fi
	# An answer cut short is EIO, never an EOF that passes for its end.
	check "SIG$sig: the reader ends with EIO (rc $rc: $(cat "$WORK/reader-err.$sig"))" \
		bash -c "[ $rc != 0 ] && grep -q 'Input/output error' '$WORK/reader-err.$sig'"
	check "SIG$sig: the reader got text first" [ -s "$WORK/reader.$sig" ]
	wait_gone "SIG$sig"
done

# 4. No leak, no invalid access: the whole cycle under a leak checker.
# valgrind when it can run the engine (llmfs-run on the same model; valgrind
# does not decode every instruction the compiler may emit); else the SANITIZE=1 build of llmfs (ASan + LSan),
# made here if it is not there yet (make is incremental).
LEAK_LLMFS=$LLMFS
if nm "$LLMFS" 2>/dev/null | grep -q __asan_init; then
	how="ASan"
	checker=()
elif command -v valgrind >/dev/null &&
		bash -c 'valgrind -q --error-exitcode=1 "$@" >/dev/null 2>&1
			exit $?' _ "$RUN" -m "$STORIES" -p "$P" -n 2 2>/dev/null; then
	how="valgrind"
	checker=(valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect
		--show-leak-kinds=definite,indirect --error-exitcode=1
		--log-file="$WORK/valgrind.log")
else
	how="ASan"
	checker=()
	LEAK_LLMFS=build/san/bin/llmfs
	make -s SANITIZE=1 "$LEAK_LLMFS" >"$WORK/make.log" 2>&1 ||
		{ cat "$WORK/make.log"; fail "make SANITIZE=1 $LEAK_LLMFS"; finish; }
fi
export ASAN_OPTIONS=detect_leaks=1:exitcode=1:log_path=$WORK/asan
echo "# leak check with $how"
"${checker[@]}" "$LEAK_LLMFS" -f --stream-buffer 64 --name stories="$STORIES" \
	--name broken=/etc/hostname \
	"$MNT" >>"$WORK/daemon.log" 2>&1 &
PID=$!
check "$how: the mount came up" wait_for 300 test -e "$MNT/models"
wait_loaded
S=$MNT/stories
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/leak-gen"
check "$how: generation works" [ -s "$WORK/leak-gen" ]
exec 3<>"$S/generate"
printf '%s' "$P" >&3
head -c 1 <&3 >/dev/null
exec 3>&-                          # cancelled early
n=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > /dev/null
m=$(cat "$S/sessions/new")
printf '%s' "$P" > "$S/sessions/$m/chat"   # left unread at unmount
echo 'Hello' > "$S/tokenize"
cat "$S/tokenize" "$S/info" "$S/stats" "$S/kv" "$S/placement" \
	"$S/weights/index" "$MNT/metrics" "$MNT/status" "$MNT/broken/errors" >/dev/null
echo 'bad=1' > "$S/config" 2>/dev/null
rmdir "$S/sessions/$n"
k=$(cat "$S/sessions/new")
exec 4>"$S/sessions/$k/generate"
rmdir "$S/sessions/$k"            # removed while its file is open
printf '%s' "$P" >&4
exec 4>&-
# in flight at unmount: unread, it pauses at --stream-buffer and stays
# (its own kv line, by its process session: the earlier answers may end
# meanwhile, so a count of the active ones could stand still)
printf 'max_tokens=0\n' > "$S/config"
setsid bash -c "ps -o sid= -p \$\$ > '$WORK/sid'; printf '%s' '$P' > '$S/generate'"
ours() { grep -q "^sequence [0-9]* pid-session-$(cat "$WORK/sid" 2>/dev/null | tr -d ' ') " "$S/kv" 2>/dev/null; }
check "$how: a generation is in flight" wait_for 120 ours
fusermount3 -u "$MNT"
if wait_for 600 gone "$PID"; then
	wait "$PID"
	rc=$?
else
	kill -9 "$PID"
	rc="still running 600 s after the unmount"
fi
PID=
check "$how: the daemon exits 0 with no error or leak (rc $rc)" [ "$rc" = 0 ]
if [ "$rc" != 0 ]; then
	tail -n 60 "$WORK/valgrind.log" "$WORK"/asan* "$WORK/daemon.log" 2>/dev/null
fi
finish
