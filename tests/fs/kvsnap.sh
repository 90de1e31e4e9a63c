#!/usr/bin/env bash
# sessions/N/kv snapshots (Documentation/ABI.md): save a session's cache,
# remount, restore it into a new session and continue: the answer equals
# the uninterrupted session's (token for token) and only the new turn is
# evaluated; a truncated, corrupted, foreign-model or wrong-type snapshot,
# or one written to a session that is not empty, fails with EINVAL and an
# errors line and leaves the session as it was. Writes are bounded: a bad
# header fails the write that completes it, a byte past the announced size
# fails its write with EFBIG (4 GB from uid 65534: refused after the
# snapshot's bytes, RSS flat), a piece over --max-prompt-bytes is ENOMEM.
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 needed to corrupt a snapshot"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is absent"
command -v setpriv >/dev/null || skip "setpriv is absent"

P1='Once upon a time, there was a little girl named Lily.'
P2=' One day, she'
evaluated() { awk '$1 == "tokens_in_evaluated" { print $2 }' "$1/stats"; }

mount_llmfs --kv-type-k q8_0 --kv-type-v q4_0 --name qwen="$MIXQ" \
	--name stories="$STORIES"
wait_loaded || fail "models loaded in 10 s"
Q=$MNT/qwen
printf 'temperature=0\nmax_tokens=24\n' > "$Q/config"
a=$(cat "$Q/sessions/new")
printf '%s' "$P1" > "$Q/sessions/$a/generate"
cat "$Q/sessions/$a/generate" > /dev/null
cp "$Q/sessions/$a/kv" "$WORK/saved.kv" || fail "cp sessions/N/kv"
check "the snapshot starts with its magic" \
	[ "$(head -c 7 "$WORK/saved.kv")" = LLMFSKV ]
# the uninterrupted session's second turn
u0=$(evaluated "$Q")
printf '%s' "$P2" > "$Q/sessions/$a/generate"
cat "$Q/sessions/$a/generate" > "$WORK/uninterrupted"
u1=$(evaluated "$Q")
cp "$WORK/saved.kv" "$WORK/stories.kv"
unmount_llmfs

mount_llmfs --kv-type-k q8_0 --kv-type-v q4_0 --name qwen="$MIXQ" \
	--name stories="$STORIES"
wait_loaded || fail "models loaded in 10 s"
Q=$MNT/qwen
S=$MNT/stories
printf 'temperature=0\nmax_tokens=24\n' > "$Q/config"

# refusals first, each on a fresh session that must stay empty
# (the errors line looked for is a new one: two refusals give the same line)
refuse() {    # DESC FILE WANT-IN-ERRORS
	local n had; n=$(cat "$Q/sessions/new")
	had=$(wc -l < "$Q/errors")
	if cp "$2" "$Q/sessions/$n/kv" 2>"$WORK/err"; then
		fail "$1 is refused"
	else
		check "$1: EINVAL" grep -q 'Invalid argument' "$WORK/err"
	fi
	tail -n +$((had + 1)) < "$Q/errors" > "$WORK/new-errors"
	check "$1: errors says $3" grep -q "$3" "$WORK/new-errors"
	check "$1: the session is still empty" [ -z "$(cat "$Q/sessions/$n/history")" ]
}
head -c 1000 "$WORK/saved.kv" > "$WORK/truncated.kv"
refuse "a truncated snapshot" "$WORK/truncated.kv" 'truncated'
python3 - "$WORK/saved.kv" "$WORK/corrupt.kv" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[len(b) - 100] ^= 0x40        # a bit inside the last block's K/V bytes
open(sys.argv[2], 'wb').write(b)
EOF
refuse "a corrupted snapshot" "$WORK/corrupt.kv" 'checksum does not match'
python3 - "$WORK/saved.kv" "$WORK/corrupt-text.kv" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n_tokens = struct.unpack_from('<I', b, 72)[0]
b[128 + 4 * n_tokens] ^= 0x01  # the conversation's first byte
open(sys.argv[2], 'wb').write(b)
EOF
refuse "a snapshot whose text was changed" "$WORK/corrupt-text.kv" 'checksum does not match'
python3 - "$WORK/saved.kv" "$WORK/foreign.kv" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[16] ^= 0xff                  # the model digest
open(sys.argv[2], 'wb').write(b)
EOF
refuse "a foreign model's snapshot" "$WORK/foreign.kv" 'another model'
python3 - "$WORK/saved.kv" "$WORK/type.kv" <<'EOF'
import sys, struct
b = bytearray(open(sys.argv[1], 'rb').read())
b[48:52] = struct.pack('<I', 12)   # type_k q4_K: not a cache type
open(sys.argv[2], 'wb').write(b)
EOF
refuse "a wrong-type snapshot" "$WORK/type.kv" 'types this model cannot use'
check "a model that cannot use --kv-type-k says so and keeps f16" \
	grep -q 'kv: K type q8_0: head_dim 8.*stays f16' "$S/errors"
