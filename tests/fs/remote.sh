#!/usr/bin/env bash
# Remote models against a real llama-server (built from the pinned
# llama.cpp source by tools/build-llama.sh, cached outside the clone),
# serving a shared model on a loopback port: greedy text through the remote
# directory = llama-server's own /completion answer = the local engine's
# text on the same file (tiny-qwen2-bpe152k-legacyq: llama.cpp's batched
# and one-token paths give it bit-identical logits); chat = the server's
# /v1/chat/completions; tokenize = /tokenize = the local tokenizer; the
# files a remote model has and has not; sessions; two generations at once;
# a reader that goes away frees the server's slot; an API key that no file
# shows; the server killed mid-stream (the reader gets what arrived, then
# EIO, an errors line, the mount stays healthy); a refused connection
# (EIO); a server that never answers (ETIMEDOUT after timeout=S).
. "$(dirname "$0")/mount-lib.bash"

command -v python3 >/dev/null || skip "python3 is absent"
# make deps installs what the build needs (cmake): a build that cannot
# run is a failure here, not a skip.
if ! LLAMA_BIN=$(tools/build-llama.sh llama-server 2>"$WORK/build.log"); then
	echo "not ok - llama-server cannot be built (tools/build-llama.sh):"
	tail -n 20 "$WORK/build.log"
	exit 1
fi
SERVER=$LLAMA_BIN/llama-server
CLIENT="python3 tests/fs/remote_client.py"
MODEL=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf
[ -f "$MODEL" ] || skip "$MODEL is absent"
KEY=llmfs-test-key-$$-$RANDOM
echo "$KEY" > "$WORK/key"
SPIDS=()

stop_servers() {
	for p in "${SPIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${SPIDS[@]}"; do wait "$p" 2>/dev/null; done 2>/dev/null
	SPIDS=()
}
trap 'stop_servers; cleanup' EXIT

# start_server NAME [llama-server options]: on a port the kernel picks
# (--port 0; the log says which: LAST_PORT), up when /health says ok (over
# https, unverified, when SCHEME=https).
server_port() {
	LAST_PORT=$(sed -n 's|.*listening on https\{0,1\}://127.0.0.1:\([0-9]*\).*|\1|p' \
		"$WORK/server-$1.log" | head -n 1)
	[ -n "$LAST_PORT" ]
}
server_up() {
	{ server_port "$1" && python3 -c "import ssl, urllib.request as u; u.urlopen('${SCHEME:-http}://127.0.0.1:$LAST_PORT/health', timeout=5, context=ssl._create_unverified_context())" \
		2>/dev/null; } || gone "$LAST_SPID"
}
start_server() {
	local name=$1
	shift
	"$SERVER" -m "$MODEL" --host 127.0.0.1 --port 0 -np 2 -c 8192 \
		-t 1 --no-webui "$@" >>"$WORK/server-$name.log" 2>&1 &
	SPIDS+=($!)
	LAST_SPID=$!
	if wait_for 300 server_up "$name" && ! gone "$LAST_SPID"; then
		return 0
	fi
	echo "llama-server $name did not come up:"
	tail -n 20 "$WORK/server-$name.log"
	exit 1
}

# A port that refuses connections: bound, never listened on, held by the
# client until the end (no other process can take it meanwhile).
$CLIENT refuse "$WORK/dead-port" &
SPIDS+=($!)
wait_for 60 test -s "$WORK/dead-port" || fail "a refusing port"
DEADPORT=$(cat "$WORK/dead-port")
start_server main --api-key "$KEY" --metrics
PORT=$LAST_PORT
URL=http://127.0.0.1:$PORT
start_server victim
VPORT=$LAST_PORT
VPID=$LAST_SPID
disown "$VPID"   # killed on purpose below: no "Killed" notice from bash
# https: a self-signed certificate, which curl must refuse unless ca_file
# names it.
TPORT=
if ! "$SERVER" --help 2>&1 | grep -q -- --ssl-cert-file; then
	fail "llama-server was built without TLS (libssl-dev, make deps): the https checks cannot run"
elif openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/tls.key" \
		-out "$WORK/tls.crt" -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1; then
	SCHEME=https start_server tls --ssl-key-file "$WORK/tls.key" \
		--ssl-cert-file "$WORK/tls.crt"
	TPORT=$LAST_PORT
else
	fail "openssl made a self-signed certificate"
