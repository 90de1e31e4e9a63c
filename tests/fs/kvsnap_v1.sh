#!/usr/bin/env bash
# The version-1 KV snapshot format, pinned by the files committed in
# tests/fs/snapshots/ (made once, by an earlier build; README there):
#
# - decoded here by a reader written from Documentation/ABI.md's table
#   alone (header fields at their offsets, the model digest, row sizes of
#   the K/V types, the checksums, nothing after the last block);
# - every build restores them, reads them back byte for byte (a writer
#   that puts a field elsewhere or in another order fails here) and goes
#   on from them as the uninterrupted session would (the text llmfs-run
#   gives for the whole conversation, only the new tokens evaluated);
# - copies with fields in another order, another version, bytes after the
#   last block, or a budget too small for them are refused, the session
#   left empty (EINVAL, EFBIG or ENOSPC, and an errors line).
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 is absent"

SNAP=tests/fs/snapshots
ST=$SNAP/stories260K.f16-f16.kv
QW=$SNAP/tiny-qwen3-bpe16k-f16.q8_0-q4_0.kv
P2=' One day, she'

# decode.py FILE MODEL N_LAYER N_HEAD_KV HEAD_DIM TEXT: the ABI's layout,
# field by field; writes FILE's conversation text to TEXT; prints
# "n_tokens TYPE_K TYPE_V" or the first field that is wrong.
cat > "$WORK/decode.py" <<'EOF'
import hashlib, struct, sys
path, model = sys.argv[1:3]
n_layer, n_head_kv, head_dim = [int(x) for x in sys.argv[3:6]]
b = open(path, 'rb').read()
# ggml type number: (block elements, block bytes), ABI.md's list
types = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18),
         3: (32, 20), 6: (32, 22), 7: (32, 24)}
def need(cond, what):
    if not cond:
        sys.exit("bad " + what)
need(b[0:8] == b'LLMFSKV\0', "magic")
need(struct.unpack_from('<I', b, 8)[0] == 1, "version")
need(struct.unpack_from('<I', b, 12)[0] == 128, "header size")
need(b[16:48] == hashlib.sha256(open(model, 'rb').read()).digest(),
     "model digest")
tk, tv = struct.unpack_from('<II', b, 48)
need(tk in types and tv in types, "K/V types")
nl, nh, hd, hdv = struct.unpack_from('<4I', b, 56)
need((nl, nh, hd, hdv) == (n_layer, n_head_kv, head_dim, head_dim),
     "shape (%d %d %d %d)" % (nl, nh, hd, hdv))
nt, bt = struct.unpack_from('<II', b, 72)
need(bt == 64, "positions per block")
tb, kr, vr = struct.unpack_from('<QQQ', b, 80)
def row(t):
    n, size = types[t]
    return nh * hd // n * size