n=$(cat "$S/sessions/new")
if cp "$WORK/saved.kv" "$S/sessions/$n/kv" 2>/dev/null; then
	fail "another model refuses the snapshot"
else
	ok "another model (stories260K) refuses the snapshot"
fi

# the round trip
b=$(cat "$Q/sessions/new")
cp "$WORK/saved.kv" "$Q/sessions/$b/kv" || fail "restore: cp saved.kv sessions/N/kv"
check "restored: history says so" grep -q '^--- restored' "$Q/sessions/$b/history"
cp "$Q/sessions/$b/kv" "$WORK/again.kv"
same "$WORK/saved.kv" "$WORK/again.kv" "restored: the snapshot reads back the same"
e0=$(evaluated "$Q")
printf '%s' "$P2" > "$Q/sessions/$b/generate"
cat "$Q/sessions/$b/generate" > "$WORK/restored"
e1=$(evaluated "$Q")
same "$WORK/uninterrupted" "$WORK/restored" "save, remount, restore, continue = the uninterrupted session"
check "after a restore the turn evaluates what the uninterrupted one did ($((e1 - e0)) = $((u1 - u0)) tokens)" \
	[ $((e1 - e0)) = $((u1 - u0)) ]
if cp "$WORK/saved.kv" "$Q/sessions/$b/kv" 2>/dev/null; then
	fail "a session that is not empty refuses a snapshot"
else
	check "a session that is not empty refuses a snapshot" \
		grep -q 'is not empty' "$Q/errors"
fi
unmount_llmfs

# Bounded writes (Documentation/reliability.md, defect 2): the header is
# checked at the write that completes it, a byte past the size it
# announces fails its write at once (EFBIG), and what is in flight counts
# against the writer's --max-prompt-bytes.
PY=/usr/bin/python3
cat > "$WORK/put.py" <<'EOF'
# put.py FILE TARGET CHUNK [FILLER_BYTES]: write FILE (then FILLER_BYTES
# of zeros) to TARGET in CHUNK-byte writes; print "wrote N fail ERRNO at
# BYTE close ERRNO" (- for none), stopping at the first failed write.
import errno, os, sys
data = open(sys.argv[1], 'rb').read()
chunk = int(sys.argv[3])
filler = int(sys.argv[4]) if len(sys.argv) > 4 else 0
fd = os.open(sys.argv[2], os.O_WRONLY)
off, fail, total = 0, "-", len(data) + filler
zeros = bytes(chunk)
while off < total:
    n = min(chunk, total - off)
    head = data[off:off + n]
    buf = head + zeros[:n - len(head)]
    try:
        os.write(fd, buf)
    except OSError as e:
        fail = "%s at %d" % (errno.errorcode[e.errno], off)
        break
    off += n
try:
    os.close(fd)
    closed = "-"
except OSError as e:
    closed = errno.errorcode[e.errno]