fi
$CLIENT stall "$WORK/stall-port" &
SPIDS+=($!)
wait_for 60 test -s "$WORK/stall-port" || fail "a stalling server"
STALLPORT=$(cat "$WORK/stall-port")

N=48
P='Once upon a time, there was a little girl named Lily.'
C='What is the capital of France?'
KEY=$KEY $CLIENT completion "$URL" $N "$P" > "$WORK/server"
check "llama-server's /completion gave a text" [ -s "$WORK/server" ]
"$RUN" -m "$MODEL" -p "$P" --temp 0 -n $N > "$WORK/local-run" 2>/dev/null

mount_llmfs --remote "q=$URL,key_file=$WORK/key,timeout=5" \
	--remote "nokey=$URL,timeout=5" \
	--remote "victim=http://127.0.0.1:$VPORT,timeout=5" \
	--remote "dead=http://127.0.0.1:$DEADPORT,timeout=2" \
	--remote "stall=http://127.0.0.1:$STALLPORT,timeout=2" \
	${TPORT:+--remote "tls=https://127.0.0.1:$TPORT,timeout=5"} \
	${TPORT:+--remote "tlsca=https://127.0.0.1:$TPORT,ca_file=$WORK/tls.crt,timeout=5"} \
	--name local="$MODEL"
Q=$MNT/q
q_and_local_ready() {
	grep -q '^q .* ready' "$MNT/models" &&
		grep -q '^local .* ready' "$MNT/models"
}
wait_for 120 q_and_local_ready
greedy=$(printf 'temperature=0\nmax_tokens=%d\nseed=1\n' $N)
for m in q nokey victim dead stall local ${TPORT:+tls tlsca}; do
	echo "$greedy" > "$MNT/$m/config"
done

# 1. The directory: what a remote model has, and what it has not.
ls "$Q" > "$WORK/ls"
check "a remote model has generate chat config info stats tokenize errors sessions" \
	[ "$(sort "$WORK/ls" | tr '\n' ' ')" = "chat config errors generate info sessions stats tokenize " ]
check "placement, kv and weights/ are absent" \
	[ ! -e "$Q/placement" -a ! -e "$Q/kv" -a ! -e "$Q/weights" ]
check "info says backend remote URL" grep -qx "backend remote $URL" "$Q/info"
check "/models lists it as remote and ready" grep -q '^q remote .* ready ' "$MNT/models"

# 2. Greedy text = llama-server's own answer = the local engine's.
printf '%s' "$P" > "$Q/generate"
cat "$Q/generate" > "$WORK/remote"
same "$WORK/server" "$WORK/remote" "remote generate = llama-server's /completion"
same "$WORK/local-run" "$WORK/remote" "remote generate = llmfs-run on the same file"
printf '%s' "$P" > "$MNT/local/generate"
cat "$MNT/local/generate" > "$WORK/local-mount"
same "$WORK/local-mount" "$WORK/remote" "remote generate = the local model's generate"
exec 3<>"$Q/generate"
printf '%s' "$P" >&3
cat <&3 > "$WORK/rw"
exec 3>&-
same "$WORK/server" "$WORK/rw" "one read-write descriptor = the same text"
check "stats count the tokens the client saw" \
	grep -qx "tokens_out $((2 * N))" "$Q/stats"
check "stats have a ttft" awk '$1 == "ttft_ms_last" && $2 > 0 {f=1} END {exit !f}' "$Q/stats"

# stop strings are the server's too: the same cut as /completion's.
stop=$(head -c 30 "$WORK/server" | tail -c 4)
printf 'stop=%s\n' "$stop" > "$Q/config"
printf '%s' "$P" > "$Q/generate"
cat "$Q/generate" > "$WORK/stopped"
EXTRA=$(python3 -c 'import json, sys; print(json.dumps({"stop": [sys.argv[1]]}))' "$stop") \
	KEY=$KEY $CLIENT completion "$URL" $N "$P" > "$WORK/server-stop"
check "stop=... cuts the answer (${#stop} chars)" [ "$(wc -c < "$WORK/stopped")" -lt 30 ]
same "$WORK/server-stop" "$WORK/stopped" "stop=... = /completion with the same stop"
echo "$greedy" > "$Q/config"
printf 'stop=\n' > "$Q/config"

