#!/usr/bin/env bash
# Errors that must not mislead (Documentation/ABI.md): a failed generation
# is EIO on read with one errors line (a prompt over the context, a prompt
# of no tokens, NaN logits, Inf logits), never ENOSPC/EINVAL and never a
# "generate: generate:" line; after EFBIG nothing of the prompt is
# submitted; a write to an O_RDWR descriptor whose answer still streams
# is EBUSY and the answer goes on whole; placement refuses a NUL byte;
# truncate() of a 0444 file fails, even for root.
. "$(dirname "$0")/mount-lib.bash"
command -v python3 >/dev/null || skip "python3 is absent"
WRITE=$BUILD/bin/llmfs-write-model
[ -x "$WRITE" ] || skip "$WRITE is not built"

P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 24 > "$WORK/expect" 2>/dev/null

# A model whose output norm is NaN: every logit is NaN.
"$WRITE" -o "$WORK/nan.gguf" --arch llama --embd 32 --layers 1 --heads 2 \
	--kv-heads 1 --head-dim 16 --ff 32 --type f32 \
	--vocab-from "$STORIES" > /dev/null 2>&1 || fail "llmfs-write-model"
mount_llmfs --name nan="$WORK/nan.gguf"
wait_loaded
read -r off bytes < <(awk '$1 == "output_norm.weight" { print $5, $4 }' \
	"$MNT/nan/weights/index")
unmount_llmfs
cp "$WORK/nan.gguf" "$WORK/inf.gguf"
for v in nan inf; do
	python3 - "$WORK/$v.gguf" "$off" "$bytes" "$v" <<'EOF'
import struct, sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(int(sys.argv[2]))
    f.write(struct.pack('<f', float(sys.argv[4])) * (int(sys.argv[3]) // 4))
EOF
done

mount_llmfs --ctx 64 --name stories="$STORIES" --name qwen="$QWEN" \
	--name nan="$WORK/nan.gguf" --name inf="$WORK/inf.gguf"
wait_loaded || fail "models loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=24\n' > "$S/config"

# 1. A prompt longer than the context: EIO, one line, one prefix.
python3 -c "print('Once upon a time ' * 100)" > "$S/generate"
if cat "$S/generate" > /dev/null 2> "$WORK/err"; then
	fail "a prompt over the context fails the read"
else
	check "a prompt over the context is EIO ($(cat "$WORK/err"))" grep -q 'Input/output error' "$WORK/err"
fi
check "... with an errors line saying so" grep -q 'generate: the prompt is [0-9]* tokens, the context holds 64' "$S/errors"
check "no errors line reads 'generate: generate:'" bash -c "! grep -q 'generate: generate:' '$S/errors'"
python3 -c "print('Once upon a time ' * 100)" > "$S/chat"
if cat "$S/chat" > /dev/null 2> "$WORK/err"; then
	fail "chat over the context fails the read"
else
	check "chat over the context: EIO too ($(cat "$WORK/err"))" grep -q 'Input/output error' "$WORK/err"
fi
check "... and its line reads 'chat: the prompt is'" grep -q 'chat: the prompt is' "$S/errors"

# 2. A prompt of no tokens (a model without BOS): EIO.
printf '\n' > "$MNT/qwen/generate"
if cat "$MNT/qwen/generate" > /dev/null 2> "$WORK/err"; then
	fail "a prompt of no tokens fails the read"
else
	check "a prompt of no tokens is EIO ($(cat "$WORK/err"))" grep -q 'Input/output error' "$WORK/err"
fi
check "... with its errors line" grep -q 'generate: the prompt gives no tokens' "$MNT/qwen/errors"

# 3. NaN logits: EIO and a line, not a stream of '!!!!'.
printf '%s' "$P" > "$MNT/nan/generate"
if cat "$MNT/nan/generate" > "$WORK/nan-out" 2> "$WORK/err"; then
	fail "NaN logits fail the read"
else
	check "NaN logits: EIO ($(cat "$WORK/err"))" grep -q 'Input/output error' "$WORK/err"
fi
check "... nothing was generated" [ ! -s "$WORK/nan-out" ]
check "... and errors says why" grep -q 'logits are not finite' "$MNT/nan/errors"
# Inf logits (an output norm of +Inf): the same.
printf '%s' "$P" > "$MNT/inf/generate"
if cat "$MNT/inf/generate" > "$WORK/inf-out" 2> "$WORK/err"; then
	fail "Inf logits fail the read"
else
	check "Inf logits: EIO ($(cat "$WORK/err"))" grep -q 'Input/output error' "$WORK/err"
fi
check "... nothing was generated" [ ! -s "$WORK/inf-out" ]
check "... and errors says why" grep -q 'logits are not finite' "$MNT/inf/errors"

# 4. EFBIG: nothing of the prompt is submitted.
before=$(sed -n 's/^requests //p' "$S/stats")
python3 - "$S/generate" > "$WORK/efbig" 2>&1 <<'EOF'
import os, sys, errno
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b'Once upon a time ' * 1000)
try:
    while True:
        os.write(fd, b'x' * 65536)
except OSError as e:
    print("write:", errno.errorcode[e.errno])
os.close(fd)
EOF
check "a prompt over 4 MiB fails with EFBIG" grep -q 'write: EFBIG' "$WORK/efbig"
cat "$S/generate" > "$WORK/after-efbig"
check "after EFBIG nothing was submitted (the read is empty)" [ ! -s "$WORK/after-efbig" ]
check "... and stats counts no request" [ "$(sed -n 's/^requests //p' "$S/stats")" = "$before" ]
python3 - "$S/generate" > "$WORK/efbig2" 2>&1 <<'EOF'
import os, sys, errno
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    while True:
        os.write(fd, b'x' * 65536)
except OSError as e:
    print("write:", errno.errorcode[e.errno])
try:
    print("read:", os.read(fd, 100))
except OSError as e:
    print("read:", errno.errorcode[e.errno])
EOF
check "O_RDWR: the read after EFBIG is EFBIG, not EOF ($(tr '\n' ' ' < "$WORK/efbig2"))" grep -q 'read: EFBIG' "$WORK/efbig2"

# 5. A write to an O_RDWR descriptor mid-stream: EBUSY, the answer goes on.
python3 - "$S/generate" "$P" > "$WORK/midstream" 2> "$WORK/mid-err" <<'EOF'
import os, sys, errno
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, sys.argv[2].encode())
out = os.read(fd, 1)
try:
    os.write(fd, b'another prompt')
    sys.stderr.write("write: ok\n")
