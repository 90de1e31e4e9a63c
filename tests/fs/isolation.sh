#!/usr/bin/env bash
# Isolation of the users of an allow_other mount (Documentation/ABI.md,
# "Users"): a listing of thousands of sessions is whole and another user
# generates during one (how long either takes is tools/bench-sessions.sh's
# figure, not a test's); sessions per uid are limited; an answer of the
# shell idiom is keyed by the process session *and* the uid *and* the
# start time of the session's leader (a recycled session id or another uid
# in the same session gets nothing); sessions/N is its creator's alone; kv
# does not name another user's process session; errors lines are escaped
# and one user's flood pushes out only that user's lines.
. "$(dirname "$0")/mount-lib.bash"
command -v setpriv >/dev/null || skip "setpriv is absent"
command -v python3 >/dev/null || skip "python3 is absent"
[ -w /proc/sys/kernel/ns_last_pid ] || skip "/proc/sys/kernel/ns_last_pid is not writable"

chmod 755 "$WORK"
A="setpriv --reuid=65534 --regid=65534 --clear-groups"
B="setpriv --reuid=65533 --regid=65533 --clear-groups"
P='Once upon a time, there was a little girl named Lily.'

# --stream-buffer 64: the kv check below holds a generation paused (it
# would end in milliseconds on this model) by reading one byte of it.
mount_llmfs -o allow_other --max-sessions 3500 --stream-buffer 64 \
	--name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"

# 1. 3,000 sessions: one listing, while another user generates.
for i in $(seq 3000); do cat "$S/sessions/new"; done > /dev/null
n=$(ls "$S/sessions" | wc -l)
check "ls sessions/ lists 3,000 sessions and new ($n)" [ "$n" = 3001 ]
ls "$S/sessions" > "$WORK/listing" &
l=$!
$A bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/a-gen"
wait $l
check "a generation of another user during a listing" [ -s "$WORK/a-gen" ]
check "... and the listing is whole" [ "$(wc -l < "$WORK/listing")" = 3001 ]

# 2. Sessions per uid: A is limited, B is not affected.
out=$($A bash -c "for i in \$(seq 3501); do cat '$S/sessions/new' >/dev/null || exit 0; done; echo nolimit" 2>"$WORK/err")
check "uid A is refused past --max-sessions" [ "$out" != nolimit ]
check "... with EMFILE" grep -q 'Too many open files' "$WORK/err"
check "... and an errors line" grep -q 'sessions/new: uid 65534 holds 3500 sessions' "$S/errors"
check "uid B still makes sessions" $B bash -c "cat '$S/sessions/new' >/dev/null"
for d in $(ls "$S/sessions" | grep -v new); do rmdir "$S/sessions/$d" 2>/dev/null; done
check "root (the mount owner) removed every session" [ "$(ls "$S/sessions")" = new ]

# 3. sessions/N is its creator's alone.
n=$($A cat "$S/sessions/new")
check "sessions/N is 0700" [ "$(stat -c %a "$S/sessions/$n")" = 700 ]
check "... its generate 0600" [ "$(stat -c %a "$S/sessions/$n/generate")" = 600 ]
$A bash -c "printf '%s' '$P' > '$S/sessions/$n/generate'"
check "B cannot read A's answer" bash -c "! $B cat '$S/sessions/$n/generate' 2>/dev/null"
check "B cannot read A's history" bash -c "! $B cat '$S/sessions/$n/history' 2>/dev/null"
check "B cannot replace A's prompt" bash -c "! $B bash -c 'echo x > $S/sessions/$n/generate' 2>/dev/null"
check "B cannot remove A's session" bash -c "! $B rmdir '$S/sessions/$n' 2>/dev/null"
$A cat "$S/sessions/$n/generate" > "$WORK/a-session"
same "$WORK/a-gen" "$WORK/a-session" "A reads its own answer, whole"

