#!/usr/bin/env python3
"""Helpers of tests/fs/remote.sh, which drive a real llama-server.

  refuse PORTFILE           hold a loopback port that refuses connections
                           (bound, never listened on); its number goes
                           to PORTFILE
  completion URL N PROMPT  llama-server's own /completion answer (greedy;
                           EXTRA, a JSON object, adds request fields)
  chat URL N PROMPT        /v1/chat/completions, not streamed (greedy)
  tokenize URL TEXT        /tokenize ids, as llmfs prints them
  busy URL                 how many of the server's slots are processing
  predicted URL            the server's tokens_predicted_total (its
                           /metrics: every finished or cancelled request's
                           generated tokens)
  stall PORTFILE           a server that accepts and never answers
  read FILE PROMPT [PID]   write PROMPT to FILE, read to the end; with PID,
                           kill -9 it after the first bytes; prints
                           "<bytes> <EOF|errno name> <seconds>", and the
                           text read into FILE.got in the working directory
                           named by OUT
  kill-reader FILE PROMPT  read the first bytes, say how many, then
                           kill -9 itself

KEY in the environment: the API key to send (Authorization: Bearer).
"""
import errno
import json
import os
import signal
import socket
import sys
import time
import urllib.request


def call(url, body=None):
    headers = {"Content-Type": "application/json"}
    if os.environ.get("KEY"):
        headers["Authorization"] = "Bearer " + os.environ["KEY"]
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "refuse":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        with open(args[0] + ".tmp", "w") as f:
            f.write(str(s.getsockname()[1]))
        os.rename(args[0] + ".tmp", args[0])
        signal.pause()
    elif cmd == "completion":
        body = {"prompt": args[2], "n_predict": int(args[1]),
                "temperature": 0, "seed": 1}
        body.update(json.loads(os.environ.get("EXTRA", "{}")))
        d = call(args[0] + "/completion", body)
        sys.stdout.write(d["content"])
    elif cmd == "chat":
        d = call(args[0] + "/v1/chat/completions", {
            "messages": [{"role": "user", "content": args[2]}],
            "max_tokens": int(args[1]), "temperature": 0, "seed": 1})
        sys.stdout.write(d["choices"][0]["message"]["content"])
    elif cmd == "tokenize":
        d = call(args[0] + "/tokenize", {
            "content": args[1], "add_special": True,
            "parse_special": True})
        print(" ".join(str(t) for t in d["tokens"]))
    elif cmd == "busy":
        print(sum(1 for s in call(args[0] + "/slots") if s["is_processing"]))
    elif cmd == "predicted":
        req = urllib.request.Request(args[0] + "/metrics", headers={
            "Authorization": "Bearer " + os.environ.get("KEY", "")})
        with urllib.request.urlopen(req, timeout=60) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("llamacpp:tokens_predicted_total "):
                    print(int(float(line.split()[1])))
    elif cmd == "stall":
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        with open(args[0] + ".tmp", "w") as f:
            f.write(str(srv.getsockname()[1]))
        os.rename(args[0] + ".tmp", args[0])
        held = []
        while True:
            c, _ = srv.accept()
            held.append(c)          # read nothing, answer nothing
    elif cmd in ("read", "kill-reader"):
        fd = os.open(args[0], os.O_RDWR)
        os.write(fd, args[1].encode())
        got, end, t0 = 0, "EOF", time.monotonic()
        text = b""
        try:
            while True:
                b = os.read(fd, 4096)
                if not b:
                    break
                got += len(b)
                text += b
                if cmd == "kill-reader":
                    print(got, "killed", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                if len(args) > 2 and args[2]:
                    os.kill(int(args[2]), signal.SIGKILL)
                    args[2] = ""
        except OSError as e:
            end = errno.errorcode.get(e.errno, str(e.errno))
        os.close(fd)
        if os.environ.get("OUT"):
            with open(os.environ["OUT"], "wb") as f:
                f.write(text)
        print(got, end, "%.2f" % (time.monotonic() - t0))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
