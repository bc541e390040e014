#!/usr/bin/env python3
"""filecycles.py [ROOT]: import cycles between the source files of each crate under ROOT,
over-approximated: file A depends on file B when A names (as a whole word, outside comments
and test modules) an item that B defines with any `pub` visibility and A does not define
itself. Catches relative paths (`super::x`, `child::X`, re-exports) that a path resolver can
miss. Prints each strongly connected set of two or more files; exits 1 if there is any."""
import os, re, sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
DEF = re.compile(r"^pub(?:\([^)]*\))?\s+(?:async\s+|const\s+|unsafe\s+)*(?:struct|enum|fn|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
ANYDEF = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+)*(?:struct|enum|fn|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
MACRO = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")

def clean(text):
    i = text.find("#[cfg(test)]")
    text = text if i < 0 else text[:i]
    return "\n".join(l.split("//")[0] for l in text.splitlines())

VARIANT = re.compile(r"^\s+([A-Z][A-Za-z0-9_]*)\s*[({,]", re.M)
EXTERNAL_USE = re.compile(r"^\s*use\s+(?!crate|super|self)[^;]*;", re.M | re.S)


def local_names(text):
    """Names a file defines or imports from outside the crate: enum variants, and `use`
    of std or other crates (a `Write` from std::fmt is not the crate's `Write`)."""
    names = set(VARIANT.findall(text))
    for u in EXTERNAL_USE.findall(text):
        names |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", u))
    return names


def crates(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("target", ".git", "node_modules")]
        if "Cargo.toml" in files and os.path.isdir(os.path.join(d, "src")):
            yield os.path.join(d, "src")

def scc(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index: visit(v)
    return out

bad = 0
for src in sorted(crates(ROOT)):
    files = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.relpath(os.path.join(d, f), src)
                if p in ("lib.rs", "main.rs") or f == "tests.rs":
                    continue
                files[p] = clean(open(os.path.join(d, f), encoding="utf-8").read())
    pub = {p: set(DEF.findall(t)) | set(MACRO.findall(t)) for p, t in files.items()}
    own = {p: set(ANYDEF.findall(t)) | set(MACRO.findall(t)) | local_names(t) for p, t in files.items()}
    owners = {}
    for p, names in pub.items():
        for nm in names:
            owners.setdefault(nm, set()).add(p)
    graph = {p: set() for p in files}
    for p, t in files.items():
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t))
        for nm in words - own[p]:
            for q in owners.get(nm, ()):
                # names defined in several files are ambiguous: skip them
                if q != p and len(owners[nm]) == 1:
                    graph[p].add(q)
    for comp in scc(graph):
        bad += 1
        print(f"cycle in {os.path.relpath(src, ROOT)}: {', '.join(comp)}")
print(f"file cycles: {bad}")
sys.exit(1 if bad else 0)