# 3. chat (the server applies its template), tokenize.
KEY=$KEY $CLIENT chat "$URL" $N "$C" > "$WORK/server-chat"
printf '%s' "$C" > "$Q/chat"
cat "$Q/chat" > "$WORK/chat"
same "$WORK/server-chat" "$WORK/chat" "remote chat = the server's /v1/chat/completions"
KEY=$KEY $CLIENT tokenize "$URL" "$P" > "$WORK/server-tok"
printf '%s' "$P" > "$Q/tokenize"
cat "$Q/tokenize" > "$WORK/tok"
printf '%s' "$P" > "$MNT/local/tokenize"
cat "$MNT/local/tokenize" > "$WORK/local-tok"
same "$WORK/server-tok" "$WORK/tok" "remote tokenize = the server's /tokenize"
same "$WORK/local-tok" "$WORK/tok" "remote tokenize = the local tokenizer"

# 4. Sessions: their own config, history; two generations at once.
n=$(cat "$Q/sessions/new")
echo 'max_tokens=5' > "$Q/sessions/$n/config"
printf '%s' "$P" > "$Q/sessions/$n/generate"
setsid cat "$Q/sessions/$n/generate" > "$WORK/s5"
KEY=$KEY $CLIENT completion "$URL" 5 "$P" > "$WORK/server5"
same "$WORK/server5" "$WORK/s5" "sessions/N/config max_tokens=5 = /completion n_predict 5"
check "sessions/N/history has the prompt and the answer" \
	grep -qF -- "$(cat "$WORK/s5")" "$Q/sessions/$n/history"
check "sessions/N/kv is absent on a remote model" \
	[ "$(ls "$Q/sessions/$n" | tr '\n' ' ')" = "chat config generate history " -a ! -e "$Q/sessions/$n/kv" ]
P2='The sky is'
KEY=$KEY $CLIENT completion "$URL" 400 "$P" > "$WORK/long1"
KEY=$KEY $CLIENT completion "$URL" 400 "$P2" > "$WORK/long2"
a=$(cat "$Q/sessions/new")
b=$(cat "$Q/sessions/new")
echo 'max_tokens=400' > "$Q/sessions/$a/config"
echo 'max_tokens=400' > "$Q/sessions/$b/config"
printf '%s' "$P" > "$Q/sessions/$a/generate"
printf '%s' "$P2" > "$Q/sessions/$b/generate"
cat "$Q/sessions/$a/generate" > "$WORK/c1" &
c1=$!
cat "$Q/sessions/$b/generate" > "$WORK/c2" &
c2=$!
check "two sessions at once: both active" \
	wait_for 60 grep -qx 'active 2' "$Q/stats"
wait $c1 $c2
same "$WORK/long1" "$WORK/c1" "two sessions at once: the first = its /completion"
same "$WORK/long2" "$WORK/c2" "two sessions at once: the second = its /completion"

# 5. A reader that goes away ends the request: the server stops generating
# it (its tokens_predicted_total grows by less than for the whole answer).
echo 'max_tokens=4000' > "$Q/config"
busy_is() { [ "$(KEY=$KEY $CLIENT busy "$URL")" = "$1" ]; }
predicted() { KEY=$KEY $CLIENT predicted "$URL"; }
p0=$(predicted)
$CLIENT read "$Q/generate" "$P" > "$WORK/whole" &
r=$!
check "the control: a reader that stays keeps a slot busy" wait_for 60 busy_is 1
wait $r
wait_for 120 busy_is 0
whole=$(($(predicted) - p0))
check "... and gets the whole answer ($(cat "$WORK/whole"), $whole tokens)" \
	[ "$whole" -gt 100 ]
p1=$(predicted)
r=$($CLIENT kill-reader "$Q/generate" "$P" 2>/dev/null)
check "a reader killed mid-stream ($r): the server's slots go idle" \
	wait_for 120 busy_is 0
cut=$(($(predicted) - p1))
check "... having generated $cut of the $whole tokens (the request ended)" \
	[ "$cut" -lt "$whole" ]
check "stats count it cancelled" grep -qx 'cancelled 1' "$Q/stats"
echo "$greedy" > "$Q/config"

# 6. The API key: sent from key_file, shown nowhere; without it, HTTP 401.
check "info says a key is set" grep -qx 'api_key set' "$Q/info"
leak=$(grep -l -F -- "$KEY" "$MNT/models" "$MNT/status" "$MNT/metrics" \
	"$Q/info" "$Q/stats" "$Q/errors" "$Q/config" 2>/dev/null)