need((kr, vr) == (row(tk), row(tv)), "row bytes (%d %d)" % (kr, vr))
need(b[104:128] == bytes(24), "reserved bytes")
off = 128 + 4 * nt + tb
need(hashlib.sha256(b[:off]).digest() == b[off:off + 32], "header checksum")
open(sys.argv[6], 'wb').write(b[128 + 4 * nt:off])
off += 32
for first in range(0, nt, 64):
    n = nl * min(64, nt - first) * (kr + vr)
    blk = b[off:off + n]
    need(len(blk) == n, "block at %d" % first)
    need(hashlib.sha256(blk).digest() == b[off + n:off + n + 32],
         "block %d checksum" % (first // 64))
    off += n + 32
need(off == len(b), "end (%d bytes after the last block)" % (len(b) - off))
print(nt, tk, tv)
EOF

mount_llmfs --name stories="$STORIES" --name qwen="$QWEN"
wait_loaded || fail "models loaded"
S=$MNT/stories
Q=$MNT/qwen
info() { awk -v k="$2" '$1 == k { print $2 }' "$1/info"; }
shape() { echo "$(info "$1" layers) $(info "$1" heads_kv) $(info "$1" head_dim)"; }

# 1. The committed files, as ABI.md describes them.
read -r st_tokens _ < <(python3 "$WORK/decode.py" "$ST" "$STORIES" $(shape "$S") \
	"$WORK/st.text" 2>&1)
check "$ST follows ABI.md's layout (${st_tokens})" [ "${st_tokens:-x}" = 12 ]
read -r qw_tokens qk qv < <(python3 "$WORK/decode.py" "$QW" "$QWEN" $(shape "$Q") \
	"$WORK/qw.text" 2>&1)
check "$QW follows ABI.md's layout (${qw_tokens} ${qk:-} ${qv:-})" \
	[ "${qw_tokens:-x} ${qk:-} ${qv:-}" = "12 8 2" ]

evaluated() { awk '$1 == "tokens_in_evaluated" { print $2 }' "$1/stats"; }
ntok() { printf '%s' "$2" > "$1/tokenize"; wc -w < "$1/tokenize"; }

# restore MODEL_DIR FILE: a new session that took FILE ($n), or fails.
restore() {
	n=$(cat "$1/sessions/new")
	cp "$2" "$1/sessions/$n/kv" 2>"$WORK/err"
}

# 2. This build reads them: restored, read back the same, and continued.
printf 'temperature=0\nmax_tokens=8\n' > "$S/config"
printf 'temperature=0\nmax_tokens=8\n' > "$Q/config"
check "stories260K's snapshot is restored" restore "$S" "$ST"
check "... history says so" grep -q '^--- restored 12 tokens' "$S/sessions/$n/history"
cp "$S/sessions/$n/kv" "$WORK/st-again.kv"
same "$ST" "$WORK/st-again.kv" "... and reads back byte for byte"
e0=$(evaluated "$S")
printf '%s' "$P2" > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/st-more"
e1=$(evaluated "$S")
"$RUN" -m "$STORIES" -p "$(cat "$WORK/st.text")$P2" --temp 0 -n 8 \
	> "$WORK/st-expect" 2>/dev/null
same "$WORK/st-expect" "$WORK/st-more" "... and goes on as the whole conversation would (llmfs-run)"
full=$(ntok "$S" "$(cat "$WORK/st.text")$P2")
check "... evaluating only the new tokens ($((e1 - e0)) of $full, 12 restored)" \
	[ $((e1 - e0)) -le $((full - 12 + 1)) ]

check "tiny-qwen3's q8_0/q4_0 snapshot is restored" restore "$Q" "$QW"
cp "$Q/sessions/$n/kv" "$WORK/qw-again.kv"
same "$QW" "$WORK/qw-again.kv" "... and reads back byte for byte"
e0=$(evaluated "$Q")
printf '%s' "$P2" > "$Q/sessions/$n/generate"
cat "$Q/sessions/$n/generate" > "$WORK/qw-more"
e1=$(evaluated "$Q")
check "... and goes on (an answer)" [ -s "$WORK/qw-more" ]
check "... evaluating only the new tokens ($((e1 - e0)))" \
	[ $((e1 - e0)) -le $(($(ntok "$Q" "$P2") + 1)) ]

# 3. Refusals, each on a fresh session that must stay empty.
refuse() { # MODEL_DIR DESC FILE WANT-IN-ERRORS [ERRNO-TEXT]
	if restore "$1" "$3"; then
		fail "$2 is refused"
	else
		check "$2: ${5:-EINVAL} ($(cat "$WORK/err"))" \
			grep -q "${5:-Invalid argument}" "$WORK/err"
	fi
	check "$2: errors says '$4'" grep -q "kv snapshot: .*$4" "$1/errors"
	check "$2: the session is still empty" [ -z "$(cat "$1/sessions/$n/history")" ]
}
# variant IN OUT PYTHON: OUT is IN changed by PYTHON (b: the bytes); the
# header checksum is made again, so that only the change is wrong.
variant() {
	python3 - "$1" "$2" "$3" <<'EOF'
import hashlib, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
nt = struct.unpack_from('<I', b, 72)[0]
tb = struct.unpack_from('<Q', b, 80)[0]
end = 128 + 4 * nt + tb
exec(sys.argv[3])
end2 = 128 + 4 * struct.unpack_from('<I', b, 72)[0] + \
    struct.unpack_from('<Q', b, 80)[0]
b[end2:end2 + 32] = hashlib.sha256(bytes(b[:end2])).digest()
open(sys.argv[2], 'wb').write(b)
EOF
}
variant "$QW" "$WORK/v2.kv" "b[8:12] = struct.pack('<I', 2)"
refuse "$Q" "version 2" "$WORK/v2.kv" 'unknown snapshot version'
cat "$QW" > "$WORK/long.kv"
printf 'x' >> "$WORK/long.kv"
refuse "$Q" "a byte after the last block" "$WORK/long.kv" 'bytes past the' 'File too large'
variant "$QW" "$WORK/kv-swap.kv" "b[88:104] = b[96:104] + b[88:96]"
refuse "$Q" "K and V row bytes in each other's place" "$WORK/kv-swap.kv" 'row'
variant "$QW" "$WORK/type-swap.kv" "b[48:56] = b[52:56] + b[48:52]"
refuse "$Q" "the K and V types in each other's place" "$WORK/type-swap.kv" 'row'
variant "$QW" "$WORK/shape-swap.kv" "b[56:64] = b[60:64] + b[56:60]"
refuse "$Q" "n_layer and n_head_kv in each other's place" "$WORK/shape-swap.kv" 'shape'
variant "$ST" "$WORK/text-first.kv" \
	"b[128:end] = b[128 + 4 * nt:end] + b[128:128 + 4 * nt]"
refuse "$S" "the text before the tokens" "$WORK/text-first.kv" 'token'
unmount_llmfs

# 4. A budget that cannot hold the snapshot: ENOSPC, nothing kept.
mount_llmfs --kv-mem 1k --name stories="$STORIES"
wait_loaded || fail "model loaded"
check "--kv-mem 1k holds no block" grep -qx 'context_ceiling 0' "$MNT/stories/kv"
refuse "$MNT/stories" "a snapshot over the KV budget" "$ST" 'budget' 'No space left'
check "... and no block is held" grep -qx 'used 0' "$MNT/stories/kv"
unmount_llmfs
finish
