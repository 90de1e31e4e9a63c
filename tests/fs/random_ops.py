#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Randomized operation test of a mounted llmfs against a reference model.

As mountpoint-s3 tests its file system against a simple model of its
semantics, this drives a real mount with seeded sequences of operations,
issued by real processes of two uids, each in its own process session,
and checks every result against what Documentation/ABI.md predicts:

  * who gets which answer of generate, chat and tokenize: the shell idiom
    (a write-only prompt is for the next read of the same process session
    and uid, once), O_RDWR,
    sessions/N (its creator's alone; a conversation: each answer continues
    the text of the turns before), a new prompt replacing an unread one;
  * what config holds: the model's (the mount owner's to write; others get
    EACCES), a session's overrides, all or nothing on EINVAL;
  * which errors: EACCES, EINVAL, ENOENT after rmdir, EMFILE past
    --max-sessions, EBUSY for a write while an answer streams, EPERM;
  * one turn at a time per session: two descriptors submitting to one
    sessions/N/generate at once run one after the other (either order),
    the second continuing after the first's answer; a snapshot restored
    while a turn runs is EBUSY and changes nothing; and after any sequence
    of these, the text of the session's history evaluated from scratch
    gives the session's next answer;
  * kv names a process session only to its own uid; history lists the
    exchanges of a session; readers killed mid-answer leave the rest
    untouched.

Answers are greedy (temperature 0), so each (prompt, max_tokens, chat)
has one answer, taken from llmfs-run on the same model (the oracle).

    random_ops.py --mount MNT/stories --run build/bin/llmfs-run \
        --model stories260K.gguf --seeds 1-8 --steps 60
    random_ops.py ... --seconds 600     # make stress: seeds until time is up

