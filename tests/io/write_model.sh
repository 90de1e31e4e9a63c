#!/usr/bin/env bash
# llmfs-write-model: each architecture's tensors as llama.cpp names and
# shapes them, seeded determinism, tokenizer keys copied from --vocab-from,
# and F16 and Q8_0 bytes equal to what ggml's own converters (the reference
# build's libggml-base.so) make of the same F32 weights.
set -u
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
REF=${LLAMA_REF_DIR:-ref}
bin=$BUILD/bin/llmfs-write-model
inspect=$BUILD/bin/llmfs-inspect
[ -x "$bin" ] && [ -x "$inspect" ] || { echo "write_model.sh: tools not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "write_model.sh: $*"; exit 1; }
dims="--embd 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ff 96"

for arch in llama qwen2 qwen3 qwen3moe; do
	extra=""
	[ $arch = qwen3moe ] && extra="--experts 4 --experts-used 2"
	d=$dims
	[ $arch = qwen2 ] && d="--embd 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 --ff 96"
	"$bin" -o "$tmp/$arch.gguf" --arch $arch $d $extra --type q8_0 >/dev/null ||
		fail "$arch: exit $?"
	"$inspect" "$tmp/$arch.gguf" >"$tmp/$arch.txt" || fail "$arch: unreadable"
	grep -q "^general.name  string  \"random $arch" "$tmp/$arch.txt" ||
		fail "$arch: general.name"
	grep -Eq "^token_embd.weight +q8_0 +\[64, 354\]" "$tmp/$arch.txt" ||
		fail "$arch: token_embd"
	grep -Eq "^output.weight +q8_0 +\[64, 354\]" "$tmp/$arch.txt" ||
		fail "$arch: output"
	grep -Eq "^blk.1.attn_norm.weight +f32 +\[64\]" "$tmp/$arch.txt" ||
		fail "$arch: attn_norm"
done
grep -Eq "^blk.0.attn_q.bias +f32 +\[64\]" "$tmp/qwen2.txt" || fail "qwen2 bias"
grep -Eq "^blk.0.attn_k.weight +q8_0 +\[64, 32\]" "$tmp/qwen2.txt" || fail "qwen2 k"
grep -Eq "^blk.0.attn_q.weight +q8_0 +\[64, 128\]" "$tmp/qwen3.txt" || fail "qwen3 q"
grep -Eq "^blk.0.attn_output.weight +q8_0 +\[128, 64\]" "$tmp/qwen3.txt" || fail "qwen3 o"
grep -Eq "^blk.0.attn_k_norm.weight +f32 +\[32\]" "$tmp/qwen3.txt" || fail "qwen3 k_norm"
grep -Eq "^blk.0.ffn_down.weight +q8_0 +\[96, 64\]" "$tmp/llama.txt" || fail "llama ffn_down"
grep -Eq "^blk.1.ffn_gate_inp.weight +f32 +\[64, 4\]" "$tmp/qwen3moe.txt" || fail "moe router"
grep -Eq "^blk.1.ffn_down_exps.weight +q8_0 +\[96, 64, 4\]" "$tmp/qwen3moe.txt" || fail "moe down"
grep -q "^qwen3moe.expert_used_count  uint32  2$" "$tmp/qwen3moe.txt" || fail "moe keys"
grep -q "attn_q.bias" "$tmp/qwen3.txt" && fail "qwen3 has biases"

# seeded: the same seed gives the same bytes, another seed others
"$bin" -o "$tmp/a.gguf" --arch llama $dims --type f16 --seed 5 --tied >/dev/null &&
"$bin" -o "$tmp/b.gguf" --arch llama $dims --type f16 --seed 5 --tied >/dev/null &&
"$bin" -o "$tmp/c.gguf" --arch llama $dims --type f16 --seed 6 --tied >/dev/null ||
	fail "f16 writes"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || fail "same seed, different files"
cmp -s "$tmp/a.gguf" "$tmp/c.gguf" && fail "different seeds, same file"
"$inspect" "$tmp/a.gguf" | grep -q "^output.weight" && fail "--tied wrote output.weight"

# refusals: one line, exit 2
"$bin" -o "$tmp/x.gguf" --arch llama $dims --type q4_0 2>"$tmp/err" && fail "q4_0 accepted"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "usage error not one line"
"$bin" -o "$tmp/x.gguf" --arch qwen3moe $dims --type f32 2>/dev/null && fail "moe without experts"
"$bin" -o "$tmp/x.gguf" --arch llama --embd 48 --layers 1 --heads 4 --kv-heads 2 \
	--head-dim 12 --ff 96 --type q8_0 2>/dev/null && fail "q8_0 with 48-wide rows"

vocab=$SHARED/vocab/ggml-vocab-gpt-2.gguf
[ -r "$vocab" ] || { echo "write_model.sh: no $vocab (set SHARED)"; exit 77; }
"$bin" -o "$tmp/v.gguf" --arch qwen2 --embd 32 --layers 1 --heads 2 \
	--kv-heads 1 --head-dim 16 --ff 64 --type f32 --vocab-from "$vocab" \
	>/dev/null || fail "--vocab-from"
"$inspect" "$vocab" | grep '^tokenizer\.' | sort >"$tmp/want"
"$inspect" "$tmp/v.gguf" | grep '^tokenizer\.' | sort >"$tmp/got"
[ -s "$tmp/want" ] || fail "no tokenizer keys in $vocab"
cmp -s "$tmp/want" "$tmp/got" || fail "tokenizer keys differ: $(diff "$tmp/want" "$tmp/got" | head -3)"
grep -Eq "^token_embd.weight +f32 +\[32, 50257\]" <("$inspect" "$tmp/v.gguf") ||
	fail "vocab size from --vocab-from"

# make check installs the reference (make ref) and python3 (make deps):
# without them the comparison cannot run, and that is not a pass.
lib=$REF/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so
command -v python3 >/dev/null || fail "python3 is absent (make deps)"
[ -r "$lib" ] || fail "no $lib (make ref): the ggml comparison cannot run"
for t in f32 f16 q8_0; do
	"$bin" -o "$tmp/twin-$t.gguf" --arch qwen3 $dims --type $t --seed 42 \
		>/dev/null || fail "twin $t"
done
python3 - "$lib" "$tmp/twin-f32.gguf" "$tmp/twin-f16.gguf" "$tmp/twin-q8_0.gguf" <<'PY' || fail "ggml comparison"
import ctypes, struct, sys
lib = ctypes.CDLL(sys.argv[1])
lib.ggml_quantize_chunk.restype = ctypes.c_size_t
lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p,
    ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
    ctypes.c_void_p]
