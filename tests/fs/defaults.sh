#!/usr/bin/env bash
# The per-uid limits at their documented defaults (Documentation/ABI.md,
# "Users"; no --max-* option given): 1024 sessions (EMFILE for the
# 1025th), 256 answers queued, running or unread (EAGAIN at the read of
# the 257th), 64 MiB of prompts written and not submitted (ENOMEM past
# it), each with an errors line naming the limit; another uid is not
# limited by them, and closing or removing gives the allowance back.
# limits.sh checks the same limits set small.
. "$(dirname "$0")/mount-lib.bash"
command -v setpriv >/dev/null || skip "setpriv is absent"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is absent"

chmod 755 "$WORK"
A="setpriv --reuid=65534 --regid=65534 --clear-groups"
B="setpriv --reuid=65533 --regid=65533 --clear-groups"
P='Once upon a time'

mount_llmfs -o allow_other --name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=1\n' > "$S/config"

# 1. 256 answers: 256 sessions of A with an unread answer each, then the
# 257th is refused at its read.
cat > "$WORK/answers.py" <<'EOF'
import errno, os, sys
model, n = sys.argv[1], int(sys.argv[2])
ids = []
for _ in range(n):
    with open(model + "/sessions/new") as f:
        ids.append(f.read().strip())
# Each prompt is submitted at its release, which any of the daemon's
# threads may handle: the last two could be taken in either order. A read
# of generate with nothing submitted waits for the releases before it
# (fs_release_wait) and is EOF: the first n - 1 are in before the last.
for i in ids[:-1]:
    with open("%s/sessions/%s/generate" % (model, i), "w") as f:
        f.write("Once upon a time")
with open(model + "/generate") as f:
    f.read()
with open("%s/sessions/%s/generate" % (model, ids[-1]), "w") as f:
    f.write("Once upon a time")
fd = os.open("%s/sessions/%s/generate" % (model, ids[-1]), os.O_RDONLY)
try:
    while os.read(fd, 4096):
        pass
    print("read", ids[-1], "ok")
except OSError as e:
    print("read", ids[-1], errno.errorcode[e.errno])
os.close(fd)
EOF
read -r _ last code < <($A /usr/bin/python3 "$WORK/answers.py" "$S" 257)
check "the 257th unread answer of a uid is refused: EAGAIN ($code)" [ "$code" = EAGAIN ]
check "... with an errors line naming 256" \
	grep -q 'uid 65534 holds 256 answers queued, running or unread' "$S/errors"
$B bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/b-gen"
check "another uid still generates" [ -s "$WORK/b-gen" ]
$A cat "$S/sessions/1/generate" > /dev/null
$A bash -c "printf '%s' '$P' > '$S/sessions/$last/generate'; cat '$S/sessions/$last/generate'" > "$WORK/a-gen"
check "one answer read, one more can be made and read" [ -s "$WORK/a-gen" ]

# 2. 1024 sessions: A holds 257; 767 more, then EMFILE.
cat > "$WORK/sessions.py" <<'EOF'
import errno, sys
n = 0
try:
    while n < 2000:
        with open(sys.argv[1] + "/sessions/new") as f:
            f.read()
        n += 1
    print(n, "none")
except OSError as e:
    print(n, errno.errorcode[e.errno])
EOF
read -r made code < <($A /usr/bin/python3 "$WORK/sessions.py" "$S")
check "a uid makes sessions up to 1024 ($((made + 257)))" [ $((made + 257)) = 1024 ]
check "... then EMFILE ($code)" [ "$code" = EMFILE ]
check "... with an errors line naming 1024" \
	grep -q 'sessions/new: uid 65534 holds 1024 sessions' "$S/errors"
check "another uid still makes sessions" $B bash -c "cat '$S/sessions/new' > /dev/null"
n=$($A ls "$S/sessions" | grep -v new | head -n 1)
$A rmdir "$S/sessions/$n"
check "rmdir gives one back" $A bash -c "cat '$S/sessions/new' > /dev/null"
for d in $(ls "$S/sessions" | grep -v new); do rmdir "$S/sessions/$d"; done

# 3. 64 MiB of prompt bytes: 16 descriptors of 4 MiB are held, then any
# more is ENOMEM; closing them gives the allowance back.
cat > "$WORK/bytes.py" <<'EOF'
import errno, os, sys
fds, held, code = [], 0, "none"
try:
    while held < (80 << 20):
        fd = os.open(sys.argv[1], os.O_RDWR)
        fds.append(fd)
        for _ in range(4):
            os.write(fd, b'x' * (1 << 20))
            held += 1 << 20
except OSError as e:
    code = errno.errorcode[e.errno]
print(held, code)
EOF
read -r held code < <($A /usr/bin/python3 "$WORK/bytes.py" "$S/generate")
check "a uid holds 64 MiB of unsubmitted prompts ($held bytes)" [ "$held" = 67108864 ]
check "... then ENOMEM ($code)" [ "$code" = ENOMEM ]
check "... with an errors line naming 67108864" \
	grep -q 'uid 65534 holds 67108864 prompt bytes not yet submitted' "$S/errors"
# (a close returns before the daemon has the release: tried until then)
all_back() {
	read -r held code < <($A /usr/bin/python3 "$WORK/bytes.py" "$S/generate")
	[ "$held" = 67108864 ]
}
check "closed, they come back: 64 MiB again" wait_for 60 all_back
unmount_llmfs
finish