except OSError as e:
    sys.stderr.write("write: %s\n" % errno.errorcode[e.errno])
while True:
    b = os.read(fd, 4096)
    if not b:
        break
    out += b
sys.stdout.buffer.write(out)
EOF
check "a write mid-stream is EBUSY" grep -q 'write: EBUSY' "$WORK/mid-err"
same "$WORK/expect" "$WORK/midstream" "... and the answer goes on, whole"
check "... with an errors line" grep -q 'a write while the answer streams' "$S/errors"
python3 - "$S/generate" "$P" > "$WORK/twice" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for _ in range(2):
    os.write(fd, sys.argv[2].encode())
    while True:
        b = os.read(fd, 4096)
        if not b:
            break
        sys.stdout.buffer.write(b)
EOF
cat "$WORK/expect" "$WORK/expect" > "$WORK/expect2"
same "$WORK/expect2" "$WORK/twice" "after EOF, the same descriptor takes a new prompt"

# 6. placement: a NUL byte is EINVAL.
if printf 'auto\0garbage\n' > "$S/placement" 2> "$WORK/err"; then
	fail "placement refuses a NUL byte"
else
	check "placement with a NUL byte is EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "... with an errors line" grep -q 'placement: a NUL byte' "$S/errors"

# 7. truncate() of a 0444 file fails, even for root.
for f in info stats errors; do
	check "truncate $f (0444) fails" bash -c "! truncate -s 0 '$S/$f' 2>/dev/null"
	check "truncate(2) of $f fails" bash -c "! python3 -c 'import os, sys; os.truncate(sys.argv[1], 0)' '$S/$f' 2>/dev/null"
done
check "truncate generate (0666) works (the shell's >)" truncate -s 0 "$S/generate"
unmount_llmfs
finish
