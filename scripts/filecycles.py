#!/usr/bin/env python3
"""filecycles.py [--folders] [--report-only] [ROOT]: import cycles between the source files of each crate under ROOT,
over-approximated: file A depends on file B when A names (as a whole word, outside comments
and test modules) an item that B defines with any `pub` visibility and A does not define
itself. Catches relative paths (`super::x`, `child::X`, re-exports) that a path resolver can
miss. Prints each strongly connected set of two or more files; exits 1 if there is any.

--folders: the same graph collapsed to each crate's top-level modules (a file directly in src/
is its own module, `recorder/item.rs` belongs to `recorder`), as /work/shared/tools/modcycles.py
--folders does: prints the loops between folders/top-level files (edges inside one module are
dropped). --report-only prints what it finds and exits 0 (for a check whose fix is still open)."""
import os, re, sys

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
FOLDERS = "--folders" in sys.argv[1:]
REPORT_ONLY = "--report-only" in sys.argv[1:]
ROOT = ARGS[0] if ARGS else "."
DEF = re.compile(r"^pub(?:\([^)]*\))?\s+(?:async\s+|const\s+|unsafe\s+)*(?:struct|enum|fn|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
ANYDEF = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+)*(?:struct|enum|fn|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
MACRO = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")

def clean(text):
    i = text.find("#[cfg(test)]")
    text = text if i < 0 else text[:i]
    return "\n".join(l.split("//")[0] for l in text.splitlines())

VARIANT = re.compile(r"^\s+([A-Z][A-Za-z0-9_]*)\s*[({,]", re.M)
ASSOC_BINDING = re.compile(r"([<,])\s*[A-Za-z_][A-Za-z0-9_]*\s*=(?![=>])")
EXTERNAL_USE = re.compile(r"^\s*use\s+(?!crate|super|self)[^;]*;", re.M | re.S)


def local_names(text):
    """Names a file defines or imports from outside the crate: enum variants, and `use`
    of std or other crates (a `Write` from std::fmt is not the crate's `Write`)."""
    names = set(VARIANT.findall(text))
    for u in EXTERNAL_USE.findall(text):
        names |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", u))
    return names


QUALIFIED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)")


def external_roots(text):
    """Path roots that lead outside the crate: std, core, alloc and what `use` imports from
    other crates (the last segment of each imported path, e.g. `io` of `use std::io`)."""
    roots = {"std", "core", "alloc"}
    for u in EXTERNAL_USE.findall(text):
        roots |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", u)) - {"use", "self", "as", "crate", "super"}
    return roots


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
    files_graph = graph
    for p, t in files.items():
        # an associated type binding (`IntoIterator<Item = &str>`) names a trait's item, not a
        # crate item called `Item`
        t = ASSOC_BINDING.sub(r"\1", t)
        # a name reached through std or an imported crate/module (`io::Write`) is not the
        # crate's own item of that name
        ext = external_roots(t)
        t = QUALIFIED.sub(lambda m: m.group(0) if m.group(1) not in ext else m.group(1) + "::", t)
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t))
        for nm in words - own[p]:
            for q in owners.get(nm, ()):
                # names defined in several files are ambiguous: skip them
                if q != p and len(owners[nm]) == 1:
                    graph[p].add(q)
    if FOLDERS:
        top = lambda f: f.split("/")[0] if "/" in f else f[:-3]
        folded = {}
        for p, ds in graph.items():
            folded.setdefault(top(p), set()).update(top(d) for d in ds if top(d) != top(p))
        graph = folded
    for comp in scc(graph):
        bad += 1
        print(f"{'folder loop' if FOLDERS else 'cycle'} in {os.path.relpath(src, ROOT)}: {', '.join(comp)}")
        if FOLDERS:
            # one witness per edge inside the loop: which file names which
            inside = set(comp)
            for p, ds in sorted(files_graph.items()):
                for d in sorted(ds):
                    if top(p) in inside and top(d) in inside and top(p) != top(d):
                        print(f"    {p} -> {d}")
print(f"{'folder loops' if FOLDERS else 'file cycles'}: {bad}")
sys.exit(1 if bad and not REPORT_ONLY else 0)
