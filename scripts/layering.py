#!/usr/bin/env python3
"""Checks the layering of toolrouter's library (README "Architecture"):

1. the import graph among the top-level modules of src/ (every `crate::module` path, `use
   crate::{a, b}` groups included, tests too) has no cycle;
2. the domain modules import no transport or database crate (tonic, axum, hyper, sqlx, rmcp);
3. generated protobuf types (`crate::pb`) are used only by the gRPC edges and the conversions;
4. no file of src/ (binaries included) is over 700 lines unless its first comment says why
   ("long because").

Prints the graph (modules by layer, lowest first) and every violation; exits 1 on any.
Usage: scripts/layering.py [SRC_DIR]   (default: src next to this script's directory)
"""
import os
import re
import sys
from collections import defaultdict

DOMAIN = {"admission", "call", "catalog", "control", "invoke", "provider", "registry", "search", "cache"}
TRANSPORT_CRATES = ("tonic", "axum", "hyper", "sqlx", "rmcp")
PB_ALLOWED = ("api/", "pb/", "upstream/function.rs", "demo.rs")
MAX_LINES = 700

src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
src = os.path.normpath(src)
modules = {n[:-3] if n.endswith(".rs") else n for n in os.listdir(src) if n not in ("lib.rs", "main.rs", "bin")}

edges = defaultdict(set)
problems = []
for dirpath, _, files in os.walk(src):
    for name in files:
        if not name.endswith(".rs"):
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        top = rel.split("/")[0].removesuffix(".rs")
        text = open(path, encoding="utf-8").read()
        lines = text.count("\n")
        if lines > MAX_LINES:
            first = text.splitlines()
            head = "\n".join(first[: next((i for i, l in enumerate(first) if not l.startswith("//")), len(first))])
            if "long because" not in head:
                problems.append(f"{rel}: {lines} lines, over {MAX_LINES}, and its first comment does not say why")
        # The binaries (bin/) are held to the size rule only: they are not library modules.
        if top in ("lib", "main", "bin"):
            continue
        code = re.sub(r"//[^\n]*", "", text)
        used = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", code))
        for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
            used.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        for m in used & modules - {top}:
            edges[top].add(m)
        if top in DOMAIN:
            for crate in TRANSPORT_CRATES:
                if re.search(rf"(?<![\w:]){crate}::", code):
                    problems.append(f"{rel}: domain module `{top}` uses `{crate}`")
        if "pb" in used and not rel.startswith(PB_ALLOWED):
            problems.append(f"{rel}: uses generated protobuf types outside the gRPC edges and conversions")

# Cycles: strongly connected components with more than one module.
index, low, stack, on_stack, sccs = {}, {}, [], set(), []
counter = [0]


def strongconnect(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            strongconnect(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            comp.append(w)
            if w == v:
                break
        sccs.append(sorted(comp))


sys.setrecursionlimit(10_000)
for v in sorted(modules):
    if v not in index:
        strongconnect(v)
for comp in sccs:
    if len(comp) > 1:
        problems.append("import cycle among: " + " ".join(comp))

# Layers: a module sits one above the highest module it imports (cycles collapse).
comp_of = {m: tuple(c) for c in sccs for m in c}
layer = {}


def depth(c, seen=()):
    if c in layer:
        return layer[c]
    below = [comp_of[w] for m in c for w in edges[m] if comp_of[w] != c and comp_of[w] not in seen]
    layer[c] = 1 + max((depth(b, seen + (c,)) for b in below), default=-1)
    return layer[c]


by_layer = defaultdict(list)
for c in set(comp_of.values()):
    by_layer[depth(c)].append("+".join(c))
for n in sorted(by_layer):
    print(f"layer {n}: " + ", ".join(sorted(by_layer[n])))
print()
for m in sorted(modules):
    print(f"{m} -> {' '.join(sorted(edges[m])) or '-'}")
print()
if problems:
    for p in problems:
        print("FAIL", p)
    sys.exit(1)
print("layering: ok (no cycles, domain modules free of transport crates, generated types at the edges)")