print("wrote %d fail %s close %s" % (off, fail, closed))
EOF
cat > "$WORK/bad.py" <<'EOF'
# bad.py IN OUT OFFSET BYTE...: IN with bytes from OFFSET replaced
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
off = int(sys.argv[3])
new = bytes(int(x) for x in sys.argv[4:])
b[off:off + len(new)] = new
open(sys.argv[2], 'wb').write(b)
EOF
# the largest piece held at once: a block and its checksum
piece=$($PY - "$WORK/saved.kv" <<'EOF'
import struct, sys
h = open(sys.argv[1], 'rb').read(128)
n_layer = struct.unpack_from('<I', h, 56)[0]
n_tok = struct.unpack_from('<I', h, 72)[0]
k_row, v_row = struct.unpack_from('<QQ', h, 88)
print(min(n_tok, 64) * n_layer * (k_row + v_row) + 32)
EOF
)
size=$(stat -c %s "$WORK/saved.kv")
chmod 755 "$WORK"
chmod 644 "$WORK/put.py" "$WORK/saved.kv"
A="setpriv --reuid=65534 --regid=65534 --clear-groups"
rss_kb() { awk "/^$1/ { print \$2 }" "/proc/$PID/status"; }
put() { $A $PY "$WORK/put.py" "$@"; }

mount_llmfs -o allow_other --max-prompt-bytes $((piece - 1)) \
	--kv-type-k q8_0 --kv-type-v q4_0 --name qwen="$MIXQ"
wait_loaded || fail "model loaded"
Q=$MNT/qwen
$PY "$WORK/bad.py" "$WORK/saved.kv" "$WORK/bad1.kv" 120 1    # reserved
$PY "$WORK/bad.py" "$WORK/saved.kv" "$WORK/bad2.kv" 88 255 255 255 255 # K row
chmod 644 "$WORK"/bad*.kv
n=$($A cat "$Q/sessions/new")
r=$(put "$WORK/bad1.kv" "$Q/sessions/$n/kv" 128)
check "reserved bytes set: EINVAL at the header's write ($r)" [ "$r" = "wrote 0 fail EINVAL at 0 close EINVAL" ]
check "... errors says why" grep -q 'reserved header bytes are not zero' "$Q/errors"
n=$($A cat "$Q/sessions/new")
r=$(put "$WORK/bad2.kv" "$Q/sessions/$n/kv" 100)
check "absurd row sizes: EINVAL at the write that completes the header ($r)" [ "$r" = "wrote 100 fail EINVAL at 100 close EINVAL" ]
check "... errors says why" grep -q 'row sizes are not the types' "$Q/errors"
n=$($A cat "$Q/sessions/new")
r=$(put "$WORK/saved.kv" "$Q/sessions/$n/kv" 65536)
check "a block over --max-prompt-bytes ($((piece - 1))): ENOMEM ($r)" grep -q 'fail ENOMEM' <<<"$r"
check "... errors names the limit" grep -q 'kv snapshot: uid 65534 holds' "$Q/errors"
check "... the session is still empty" [ ! -s "$Q/sessions/$n/history" ]
unmount_llmfs

# 4 GB from uid 65534: the saved snapshot, then zeros. The first write
# past its end fails, the daemon's RSS grows by less than the writer's
# allowance (64 MiB), and the session stays empty.
mount_llmfs -o allow_other --kv-type-k q8_0 --kv-type-v q4_0 \
	--name qwen="$MIXQ"
wait_loaded || fail "model loaded"
Q=$MNT/qwen
n=$($A cat "$Q/sessions/new")
before=$(rss_kb VmRSS)
r=$(put "$WORK/saved.kv" "$Q/sessions/$n/kv" 4096 $((4 << 30)))
after=$(rss_kb VmHWM)
at=$((size / 4096 * 4096))
check "4 GB after a $size-byte snapshot: EFBIG at the write past its end ($r)" \
	[ "$r" = "wrote $at fail EFBIG at $at close EFBIG" ]
check "... errors says so" grep -q "bytes past the $size its header announces" "$Q/errors"
check "... the session is still empty" [ ! -s "$Q/sessions/$n/history" ]
check "... the daemon's peak RSS grew by under 64 MiB ($before -> $after kB)" \
	[ $((after - before)) -lt 65536 ]
unmount_llmfs
finish