A failure prints the seed, the operations up to it and a command line
that replays exactly that seed.
"""
import argparse
import base64
import errno
import json
import os
import random
import select
import signal
import subprocess
import sys
import time

OWNER_UID = 0
UIDS = [0, 65534]
PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went\n",
           "One day, a big bear"]
MAX_TOKENS = [4, 8, 16]
MAX_SESSIONS = 3          # the mount's --max-sessions
OP_TIMEOUT = 60.0

# ---- workers: real processes, one uid and one process session each ------

WORKER = r'''
import base64, errno, json, os, signal, sys, time
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
def readall(fd):
    out = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b
def run(c):
    op, path = c["op"], c.get("path")
    data = base64.b64decode(c.get("data", ""))
    snap = base64.b64decode(c.get("snap", ""))
    r = {"err": None, "data": ""}
    fd = -1
    try:
        if op == "wo":
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.write(fd, data)
            os.close(fd); fd = -1
        elif op == "ro":
            fd = os.open(path, os.O_RDONLY)
            r["data"] = base64.b64encode(readall(fd)).decode()
        elif op == "rw":
            fd = os.open(path, os.O_RDWR)
            os.write(fd, data)
            r["data"] = base64.b64encode(readall(fd)).decode()
        elif op == "midstream":
            fd = os.open(path, os.O_RDWR)
            os.write(fd, data)
            first = os.read(fd, 1)
            try:
                os.write(fd, b"another")
                r["second"] = None
            except OSError as e:
                r["second"] = name(e)
            r["data"] = base64.b64encode(first + readall(fd)).decode()
        elif op == "turn_restore":
            # a turn whose reader read one byte runs on (--stream-buffer),
            # and a snapshot is written to the session meanwhile
            fd = os.open(path, os.O_RDWR)
            os.write(fd, data)
            first = os.read(fd, 1)
            kv = os.open(c["kv"], os.O_WRONLY)
            try:
                os.write(kv, snap)
                r["restore"] = None
            except OSError as e:
                r["restore"] = name(e)
            try:
                os.close(kv)
            except OSError:
                pass
            r["data"] = base64.b64encode(first + readall(fd)).decode()
        elif op == "rmdir":
            os.rmdir(path)
        elif op == "kill_reader":
            pid = os.fork()
            if pid == 0:
                f = os.open(path, os.O_RDWR)
                os.write(f, data)
                os.read(f, 1)
                time.sleep(30)
                os._exit(0)
            time.sleep(0.02)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        elif op == "sid":
            r["data"] = base64.b64encode(str(os.getsid(0)).encode()).decode()
    except OSError as e:
        r["err"] = name(e)
    finally:
        if fd >= 0:
            os.close(fd)
    return r
for line in sys.stdin:
    sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
    sys.stdout.flush()
'''


class Worker:
    def __init__(self, uid, python):
        cmd = [python, "-c", WORKER]
        if uid != 0:
            cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
                   "--clear-groups"] + cmd
        self.uid = uid
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  start_new_session=True, text=True)
        self.sid = int(self.call({"op": "sid"})["data"])
        self.busy = False

    def send(self, c):
        if "data" in c:
            c = dict(c, data=base64.b64encode(c["data"].encode()).decode())
        if "snap" in c:
            c = dict(c, snap=base64.b64encode(c["snap"]).decode())
        self.p.stdin.write(json.dumps(c) + "\n")
        self.p.stdin.flush()

    def recv(self):
        r, _, _ = select.select([self.p.stdout], [], [], OP_TIMEOUT)
        if not r:
            raise Failure("no answer in %d s (a hang)" % OP_TIMEOUT)
        line = self.p.stdout.readline()
        if not line:
            raise Failure("worker of uid %d died" % self.uid)
        r = json.loads(line)
        r["data"] = base64.b64decode(r["data"]).decode("utf-8", "replace")
        return r

    def call(self, c):
        self.send(c)
        return self.recv()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


class Failure(Exception):
    pass


# ---- the oracle: llmfs-run, greedy ---------------------------------------

class Oracle:
    def __init__(self, run, model):
        self.run, self.model, self.memo = run, model, {}

    def tokens(self, mnt, prompt):
        """tokenize's answer, as the driver itself reads it once (the ids
        of llama.cpp's tokenizer are checked by generate.sh)."""
        key = ("tokenize", prompt)
        if key not in self.memo:
            fd = os.open(os.path.join(mnt, "tokenize"), os.O_RDWR)
            try:
                os.write(fd, prompt.encode())
                out = b""
                while True:
                    b = os.read(fd, 65536)
                    if not b:
                        break
                    out += b
            finally:
                os.close(fd)
            text = out.decode()
            if not text.endswith("\n") or \
                    not all(x.isdigit() for x in text.split()):
                raise Failure("tokenize gave %r" % text)
            self.memo[key] = text
        return self.memo[key]

    def answer(self, prompt, max_tokens, chat):
        # ABI.md: one trailing newline of the prompt is echo's, dropped.
        if prompt.endswith("\n"):
            prompt = prompt[:-1]
        key = (prompt, max_tokens, chat)
        if key not in self.memo:
            cmd = [self.run, "-m", self.model, "-p", prompt, "--temp", "0",
                   "-n", str(max_tokens)] + (["--chat"] if chat else [])
            self.memo[key] = subprocess.run(
                cmd, capture_output=True, check=True).stdout.decode(
                "utf-8", "replace")
        return self.memo[key]


# ---- the reference model of ABI.md ----------------------------------------

class Model:
    """What the mount should hold, after each operation."""

    def __init__(self):
        self.max_tokens = 8
        self.pending = {}          # (worker index, kind) -> answer
        self.sessions = {}         # id -> dict(owner, max_tokens, pending,
        #                             history, exact)
        self.errors = 0            # lines we caused (at least)

    def live(self, uid):
        return sum(1 for s in self.sessions.values() if s["owner"] == uid)