# 4. The shell idiom: a second uid in the same process session gets
# nothing; the writer's uid gets the answer.
setsid bash -c "$A bash -c \"printf '%s' '$P' > '$S/generate'\"
	$B cat '$S/generate' > '$WORK/b-took'
	$A cat '$S/generate' > '$WORK/a-took'"
check "another uid in the same process session reads nothing" [ ! -s "$WORK/b-took" ]
same "$WORK/a-gen" "$WORK/a-took" "the writer's uid reads the answer"

# 5. A recycled process session id (ns_last_pid makes the kernel hand out
# the exited session's id again) does not take the unread answer.
cat > "$WORK/recycle.py" <<'EOF'
import os, sys
gen, prompt, out = sys.argv[1], sys.argv[2], sys.argv[3]
def session(fn):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fn()
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
def write():
    with open(gen, 'w') as f:
        f.write(prompt)
def read():
    with open(gen) as f, open(out, 'w') as o:
        o.write(f.read())
for attempt in range(50):
    sid = session(write)
    with open('/proc/sys/kernel/ns_last_pid', 'w') as f:
        f.write(str(sid - 1))
    if session(read) == sid:
        print("recycled", sid)
        sys.exit(0)
    # another process took the id first: the answer is cancelled by the
    # next write of this uid anyway; try again
sys.exit(1)
EOF
if python3 "$WORK/recycle.py" "$S/generate" "$P" "$WORK/recycled" > "$WORK/rec.log"; then
	check "a recycled session id reads nothing ($(cat "$WORK/rec.log"))" [ ! -s "$WORK/recycled" ]
else
	fail "could not recycle a session id in 50 tries"
fi

# 6. kv names the process session of a sequence to its own uid only.
printf 'max_tokens=0\n' > "$S/config"
setsid bash -c "exec 3<>'$S/generate'; printf '%s' '$P' >&3; head -c 1 <&3 >/dev/null; while [ ! -e '$WORK/kv-seen' ]; do sleep 0.02; done" &
k=$!
# setsid in a job of this non-interactive shell does not fork: the
# reader's session id is $k. Waiting for that sequence, not any: one of an
# earlier generation may still be leaving kv.
check "root sees whose the sequence is" \
	wait_for 60 grep -q "^sequence [0-9]* pid-session-$k " "$S/kv"
$B cat "$S/kv" > "$WORK/b-kv"
check "B sees a sequence" grep -q '^sequence ' "$WORK/b-kv"
check "... but not its process session" bash -c "! grep -q 'pid-session' '$WORK/b-kv'"
touch "$WORK/kv-seen"; wait $k
printf 'max_tokens=24\n' > "$S/config"

# 7. Model-wide settings are the owner's.
check "B cannot write the model's config" bash -c "! $B bash -c 'echo top_k=1 > $S/config' 2>/dev/null"
check "B cannot write placement" bash -c "! $B bash -c 'echo auto > $S/placement' 2>/dev/null"

# 8. errors: escaped, and B's flood keeps root's line.
echo 'temperature=owner-line' > "$S/config" 2>/dev/null
m=$($B cat "$S/sessions/new")
$B bash -c "for i in \$(seq 150); do printf 'x\\x1b[2JFORGED=1\\n' > '$S/sessions/$m/config'; done" 2>/dev/null
check "errors holds no raw escape byte" bash -c "! grep -q \$'\\x1b' '$S/errors'"
check "... the bytes are written as \\x1b" grep -q 'x\\x1b\[2JFORGED' "$S/errors"
check "the owner's line is still there after 150 of B's" grep -q 'owner-line' "$S/errors"
check "errors keeps 100 lines" [ "$(wc -l < "$S/errors")" = 100 ]
unmount_llmfs

# 9. --shared-config lets others write the model's config.
mount_llmfs -o allow_other --shared-config --name stories="$STORIES"
wait_loaded
check "--shared-config: B writes the model's config" $B bash -c "echo top_k=7 > '$S/config'"
check "... and it holds" grep -qx 'top_k=7' "$S/config"
unmount_llmfs
finish