check "no file of the mount shows the key" [ -z "$leak" ]
r=$($CLIENT read "$MNT/nokey/generate" "$P")
check "no key: the read fails with EIO ($r)" [ "${r#* }" != "${r#*EIO}" ]
check "no key: an errors line with the HTTP status" grep -q 'HTTP 401' "$MNT/nokey/errors"

# 7. The server killed mid-stream: what arrived, then EIO.
echo 'max_tokens=4000' > "$MNT/victim/config"
r=$(OUT=$WORK/cut $CLIENT read "$MNT/victim/generate" "$P" "$VPID")
set -- $r
check "server killed mid-stream: the reader got text first ($1 bytes)" [ "$1" -gt 0 ]
KEY=$KEY $CLIENT completion "$URL" 4000 "$P" > "$WORK/long4000"
check "server killed mid-stream: what arrived is the answer's start" \
	cmp -s -n "$1" "$WORK/cut" "$WORK/long4000"
check "server killed mid-stream: then EIO ($2)" [ "$2" = EIO ]
check "server killed mid-stream: an errors line" grep -q 'generate: ' "$MNT/victim/errors"
sed 's/^/# /' "$MNT/victim/errors" | tail -n 1

# 8. Nothing listening: EIO; a server that never answers: ETIMEDOUT.
r=$($CLIENT read "$MNT/dead/generate" "$P")
check "refused connection: EIO ($r)" [ "$(echo "$r" | cut -d' ' -f2)" = EIO ]
check "refused connection: an errors line from curl" \
	grep -qi 'connect' "$MNT/dead/errors"
printf 'a\xffb' > "$MNT/dead/generate"
cat "$MNT/dead/generate" 2> "$WORK/utf8.err"
check "a prompt that is not UTF-8: EINVAL ($(cat "$WORK/utf8.err"))" \
	grep -q 'Invalid argument' "$WORK/utf8.err"
check "a prompt that is not UTF-8: an errors line" \
	grep -q 'prompt is not UTF-8' "$MNT/dead/errors"
r=$($CLIENT read "$MNT/stall/generate" "$P")
set -- $r
check "a server that never answers: ETIMEDOUT ($r)" [ "$2" = ETIMEDOUT ]
check "after timeout=2 s, not before ($3 s)" awk -v t="$3" 'BEGIN {exit !(t >= 1.5 && t < 120)}'
check "stalled: an errors line" grep -qi 'timeout\|timed out' "$MNT/stall/errors"

# 9. https is verified: a certificate no CA vouches for is refused, the
# one ca_file names is taken.
if [ -n "$TPORT" ]; then
	r=$($CLIENT read "$MNT/tls/generate" "$P")
	check "https, unknown certificate: EIO ($r)" [ "$(echo "$r" | cut -d' ' -f2)" = EIO ]
	check "https, unknown certificate: curl's reason in errors" \
		grep -qi 'certificate' "$MNT/tls/errors"
	printf '%s' "$P" > "$MNT/tlsca/generate"
	cat "$MNT/tlsca/generate" > "$WORK/tls-text"
	same "$WORK/server" "$WORK/tls-text" "https with ca_file = the same text"
fi

# 10. The mount is healthy after all that.
printf '%s' "$P" > "$Q/generate"
cat "$Q/generate" > "$WORK/after"
same "$WORK/server" "$WORK/after" "the mount still answers after the faults"
check "the metrics have the remote model" \
	grep -q 'llmfs_requests_total{model="q"}' "$MNT/metrics"
unmount_llmfs

# 11. An answer cut short by the unmount is EIO, as for a local model (one
# loop ends every provider's streams: fs.md, "Provider interface"), never
# an EOF that would pass for the whole answer.
mount_llmfs --remote "stall=http://127.0.0.1:$STALLPORT,timeout=60"
$CLIENT read "$MNT/stall/generate" "$P" > "$WORK/cut" &
reader=$!
submitted() { grep -qx 'requests 1' "$MNT/stall/stats"; }
check "the stalled request is submitted" wait_for 30 submitted
kill -TERM "$PID"
wait_for 60 gone $reader || kill -9 $reader
wait $reader
check "SIGTERM mid-request: the reader gets EIO ($(cat "$WORK/cut"))" \
	[ "$(cut -d' ' -f2 "$WORK/cut")" = EIO ]
wait_for 60 gone "$PID" || kill -9 "$PID"
wait "$PID"
rc=$?
PID=
check "the daemon exits 0 after SIGTERM (got $rc)" [ "$rc" = 0 ]
stop_servers
finish