class Run:
    def __init__(self, args, seed):
        self.a, self.seed = args, seed
        self.rng = random.Random(seed)
        self.m = Model()
        self.log = []
        self.mnt = args.mount
        self.oracle = args.oracle
        self.stats = {"ops": 0, "answers": 0, "killed": 0, "errors": 0,
                      "bytes": 0, "overlaps": 0, "busy": 0, "histories": 0,
                      "emfile": 0}

    # -- helpers --
    def path(self, *p):
        return os.path.join(self.mnt, *p)

    def expect(self, what, got, want):
        if got != want:
            raise Failure("%s: got %r, want %r" % (what, got, want))

    def note(self, text):
        self.log.append(text)

    def cfg(self, sid=None):
        if sid is not None and self.m.sessions[sid]["max_tokens"]:
            return self.m.sessions[sid]["max_tokens"]
        return self.m.max_tokens

    def ok_session(self, w, sid):
        s = self.m.sessions.get(sid)
        if s is None:
            return "ENOENT"
        if w.uid not in (0, s["owner"]):
            return "EACCES"
        return None

    # -- operations: each issues its calls and checks them --
    def expected(self, kind, prompt, max_tokens):
        if kind == "tokenize":
            return self.oracle.tokens(self.mnt, prompt)
        return self.oracle.answer(prompt, max_tokens, kind == "chat")

    def op_shell_write(self, wi, w):
        kind = self.rng.choice(["generate", "chat", "tokenize"])
        prompt = self.rng.choice(PROMPTS)
        self.note("w%d(uid %d) writes %r > %s" % (wi, w.uid, prompt, kind))
        r = w.call({"op": "wo", "path": self.path(kind), "data": prompt})
        self.expect("shell write", r["err"], None)
        self.m.pending[(wi, kind)] = self.expected(kind, prompt,
                                                   self.cfg())

    def op_shell_read(self, wi, w):
        kind = self.rng.choice(["generate", "chat", "tokenize"])
        self.note("w%d(uid %d) cat %s" % (wi, w.uid, kind))
        r = w.call({"op": "ro", "path": self.path(kind)})
        self.expect("shell read error", r["err"], None)
        want = self.m.pending.pop((wi, kind), "")
        self.expect("shell read of %s" % kind, r["data"], want)
        self.stats["answers"] += bool(want)
        self.stats["bytes"] += len(want)

    def op_rdwr(self, wi, w):
        prompt = self.rng.choice(PROMPTS)
        kind = self.rng.choice(["generate", "chat", "tokenize"])
        self.note("w%d(uid %d) O_RDWR %s %r" % (wi, w.uid, kind, prompt))
        want = self.expected(kind, prompt, self.cfg())
        r = w.call({"op": "rw", "path": self.path(kind), "data": prompt})
        self.expect("O_RDWR error", r["err"], None)
        self.expect("O_RDWR answer", r["data"], want)
        self.stats["answers"] += 1
        self.stats["bytes"] += len(want)

    def op_midstream(self, wi, w):
        prompt = self.rng.choice(PROMPTS)
        self.note("w%d(uid %d) O_RDWR, a write mid-stream" % (wi, w.uid))
        r = w.call({"op": "midstream", "path": self.path("generate"),
                    "data": prompt})
        want = self.oracle.answer(prompt, self.cfg(), False)
        self.expect("mid-stream error", r["err"], None)
        # The answer may have ended before the second write: then it is
        # taken as a new prompt only once the first was read to EOF, which
        # one byte is not unless the answer is one byte long.
        self.expect("mid-stream write", r.get("second"),
                    "EBUSY" if len(want.encode()) > 1 else r.get("second"))
        self.expect("mid-stream answer", r["data"], want)
        self.m.errors += 1

    def op_kill_reader(self, wi, w):
        self.note("w%d(uid %d) a reader killed mid-answer" % (wi, w.uid))
        r = w.call({"op": "kill_reader", "path": self.path("generate"),
                    "data": self.rng.choice(PROMPTS)})
        self.expect("killed reader", r["err"], None)
        self.stats["killed"] += 1

    def op_config(self, wi, w):
        bad = self.rng.random() < 0.3
        n = self.rng.choice(MAX_TOKENS)
        text = "max_tokens=%s\n" % ("-1" if bad else n)
        self.note("w%d(uid %d) config %r" % (wi, w.uid, text))
        r = w.call({"op": "wo", "path": self.path("config"), "data": text})
        if w.uid != OWNER_UID:
            self.expect("config by another uid", r["err"], "EACCES")
        elif bad:
            self.expect("bad config", r["err"], "EINVAL")
            self.m.errors += 1
        else:
            self.expect("config", r["err"], None)
            self.m.max_tokens = n
        r = w.call({"op": "ro", "path": self.path("config")})
        self.expect("config read", "max_tokens=%d" % self.m.max_tokens
                    in r["data"].split("\n"), True)

    def op_session_new(self, wi, w):
        self.note("w%d(uid %d) cat sessions/new" % (wi, w.uid))
        r = w.call({"op": "ro", "path": self.path("sessions", "new")})
        if self.m.live(w.uid) >= MAX_SESSIONS:
            self.expect("sessions/new past the limit", r["err"], "EMFILE")
            self.m.errors += 1
            self.stats["emfile"] += 1
            return
        self.expect("sessions/new", r["err"], None)
        sid = int(r["data"])
        self.expect("a new session number", sid in self.m.sessions, False)
        self.m.sessions[sid] = {"owner": w.uid, "max_tokens": 0,
                                "pending": None, "history": "",
                                "convo": "", "exact": True}
        self.note("  -> %d" % sid)

    def pick_session(self):
        if self.m.sessions and self.rng.random() < 0.9:
            return self.rng.choice(sorted(self.m.sessions))
        return self.rng.choice([999999, max(self.m.sessions or [0]) + 1])

    def op_session_write(self, wi, w):
        sid, prompt = self.pick_session(), self.rng.choice(PROMPTS)
        self.note("w%d(uid %d) writes %r > sessions/%d/generate"
                  % (wi, w.uid, prompt, sid))
        r = w.call({"op": "wo", "data": prompt,
                    "path": self.path("sessions", str(sid), "generate")})
        want = self.ok_session(w, sid)
        self.expect("session write", r["err"], want)
        if want:
            return
        s = self.m.sessions[sid]
        if s["pending"] is not None:
            # A replaced answer may or may not have ended (and joined the
            # conversation and history) first: stop predicting this one.
            s["exact"] = False
        # A session is a conversation (ABI.md): the answer is the one the
        # whole text so far plus this prompt gives.
        turn = prompt[:-1] if prompt.endswith("\n") else prompt
        s["pending"] = (prompt, self.oracle.answer(
            s["convo"] + turn, self.cfg(sid), False) if s["exact"] else None)

    def op_session_read(self, wi, w):
        sid = self.pick_session()
        self.note("w%d(uid %d) cat sessions/%d/generate" % (wi, w.uid, sid))
        r = w.call({"op": "ro",
                    "path": self.path("sessions", str(sid), "generate")})
        want = self.ok_session(w, sid)
        self.expect("session read error", r["err"], want)
        if want:
            return
        s = self.m.sessions[sid]
        p = s["pending"]
        s["pending"] = None
        if not s["exact"]:
            return
        self.expect("session answer", r["data"], p[1] if p else "")
        if p:
            prompt = p[0][:-1] if p[0].endswith("\n") else p[0]
            s["history"] += "--- prompt\n%s\n--- answer\n%s\n" % (prompt,
                                                                   p[1])
            s["convo"] += prompt + p[1]
            self.stats["answers"] += 1

    def op_session_config(self, wi, w):
        sid, n = self.pick_session(), self.rng.choice(MAX_TOKENS)
        self.note("w%d(uid %d) max_tokens=%d > sessions/%d/config"
                  % (wi, w.uid, n, sid))
        r = w.call({"op": "wo", "data": "max_tokens=%d\n" % n,
                    "path": self.path("sessions", str(sid), "config")})
        want = self.ok_session(w, sid)
        self.expect("session config", r["err"], want)
        if not want:
            self.m.sessions[sid]["max_tokens"] = n

    def op_session_history(self, wi, w):
        sid = self.pick_session()
        self.note("w%d(uid %d) cat sessions/%d/history" % (wi, w.uid, sid))
        r = w.call({"op": "ro",
                    "path": self.path("sessions", str(sid), "history")})
        want = self.ok_session(w, sid)
        self.expect("history error", r["err"], want)
        s = self.m.sessions.get(sid)
        if not want and s["exact"] and s["pending"] is None:
            self.expect("history of %d" % sid, r["data"], s["history"])

    def session_workers(self, sid):
        """The workers that may use session sid (its owner's uid, root)."""
        s = self.m.sessions.get(sid)
        return [i for i, x in enumerate(self.workers)
                if s and x.uid in (0, s["owner"])]

    def turn_done(self, s, prompt, answer):
        """A turn of s ran whole: its conversation and history grow."""
        turn = prompt[:-1] if prompt.endswith("\n") else prompt
        s["history"] += "--- prompt\n%s\n--- answer\n%s\n" % (turn, answer)
        s["convo"] += turn + answer
        self.stats["answers"] += 1

    def op_session_overlap(self, wi, w):
        """Two descriptors submit to one session at once."""
        sid = self.pick_session()
        ok = self.session_workers(sid)
        s = self.m.sessions.get(sid)
        if len(ok) < 2 or not s["exact"] or s["pending"] is not None:
            return
        a, b = self.rng.sample(ok, 2)
        pa, pb = self.rng.choice(PROMPTS), self.rng.choice(PROMPTS)
        self.note("w%d and w%d submit %r and %r to sessions/%d at once"
                  % (a, b, pa, pb, sid))
        path = self.path("sessions", str(sid), "generate")
        res = {}

        def go(i, p):
            res[i] = self.workers[i].call({"op": "rw", "path": path,
                                           "data": p})
        import threading
        t = [threading.Thread(target=go, args=x) for x in ((a, pa), (b, pb))]
        for x in t:
            x.start()
        for x in t:
            x.join()
        for i in (a, b):
            self.expect("overlapping turn error", res[i]["err"], None)
        n, c = self.cfg(sid), s["convo"]
        trim = lambda p: p[:-1] if p.endswith("\n") else p
        # either order, never two turns on the same conversation
        for (p1, r1), (p2, r2) in (((pa, res[a]), (pb, res[b])),
                                   ((pb, res[b]), (pa, res[a]))):
            a1 = self.oracle.answer(c + trim(p1), n, False)
            if r1["data"] != a1:
                continue
            a2 = self.oracle.answer(c + trim(p1) + a1 + trim(p2), n, False)
            if r2["data"] == a2:
                self.turn_done(s, p1, a1)
                self.turn_done(s, p2, a2)
                self.stats["overlaps"] += 1
                return
        raise Failure("overlapping turns on session %d: got %r and %r, "
                      "neither order of one turn after the other"
                      % (sid, res[a]["data"], res[b]["data"]))

    def op_turn_restore(self, wi, w):
        """A snapshot restored while a turn of the session runs."""
        sid = self.pick_session()
        ok = self.session_workers(sid)
        s = self.m.sessions.get(sid)
        if not ok or not s["exact"] or s["pending"] is not None:
            return
        wi = self.rng.choice(ok)
        prompt = self.rng.choice(PROMPTS)
        self.note("w%d restores a snapshot into sessions/%d while a turn "
                  "of %r runs" % (wi, sid, prompt))
        r = self.workers[wi].call({
            "op": "turn_restore", "data": prompt, "snap": self.snapshot,
            "path": self.path("sessions", str(sid), "generate"),
            "kv": self.path("sessions", str(sid), "kv")})
        self.expect("turn during a restore", r["err"], None)
        want = self.oracle.answer(s["convo"] + (prompt[:-1] if
                                  prompt.endswith("\n") else prompt),
                                  self.cfg(sid), False)
        # paused past --stream-buffer (16) bytes unread: a longer answer's
        # turn still runs; a short one may have ended (then EINVAL: the
        # session is not empty)
        if len(want.encode()) > 48:
            self.expect("restore while a turn runs", r["restore"], "EBUSY")
        else:
            self.expect("restore during a short turn",
                        r["restore"] in ("EBUSY", "EINVAL"), True)
        self.expect("the turn's answer", r["data"], want)
        self.turn_done(s, prompt, want)
        self.m.errors += 1
        self.stats["busy"] += r["restore"] == "EBUSY"

    def op_history_next(self, wi, w):
        """The history's text, evaluated from scratch, gives the next
        answer of the session."""
        sid = self.pick_session()
        ok = self.session_workers(sid)
        s = self.m.sessions.get(sid)
        if not ok or not s["exact"] or s["pending"] is not None:
            return
        wi = self.rng.choice(ok)
        self.note("w%d: history of sessions/%d, then its next turn"
                  % (wi, sid))
        r = self.workers[wi].call(
            {"op": "ro", "path": self.path("sessions", str(sid), "history")})
        self.expect("history read", r["err"], None)
        text = convo_of_history(r["data"])
        prompt = self.rng.choice(PROMPTS)
        r = self.workers[wi].call({"op": "rw", "data": prompt, "path":
                                   self.path("sessions", str(sid),
                                             "generate")})
        self.expect("next turn error", r["err"], None)
        turn = prompt[:-1] if prompt.endswith("\n") else prompt
        self.expect("the next answer against the history's text from "
                    "scratch", r["data"],
                    self.oracle.answer(text + turn, self.cfg(sid), False))
        self.turn_done(s, prompt, r["data"])
        self.stats["histories"] += 1

    def op_rmdir(self, wi, w):
        sid = self.pick_session()
        self.note("w%d(uid %d) rmdir sessions/%d" % (wi, w.uid, sid))
        r = w.call({"op": "rmdir", "path": self.path("sessions", str(sid))})
        s = self.m.sessions.get(sid)
        if s is None:
            self.expect("rmdir of no session", r["err"], "ENOENT")
        elif w.uid not in (0, s["owner"]):
            self.expect("rmdir of another's session", r["err"] in
                        ("EACCES", "EPERM"), True)
        else:
            self.expect("rmdir", r["err"], None)
            del self.m.sessions[sid]

    def op_kv(self, wi, w):
        self.note("w%d(uid %d) cat kv" % (wi, w.uid))
        r = w.call({"op": "ro", "path": self.path("kv")})
        self.expect("kv error", r["err"], None)
        mine = {x.sid for x in self.workers if x.uid == w.uid}
        for line in r["data"].split("\n"):
            f = line.split()
            if len(f) == 4 and f[0] == "sequence" and \
                    f[2].startswith("pid-session-") and w.uid != 0:
                self.expect("kv names the process session %s to uid %d"
                            % (f[2], w.uid), int(f[2][12:]) in mine, True)

    def op_placement(self, wi, w):
        bad = self.rng.random() < 0.5
        text = "blk.99 nowhere\n" if bad else "auto\n"
        self.note("w%d(uid %d) placement %r" % (wi, w.uid, text))
        r = w.call({"op": "wo", "path": self.path("placement"),
                    "data": text})
        if w.uid != OWNER_UID:
            self.expect("placement by another uid", r["err"], "EACCES")
        elif bad:
            self.expect("bad placement", r["err"], "EINVAL")
            self.m.errors += 1
        else:
            self.expect("placement", r["err"], None)

    def op_errors(self, wi, w):
        self.note("w%d(uid %d) cat errors" % (wi, w.uid))
        r = w.call({"op": "ro", "path": self.path("errors")})
        self.expect("errors error", r["err"], None)
        lines = r["data"].split("\n")[:-1]
        self.expect("errors has at least the lines we caused",
                    len(lines) >= min(self.m.errors, 100), True)
        for line in lines:
            if any(ord(c) < 32 for c in line):
                raise Failure("an errors line holds a control byte: %r"
                              % line)

    OPS = [("shell_write", 14), ("shell_read", 14), ("rdwr", 6),
           ("midstream", 3), ("kill_reader", 3), ("config", 5),
           ("session_new", 8), ("session_write", 10), ("session_read", 10),
           ("session_config", 4), ("session_history", 4), ("rmdir", 5),
           ("kv", 3), ("placement", 2), ("errors", 3),
           ("session_overlap", 4), ("turn_restore", 3),
           ("history_next", 3)]
    # Operations whose outcome depends on a model-wide value another
    # operation may change at the same time run alone; so do those that
    # use workers of their own choice.
    ALONE = {"config", "placement", "rdwr", "midstream", "shell_write",
             "session_write", "session_overlap", "turn_restore",
             "history_next"}

    def step(self):
        names = [o for o, _ in self.OPS]
        weights = [wt for _, wt in self.OPS]
        op = self.rng.choices(names, weights)[0]
        wi = self.rng.randrange(len(self.workers))
        batch = [(op, wi)]
        # Concurrency: reads of two workers at once (they touch keys of
        # their own only).
        if op not in self.ALONE and self.rng.random() < 0.3:
            others = [i for i in range(len(self.workers)) if i != wi]
            op2 = self.rng.choice(["shell_read", "kv", "errors"])
            batch.append((op2, self.rng.choice(others)))
        if len(batch) == 1:
            getattr(self, "op_" + op)(wi, self.workers[wi])
        else:
            self.concurrent(batch)
        self.stats["ops"] += len(batch)

    def concurrent(self, batch):
        """Run the operations in threads: their workers run at once."""
        import threading
        errs = []

        def go(op, wi):
            try:
                getattr(self, "op_" + op)(wi, self.workers[wi])
            except Failure as e:
                errs.append(e)
        self.note("-- at once: %s" % ", ".join("%s(w%d)" % b for b in batch))
        t = [threading.Thread(target=go, args=b) for b in batch]
        for x in t:
            x.start()
        for x in t:
            x.join()
        if errs:
            raise errs[0]

    def reset(self):
        """A clean slate: every session removed, config known."""
        for d in os.listdir(self.path("sessions")):
            if d != "new":
                try:
                    os.rmdir(self.path("sessions", d))
                except OSError:
                    pass
        with open(self.path("config"), "w") as f:
            f.write("temperature=0\nmax_tokens=8\nstop=\n")

    def take_snapshot(self):
        """A snapshot of this model to restore: one turn's session."""
        sid = int(open(self.path("sessions", "new")).read())
        with open(self.path("sessions", str(sid), "generate"), "w") as f:
            f.write(PROMPTS[0])
        open(self.path("sessions", str(sid), "generate")).read()
        with open(self.path("sessions", str(sid), "kv"), "rb") as f:
            self.snapshot = f.read()
        os.rmdir(self.path("sessions", str(sid)))

    def go(self, steps, deadline):
        self.reset()
        self.take_snapshot()
        self.workers = [Worker(self.rng.choice(UIDS) if i > 1 else UIDS[i],
                               self.a.python) for i in range(4)]
        try:
            for i in range(steps):
                if deadline and time.time() > deadline:
                    break
                self.step()
            # Read what is left: no answer outlives its seed.
            for (wi, kind) in sorted(self.m.pending):
                self.note("w%d drains %s" % (wi, kind))
                r = self.workers[wi].call({"op": "ro",
                                           "path": self.path(kind)})
                self.expect("drain of %s" % kind, r["data"],
                            self.m.pending[(wi, kind)])
        finally:
            for w in self.workers:
                w.close()


