#!/usr/bin/env bash
# One turn at a time per session (Documentation/ABI.md, sessions/N;
# reliability.md, defect 4): two descriptors that submit to one
# sessions/N/generate at once run one after the other, the second
# continuing the conversation the first left (its answer is llmfs-run's
# on the whole text), and history lists them as they ran; a snapshot
# restore while a turn runs is EBUSY at the write of its header, and the
# session is left as the turn leaves it. --stream-buffer 16 holds a turn
# running while its reader does not read, deterministically.
. "$(dirname "$0")/mount-lib.bash"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is absent"

mount_llmfs --stream-buffer 16 --name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"
P1='Once upon a time, there was a little girl.'
P2=' She liked to play with her red ball.'
run() { "$RUN" -m "$STORIES" -p "$1" --temp 0 -n 24 2>/dev/null; }

# Two O_RDWR descriptors: both submit (poll) before either is read.
n=$(cat "$S/sessions/new")
/usr/bin/python3 - "$S/sessions/$n/generate" "$P1" "$P2" "$WORK" <<'EOF'
import os, select, sys
path, p1, p2, work = sys.argv[1:5]
fds = [os.open(path, os.O_RDWR) for _ in range(2)]
os.write(fds[0], p1.encode())
os.write(fds[1], p2.encode())
for fd in fds:                   # the first poll of each submits it
    p = select.poll()
    p.register(fd, select.POLLIN)
    p.poll(0)
for i, fd in enumerate(fds):
    out = b""
    while True:
        b = os.read(fd, 4096)
        if not b:
            break
        out += b
    open("%s/turn%d" % (work, i + 1), "wb").write(out)
    os.close(fd)
EOF
run "$P1" > "$WORK/want1"
same "$WORK/want1" "$WORK/turn1" "the first turn: llmfs-run on its prompt"
run "$P1$(cat "$WORK/want1")$P2" > "$WORK/want2"
same "$WORK/want2" "$WORK/turn2" "the second, submitted meanwhile, continues after the first's answer"
printf -- '--- prompt\n%s\n--- answer\n%s\n--- prompt\n%s\n--- answer\n%s\n' \
	"$P1" "$(cat "$WORK/want1")" "$P2" "$(cat "$WORK/want2")" > "$WORK/want-history"
cp "$S/sessions/$n/history" "$WORK/history"
same "$WORK/want-history" "$WORK/history" "history lists the two turns as they ran"

# A snapshot to restore, from a session of one turn.
m=$(cat "$S/sessions/new")
printf '%s' "$P1" > "$S/sessions/$m/generate"
cat "$S/sessions/$m/generate" > /dev/null
cp "$S/sessions/$m/kv" "$WORK/saved.kv"

# A restore while a turn runs: the turn's reader read one byte and the
# generation is paused (16 bytes unread at most), so the turn runs on.
k=$(cat "$S/sessions/new")
exec 4<>"$S/sessions/$k/generate"
printf '%s' "$P2" >&4
head -c 1 <&4 > "$WORK/first"
if cp "$WORK/saved.kv" "$S/sessions/$k/kv" 2>"$WORK/err"; then
	fail "a restore while a turn runs is refused"
else
	check "a restore while a turn runs: EBUSY ($(cat "$WORK/err"))" grep -q 'busy' "$WORK/err"
fi
check "... errors says why" grep -q "a turn of session $k runs" "$S/errors"
cat <&4 >> "$WORK/first"
exec 4>&-
run "$P2" > "$WORK/want3"
same "$WORK/want3" "$WORK/first" "... the turn ends with its own answer"
check "... history has the turn and no restore" \
	[ "$(grep -c '^--- restored' "$S/sessions/$k/history")" = 0 ] && \
	grep -q '^--- prompt$' "$S/sessions/$k/history"
j=$(cat "$S/sessions/new")
cp "$WORK/saved.kv" "$S/sessions/$j/kv" && ok "once no turn runs, a restore into an empty session works" || fail "restore into an empty session"
unmount_llmfs
finish
