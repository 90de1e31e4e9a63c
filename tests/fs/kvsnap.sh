#!/usr/bin/env bash
# sessions/N/kv snapshots (Documentation/ABI.md): save a session's cache,
# remount, restore it into a new session and continue: the answer equals
# the uninterrupted session's (token for token) and only the new turn is
# evaluated; a truncated, corrupted, foreign-model or wrong-type snapshot,
# or one written to a session that is not empty, fails with EINVAL and an
# errors line and leaves the session as it was.
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 needed to corrupt a snapshot"

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
refuse() {    # DESC FILE WANT-IN-ERRORS
	local n; n=$(cat "$Q/sessions/new")
	if cp "$2" "$Q/sessions/$n/kv" 2>"$WORK/err"; then
		fail "$1 is refused"
	else
		check "$1: EINVAL" grep -q 'Invalid argument' "$WORK/err"
	fi
	check "$1: errors says $3" grep -q "$3" "$Q/errors"
	check "$1: the session is still empty" [ ! -s "$Q/sessions/$n/history" ]
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
finish