def convo_of_history(h):
    """The conversation a session's history records (ABI.md): every
    prompt and answer (and restored text) one after the other."""
    import re
    parts = re.split(r"(?m)^--- (?:prompt|chat|answer|restored \d+ tokens)\n",
                     h)
    if parts[0]:
        raise Failure("history does not start with a --- line: %r" % h)
    out = ""
    for body in parts[1:]:
        if not body.endswith("\n"):
            raise Failure("a history entry without its newline: %r" % h)
        out += body[:-1]
    return out


def seeds_of(spec):
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True, help="the model's directory")
    ap.add_argument("--run", required=True, help="llmfs-run")
    ap.add_argument("--model", required=True)
    ap.add_argument("--seeds", default="1-8")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=0,
                    help="seeds from the first on until this much time")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repro", default="",
                    help="the command that reruns one seed, printed on "
                    "failure with {seed} and {steps}")
    a = ap.parse_args()
    a.oracle = Oracle(a.run, a.model)
    seeds = seeds_of(a.seeds)
    deadline = time.time() + a.seconds if a.seconds else 0
    total = {"seeds": 0, "ops": 0, "answers": 0, "killed": 0, "bytes": 0,
             "overlaps": 0, "busy": 0, "histories": 0, "emfile": 0}
    i = 0
    while True:
        if deadline:
            if time.time() > deadline:
                break
            seed = seeds[0] + i
        elif i == len(seeds):
            break
        else:
            seed = seeds[i]
        i += 1
        r = Run(a, seed)
        try:
            r.go(a.steps, deadline)
        except Failure as e:
            print("FAIL seed %d after %d operations: %s"
                  % (seed, r.stats["ops"], e))
            for line in r.log[-25:]:
                print("  " + line)
            print("reproduce: " + a.repro.format(seed=seed, steps=a.steps))
            return 1
        total["seeds"] += 1
        for k in ("ops", "answers", "killed", "bytes", "overlaps", "busy",
                  "histories", "emfile"):
            total[k] += r.stats[k]
    print("random_ops: %(seeds)d seeds, %(ops)d operations, %(answers)d "
          "answers checked byte for byte (%(bytes)d bytes), %(killed)d "
          "readers killed, %(overlaps)d overlapping turns, %(busy)d restores "
          "refused EBUSY, %(histories)d histories continued from scratch, "
          "%(emfile)d sessions refused past --max-sessions, 0 mismatches"
          % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
