#!/usr/bin/env bash
# Documentation/ABI.md's promises that no other test held it to:
# - the errnos of the file operations a generated tree refuses: unlink,
#   mkdir, mknod (EPERM), truncate of a 0444 file (EACCES, EROFS under
#   -o ro), unknown names (ENOENT);
# - text files are snapshots taken at open (reopen to see new values);
# - a tensor whose name cannot be a file name is weights/tensor.<N>;
# - chat on a model without a known template uses the text as it is and
#   says so in errors;
# - placement: EIO before the model is loaded (its file held shut by
#   tests/fs/fault_paths.c), ENOSPC when the device has no room (the
#   daemon's /proc/meminfo redirected to one that says so);
# - /metrics' values after a known set of requests, against the model's
#   stats and the counts made here.
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 is absent"

P='Once upon a time, there was a little girl named Lily.'

# odd.gguf: a copy of stories260K with one more tensor, named "bad/name"
# (no path can reach it), after the others: the engine does not use it, the
# tree lists it as tensor.<its index>; and a chat template of no family
# (not even valid Jinja).
ODD_INDEX=$(python3 - "$STORIES" "$WORK/odd.gguf" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
p = 4
def rd(f):
    global p
    v = struct.unpack_from('<' + f, d, p)[0]
    p += struct.calcsize('<' + f)
    return v
def skip_str():
    global p
    n = rd('Q')
    p += n
sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_val(t):
    global p
    if t == 8:
        skip_str()
    elif t == 9:
        et = rd('I')
        for _ in range(rd('Q')):
            skip_val(et)
    else:
        p += sizes[t]
def gstr(b):
    return struct.pack('<Q', len(b)) + b
version = rd('I'); nt = rd('Q'); nkv = rd('Q')
align = 32
kv_start = p
for _ in range(nkv):
    skip_str(); skip_val(rd('I'))
kv = d[kv_start:p] + gstr(b'tokenizer.chat_template') + struct.pack('<I', 8) + \
    gstr(b'{% no family knows this %}')
infos_start = p
for _ in range(nt):
    skip_str(); nd = rd('I'); p += 8 * nd + 4 + 8
infos = d[infos_start:p]
data = d[(p + align - 1) // align * align:]
off = (len(data) + align - 1) // align * align
info = gstr(b'bad/name') + struct.pack('<IQIQ', 1, 4, 0, off)
head = d[:4] + struct.pack('<IQQ', version, nt + 1, nkv + 1) + kv + infos + info
head += b'\x00' * ((-len(head)) % align)
out = head + data + b'\x00' * (off - len(data)) + b'\x00\x00\x80\x3f' * 4
open(sys.argv[2], 'wb').write(out)
print(nt)
EOF
)

cp "$STORIES" "$WORK/held.gguf"
grep -v '^MemAvailable:' /proc/meminfo > "$WORK/meminfo.real"
cp /proc/meminfo "$WORK/meminfo"
mount_faulty "$WORK/held.gguf=$WORK/held-may-load" \
	"/proc/meminfo=$WORK/meminfo" \
	--name stories="$STORIES" --name odd="$WORK/odd.gguf" \
	--name held="$WORK/held.gguf"
S=$MNT/stories
H=$MNT/held

# 1. placement before the load: EIO and a line; weights/ is empty.
check "held is loading (its file is held shut)" grep -q '^held .* loading ' "$MNT/models"
if echo 'blk.0 cpu' > "$H/placement" 2>"$WORK/err"; then
	fail "placement before the load is refused"
else
	check "placement before the load: EIO ($(cat "$WORK/err"))" \
		grep -q 'Input/output error' "$WORK/err"
fi
check "... with an errors line" grep -q 'placement: the model is not loaded' "$H/errors"
check "weights/ holds only index before the load" [ "$(ls "$H/weights")" = index ]
touch "$WORK/held-may-load"
wait_loaded || fail "models loaded"
check "held loaded once let" grep -q '^held .* ready ' "$MNT/models"
check "... and its weights/ is filled" [ "$(ls "$H/weights" | wc -l)" -gt 1 ]

# 2. placement: ENOSPC when the device has no room; nothing moves.
grep -q '^memory numa0 ' "$S/placement" ||
	fail "no numa0 device in placement (libnuma): the ENOSPC check needs one"
before=$(grep -c ' cpu$' "$S/placement")
# (1 kB: a MemAvailable of 0 reads as missing, and sysinfo is asked)
{ cat "$WORK/meminfo.real"; echo 'MemAvailable:          1 kB'; } > "$WORK/meminfo"
if echo 'blk.0 numa0' > "$S/placement" 2>"$WORK/err"; then
	fail "placement onto a device with no room is refused"
else
	check "placement onto a device with no room: ENOSPC ($(cat "$WORK/err"))" \
		grep -q 'No space left on device' "$WORK/err"
fi
check "... with an errors line" grep -q 'placement: blk.0 numa0: no room on numa0' "$S/errors"
check "... and nothing moved" [ "$(grep -c ' cpu$' "$S/placement")" = "$before" ]
cp /proc/meminfo "$WORK/meminfo"
check "with room again the same command works" sh -c "echo 'blk.0 numa0' > '$S/placement'"

# 3. The errnos of what a generated tree refuses.
errno_of() { # the strerror a command's failure printed, or "ok"
	if "$@" 2>"$WORK/err"; then echo ok; else cat "$WORK/err"; fi
}
for op in "rm -f $S/info" "rm -f $S/generate" "mkdir $S/x" "mkdir $S/sessions/99" \
		"mkfifo $S/fifo" "mknod $S/dev c 1 3"; do
	r=$(errno_of $op)
	check "$op: EPERM ($r)" grep -q 'Operation not permitted' <<<"$r"
done
for f in "$S/info" "$S/stats" "$MNT/models" "$MNT/status"; do
	r=$(errno_of truncate -s 0 "$f")
	check "truncate ${f#$MNT/}: EACCES ($r)" grep -q 'Permission denied' <<<"$r"
done
r=$(errno_of cat "$S/nothing")
check "an unknown name: ENOENT ($r)" grep -q 'No such file or directory' <<<"$r"

# 4. Text files are snapshots taken at open.
printf 'temperature=0\nmax_tokens=8\n' > "$S/config"
exec 3<"$S/stats" 4<"$MNT/status"
req0=$(sed -n 's/^requests //p' "$S/stats")
ses0=$(sed -n 's/^sessions //p' "$MNT/status")
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > /dev/null
cat "$S/sessions/new" > /dev/null
check "an open stats reads as it was at open (requests $req0)" \
	grep -qx "requests $req0" <&3
check "a new open sees the new value ($((req0 + 1)))" \
	grep -qx "requests $((req0 + 1))" "$S/stats"
check "an open status reads as it was at open (sessions $ses0)" \
	grep -qx "sessions $ses0" <&4
check "a new open sees the new value ($((ses0 + 1)))" \
	grep -qx "sessions $((ses0 + 1))" "$MNT/status"
exec 3<&- 4<&-

# 5. A tensor named "bad/name" is weights/tensor.48.
O=$MNT/odd
check "the model with an odd tensor name is ready" grep -q '^odd .* ready ' "$MNT/models"
check "weights/index names it" grep -q '^bad/name f32 4 16 ' "$O/weights/index"
check "weights/ lists it as tensor.$ODD_INDEX" \
	bash -c "ls '$O/weights' | grep -qx tensor.$ODD_INDEX"
check "... and only it is renamed" [ "$(ls "$O/weights" | grep -c '^tensor\.')" = 1 ]
read -r _ _ _ bytes off _ < <(grep '^bad/name ' "$O/weights/index")
tail -c +$((off + 1)) "$WORK/odd.gguf" | head -c "$bytes" > "$WORK/odd-expect"
cat "$O/weights/tensor.$ODD_INDEX" > "$WORK/odd-got"
same "$WORK/odd-expect" "$WORK/odd-got" "... with the file's bytes"
check "tensor.0 is not an alias of a tensor with a good name" \
	bash -c "! cat '$O/weights/tensor.0' 2>/dev/null"

# 6. chat with a template of no known family: the text as it is, and a
# line.
O=$MNT/odd
printf 'temperature=0\nmax_tokens=8\n' > "$O/config"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 8 > "$WORK/expect" 2>/dev/null
printf '%s' "$P" > "$O/chat"
cat "$O/chat" > "$WORK/chat"
same "$WORK/expect" "$WORK/chat" "chat, no known template: = generate of the same text"
check "... and errors says so" \
	grep -q 'chat: the model has no known chat template; the prompt is used as it is' "$O/errors"

# 7. /metrics after a known set of requests on a fresh model: two
# answers, one over the context (failed), one cancelled by its reader.
M=$MNT/held
printf 'temperature=0\nmax_tokens=8\n' > "$M/config"
for i in 1 2; do printf '%s' "$P" > "$M/generate"; cat "$M/generate" > /dev/null; done
python3 -c "print('Once upon a time ' * 200)" > "$M/generate"
cat "$M/generate" > /dev/null 2>&1
printf 'max_tokens=0\n' > "$M/config"
exec 3<>"$M/generate"
printf '%s' "$P" >&3
head -c 1 <&3 > /dev/null
exec 3>&-
check "the cancelled one ended" wait_for 60 grep -qx 'active 0' "$M/stats"
metric() { awk -v m="llmfs_$1{model=\"held\"}" '$1 == m { print $2 }' "$MNT/metrics"; }
stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$M/stats"; }
check "llmfs_model_state 1 (ready)" [ "$(metric model_state)" = 1 ]
check "llmfs_requests_total 4 ($(metric requests_total))" [ "$(metric requests_total)" = 4 ]
check "llmfs_requests_failed_total 1 ($(metric requests_failed_total))" \
	[ "$(metric requests_failed_total)" = 1 ]
check "llmfs_requests_cancelled_total 1 ($(metric requests_cancelled_total))" \
	[ "$(metric requests_cancelled_total)" = 1 ]
check "llmfs_generations_active 0" [ "$(metric generations_active)" = 0 ]
check "llmfs_generated_tokens_total = stats tokens_out ($(stat_of tokens_out)), over 16" \
	bash -c "[ '$(metric generated_tokens_total)' = '$(stat_of tokens_out)' ] &&
		[ '$(stat_of tokens_out)' -gt 16 ]"
check "llmfs_prompt_tokens_total = stats tokens_in_evaluated ($(stat_of tokens_in_evaluated))" \
	[ "$(metric prompt_tokens_total)" = "$(stat_of tokens_in_evaluated)" ]
check "llmfs_errors_total = the lines in errors ($(wc -l < "$M/errors"))" \
	[ "$(metric errors_total)" = "$(wc -l < "$M/errors")" ]
check "llmfs_ttft_seconds = stats ttft_ms_last / 1000" \
	awk -v s="$(metric ttft_seconds)" -v m="$(stat_of ttft_ms_last)" \
	'BEGIN { d = s * 1000 - m; exit !(s > 0 && d < 0.01 && d > -0.01) }'
check "llmfs_load_seconds = stats load_s" \
	awk -v s="$(metric load_seconds)" -v l="$(stat_of load_s)" \
	'BEGIN { d = s - l; exit !(l > 0 && d < 0.001 && d > -0.001) }'
unmount_llmfs

# 8. Under -o ro truncate is EROFS.
mount_llmfs -o ro --name stories="$STORIES"
for f in "$MNT/stories/info" "$MNT/stories/generate"; do
	r=$(errno_of truncate -s 0 "$f")
	check "ro: truncate ${f#$MNT/}: EROFS ($r)" grep -q 'Read-only file system' <<<"$r"
done
unmount_llmfs
finish
