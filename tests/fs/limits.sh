#!/usr/bin/env bash
# Memory bounds (Documentation/reliability.md): prompt bytes written and
# not submitted are counted per uid (ENOMEM past --max-prompt-bytes, and
# the daemon's RSS stays flat however many descriptors try); answers
# queued, running or unread are counted per uid (EAGAIN past
# --max-generations); a reader that stops reading pauses its generation
# at --stream-buffer unread bytes (the answer is whole when it resumes).
. "$(dirname "$0")/mount-lib.bash"
command -v setpriv >/dev/null || skip "setpriv is absent"
command -v python3 >/dev/null || skip "python3 is absent"

chmod 755 "$WORK"
A="setpriv --reuid=65534 --regid=65534 --clear-groups"
B="setpriv --reuid=65533 --regid=65533 --clear-groups"
P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 200 > "$WORK/expect200" 2>/dev/null

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$PID/status"; }

mount_llmfs -o allow_other --max-prompt-bytes 16777216 --max-generations 3 \
	--stream-buffer 64 --name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=200\n' > "$S/config"

# 1. 400 write-only descriptors of 1 MiB each from one user: 16 MiB held
# at most, the rest refused with ENOMEM; RSS stays flat.
before=$(rss_kb)
cat > "$WORK/hold.py" <<'EOF'
import os, sys, errno, time
fds, refused, code = [], 0, ""
for i in range(400):
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        os.write(fd, b'x' * (1 << 20))
        fds.append(fd)
    except OSError as e:
        refused += 1
        code = errno.errorcode[e.errno]
        os.close(fd)
with open(sys.argv[2], 'w') as f:
    f.write("held %d refused %d %s\n" % (len(fds), refused, code))
# hold them until the caller has read the daemon's RSS (it creates argv[3])
for _ in range(6000):
    if os.path.exists(sys.argv[3]):
        break
    time.sleep(0.02)
EOF
: > "$WORK/prompts"
chmod 666 "$WORK/prompts"
$A /usr/bin/python3 "$WORK/hold.py" "$S/generate" "$WORK/prompts" "$WORK/rss-read" &
h=$!
wait_for 120 test -s "$WORK/prompts"
after=$(rss_kb)
touch "$WORK/rss-read"
held=0 refused=0 code=
read -r _ held _ refused code < "$WORK/prompts"
check "16 of 400 1-MiB prompts are held ($held)" [ "$held" = 16 ]
check "... the other 384 refused ($refused)" [ "$refused" = 384 ]
check "... with ENOMEM ($code)" [ "$code" = ENOMEM ]
check "the daemon's RSS grew by under 64 MiB ($(( (after - before) / 1024 )) MiB)" [ $((after - before)) -lt 65536 ]
wait $h
check "an errors line names the limit" grep -q 'uid 65534 holds 16777216 prompt bytes not yet submitted' "$S/errors"
# A descriptor refused once stays refused (ENOMEM again after the
# allowance came back) and what it holds is never submitted.
cat > "$WORK/poison.py" <<'EOF'
import os, sys, errno, time
def attempt(fd, data):
    try:
        os.write(fd, data)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def fill():
    fds = [os.open(sys.argv[1], os.O_RDWR) for _ in range(16)]
    for f in fds:
        if attempt(f, b'x' * (1 << 20)) != "ok":
            for g in fds:
                os.close(g)
            return None
    return fds
# the whole allowance, once the closes before this one reached the daemon
# (a close returns before its release is handled)
deadline = time.monotonic() + 60
while not (full := fill()) and time.monotonic() < deadline:
    time.sleep(0.05)
fd = os.open(sys.argv[1], os.O_WRONLY)
first = attempt(fd, b'Once upon a time')
for f in full:                  # the 16 MiB come back
    os.close(f)
again = attempt(fd, b'Once upon a time')
os.close(fd)                    # the shell idiom would submit here
print(first, again)
EOF
read -r first again < <($A /usr/bin/python3 "$WORK/poison.py" "$S/generate")
check "a write past the allowance is ENOMEM ($first)" [ "$first" = ENOMEM ]
check "... and the same descriptor's next write too, the allowance back ($again)" \
	[ "$again" = ENOMEM ]