lib.ggml_fp32_to_fp16_row.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
    ctypes.c_int64]

def tensors(path):
    d = open(path, 'rb').read()
    p = 4
    def rd(f):
        nonlocal p
        v = struct.unpack_from('<' + f, d, p)[0]
        p += struct.calcsize('<' + f)
        return v
    def rs():
        nonlocal p
        n = rd('Q')
        p += n
        return d[p - n:p]
    sz = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?',
          10: 'Q', 11: 'q', 12: 'd'}
    def rv(t):
        if t == 8:
            return rs()
        if t == 9:
            et = rd('I')
            return [rv(et) for _ in range(rd('Q'))]
        return rd(sz[t])
    rd('I'); nt = rd('Q'); nkv = rd('Q')
    for _ in range(nkv):
        rs(); rv(rd('I'))
    ts = []
    for _ in range(nt):
        name = rs().decode(); nd = rd('I')
        ne = [rd('q') for _ in range(nd)]
        ts.append((name, ne, rd('I'), rd('Q')))
    base = (p + 31) // 32 * 32
    return {n: (ne, ty, d[base + off:]) for n, ne, ty, off in ts}

f32, f16, q8 = (tensors(sys.argv[i]) for i in (2, 3, 4))
checked = 0
for name, (ne, ty, data) in f32.items():
    n = 1
    for x in ne:
        n *= x
    src = ctypes.create_string_buffer(data[:4 * n], 4 * n)
    if f16[name][1] == 1:
        out = ctypes.create_string_buffer(2 * n)
        lib.ggml_fp32_to_fp16_row(src, out, n)
        assert out.raw == f16[name][2][:2 * n], name + ": f16 differs"
        checked += 1
    if q8[name][1] == 8:
        out = ctypes.create_string_buffer(n // 32 * 34)
        size = lib.ggml_quantize_chunk(8, src, out, 0, n // ne[0], ne[0], None)
        assert out.raw == q8[name][2][:size], name + ": q8_0 differs"
        checked += 1
assert checked >= 30, checked
print("write_model.sh: %d tensors as ggml converts them" % checked)
PY
echo "write_model.sh: ok"
