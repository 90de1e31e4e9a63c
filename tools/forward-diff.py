#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where two traces of the forward pass part (engine/forward_dump.c).

  tools/forward-diff.py A.txt B.txt [--all] [--first N]

A and B are LLMFS_FORWARD_DUMP files of the same prompt on two backends
(A the reference: the CPU). Rows are paired by (pass, op, position, n-th
time); an op only one side dumps (a fused op's inner result) is skipped.
Prints, in A's order, each op whose rows differ: how many floats differ
in their bits, the largest absolute and relative difference; the first
such op is where the backends part (everything after it is downstream,
unless --all shows an op that differs more than its inputs). Exit 0 when
every paired row is bit for bit the same, 1 otherwise.
"""
import argparse
import sys


def read(path):
    rows, order, seen = {}, [], {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            key = (int(parts[0]), parts[1], parts[2])
            nth = seen.get(key, 0)
            seen[key] = nth + 1
            k = key + (nth,)
            rows[k] = [float.fromhex(v) for v in parts[3:]]
            order.append(k)
    return rows, order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--first", type=int, default=12,
                    help="ops differing to print (default 12)")
    ap.add_argument("--all", action="store_true",
                    help="every op, the same ones too")
    args = ap.parse_args()
    a, order = read(args.a)
    b, _ = read(args.b)
    ops, op_order = {}, []
    paired = 0
    for k in order:
        if k not in b:
            continue
        paired += 1
        va, vb = a[k], b[k]
        op = (k[0], k[1])
        if op not in ops:
            ops[op] = [0, 0, 0.0, 0.0, 0, None]
            op_order.append(op)
        st = ops[op]
        st[0] += 1
        n = min(len(va), len(vb))
        for i in range(n):
            x, y = va[i], vb[i]
            st[4] += 1
            if x == y or (x != x and y != y):
                continue
            st[1] += 1
            d = abs(x - y)
            r = d / max(abs(x), 1e-30)
            if d > st[2]:
                st[2] = d
            if r > st[3]:
                st[3] = r
                st[5] = (k[2], i, x, y)
    if not paired:
        print("no rows in common: not traces of the same prompt?")
        return 2
    shown = 0
    for op in op_order:
        rows, ndiff, dabs, drel, nval, where = ops[op]
        if not ndiff and not args.all:
            continue
        line = (f"pass {op[0]} {op[1]}: {ndiff}/{nval} floats differ, "
                f"max abs {dabs:.3g}, max rel {drel:.3g}")
        if where:
            line += (f" (pos {where[0]} [{where[1]}]: {where[2]!r} vs "
                     f"{where[3]!r})")
        print(line)
        if ndiff:
            shown += 1
            if shown >= args.first:
                break
    diff = sum(1 for op in op_order if ops[op][1])
    print(f"{paired} rows paired, {len(op_order)} ops, {diff} differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