# (the filling descriptors were O_RDWR: their closes submit and cancel)
out=$($A cat "$S/generate")
rc=$?
check "... its close submitted nothing: the shell idiom's read is EOF (exit $rc, ${#out} bytes)" \
	[ "$rc:${#out}" = 0:0 ]
$B bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/b-gen"
check "another user still generates" [ -s "$WORK/b-gen" ]
$A bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/a-gen"
check "the charges went back at close: A generates again" [ -s "$WORK/a-gen" ]

# 2. Answers per uid: the fourth unread one is EAGAIN.
for i in 1 2 3 4; do
	n[$i]=$($A cat "$S/sessions/new")
	$A bash -c "printf '%s' '$P' > '$S/sessions/${n[$i]}/generate'"
done
if $A cat "$S/sessions/${n[4]}/generate" > /dev/null 2> "$WORK/err"; then
	fail "the fourth answer of A is refused"
else
	check "the fourth answer is EAGAIN ($(cat "$WORK/err"))" grep -q 'Resource temporarily unavailable' "$WORK/err"
fi
check "... with an errors line" grep -q 'generate: uid 65534 holds 3 answers queued, running or unread' "$S/errors"
$B bash -c "printf '%s' '$P' > '$S/generate'; cat '$S/generate'" > "$WORK/b-gen2"
check "B is not limited by A's answers" [ -s "$WORK/b-gen2" ]
$A cat "$S/sessions/${n[1]}/generate" > "$WORK/a1"
same "$WORK/expect200" "$WORK/a1" "A's first answer is whole"
$A bash -c "printf '%s' '$P' > '$S/sessions/${n[4]}/generate'; cat '$S/sessions/${n[4]}/generate'" > "$WORK/a4"
same "$WORK/expect200" "$WORK/a4" "one read, one more answer allowed"
for i in 2 3; do $A cat "$S/sessions/${n[$i]}/generate" > /dev/null; done

# 3. Back-pressure: a reader that stops at 1 byte; the generation pauses
# near 64 unread bytes (about 16 tokens), then resumes whole.
# Unpaused, the 200 tokens take well under a second on this model: five
# seconds in which the sequence never passes 60 tokens is a pause.
p=$(printf '%s' "$P" > "$S/tokenize"; wc -w < "$S/tokenize")
seq_tokens() { awk '/^sequence / { split($4, a, "/"); print a[1] }' "$S/kv"; }
past() { t=$(seq_tokens); [ -z "$t" ] || [ "$t" -ge "$1" ]; }
started() { t=$(seq_tokens); [ -n "$t" ] && [ "$t" -ge "$1" ]; }
exec 3<>"$S/generate"
printf '%s' "$P" >&3
head -c 1 <&3 > "$WORK/bp"
check "the generation runs (kv has its sequence)" wait_for 60 started $((p + 1))
t1=$(seq_tokens)
if wait_for 5 past $((p + 60)); then
	fail "the generation paused (it went on: '$(seq_tokens)' tokens, prompt $p)"
else
	t2=$(seq_tokens)
	check "the generation paused ($t1 then $t2 tokens, prompt $p, max 200 more)" \
		[ "$t2" -lt $((p + 60)) ]
fi
check "... while its reader waits (active 1)" grep -qx 'active 1' "$S/stats"
cat <&3 >> "$WORK/bp"
exec 3<&-
same "$WORK/expect200" "$WORK/bp" "the paused answer resumes, whole"
# A paused generation whose reader goes away ends at once (the scheduler
# sleeps while every generation is paused; the close must wake it).
exec 3<>"$S/generate"
printf '%s' "$P" >&3
head -c 1 <&3 > /dev/null
check "a second paused generation is active" wait_for 60 started $((p + 1))
check "... (active 1)" grep -qx 'active 1' "$S/stats"
exec 3<&-
check "closing its reader ends it" wait_for 30 grep -qx 'active 0' "$S/stats"
unmount_llmfs
finish
