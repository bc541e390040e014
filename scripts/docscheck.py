#!/usr/bin/env python3
"""docscheck.py [--self-test] [ROOT]: documentation that cannot drift from the tree.

Run from the repository root (or give ROOT). Exits 1 with one line per problem
(`file:line: problem`), 0 when the docs agree with the tree.

(a) Every `.rs` file under crates/kevents-actors/src/ is named in docs/architecture.md's
    "kevents-actors, file by file" table. The rule: a file directly in src/ is named by a
    backticked `name.rs` in a row's first column; a file in a folder F/ (mod.rs included) is
    named either by `F/name.rs` in a row's first column, or by a row whose first column is
    `F/` and which names `name.rs` (backticked) anywhere in the row. Conversely every file the
    table names must exist (a folder row's `name.rs` in F/, or else directly in src/: a row
    may refer to a file of src/, which does not count as naming it).

(b) Every repository path named in README.md and docs/*.md exists. A path is a word inside an
    inline code span (`...`) or a link target ](...) outside fenced code blocks that starts
    with crates/ scripts/ docs/ examples/ tests/ src/ .ci/ or ends in .rs .md .sh .py .toml
    (URLs, absolute or home paths, and words with placeholders such as * < > { } $ are left
    alone; a #anchor or :line suffix is dropped). It must resolve relative to one of:
      - the repository root, or the directory of the document (links);
      - a crate the text is about: crates/C/ and crates/C/src/ for every crate C named in the
        same section (since the last heading) or in the document's title section, by its
        name (`kevents-x`) or by a crates/kevents-x/ path; the root facade counts as a crate
        whose directory is the root;
      - a folder the text is about: crates/C/src/F/ for those crates when the same paragraph
        or table row names the folder `F/` (e.g. the `recorder/` row naming `item.rs`);
      - crates/ for a path that starts with a crate's name (`kevents-sim/src/replay.rs`);
      - the trailing components of a file's path in one of those crates: `cache.rs` or
        `correlator/cache.rs` for crates/kevents-core/src/core_v1/correlator/cache.rs (a
        file named by its own folder, as the docs do), never across crates not in context.

(c) docs/dependencies.md says why each crate depends on what: in each `## <crate>` section,
    the crates named in its table's first column (comma-separated; words in parentheses and
    bold rows that name no crate are left alone) are exactly the crate's dependencies in its
    Cargo.toml (normal, dev, build and target-specific ones), the workspace's own kevents-*
    crates aside.

(d) A crate the docs call synchronous has no async code: a line of README.md, docs/*.md or
    the crate's src/lib.rs that names the crate (or is its lib.rs) and calls it "pure,
    synchronous" or "synchronous core" is reported when the crate's src/ holds an `async fn`
    or an `async move` block.

(e) The names of the two event APIs (docs/architecture.md, "Names of the two APIs"): every
    item a row of its table names (the first backticked word of each cell) is in the public
    API listing (api/*.txt), and no public name there says `V1` or `_v1` without the API it
    means (`events_v1`, `EventsV1`, `EVENTS_V1`, `core_v1`, `CoreV1`, `CORE_V1`; Kubernetes
    versions `V1_36` and the exec credential API's versions aside).

--self-test builds a small tree in a temporary directory with one file missing from the
table and one dangling doc path, and checks that both are reported (and that the fixed tree
passes)."""
import os
import re
import sys
import tempfile

ACTORS_SRC = "crates/kevents-actors/src"
TABLE_HEADING = "## kevents-actors, file by file"
PREFIXES = ("crates/", "scripts/", "docs/", "examples/", "tests/", "src/", ".ci/")
SUFFIXES = (".rs", ".md", ".sh", ".py", ".toml")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CRATE_NAME = re.compile(r"(?<![A-Za-z0-9_/.-])(kevents-[a-z]+)(?![A-Za-z0-9_-])")
CRATE_PATH = re.compile(r"crates/(kevents-[a-z]+)/")
FOLDER = re.compile(r"^([a-z_0-9]+)/$")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


# ---------------------------------------------------------------- (a) the file table

def table_rows(lines):
    """(line number, first cell, whole row) of the table under TABLE_HEADING."""
    rows, inside = [], False
    for n, line in enumerate(lines, 1):
        if line.startswith("## "):
            inside = line.strip() == TABLE_HEADING
            continue
        if inside and line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            first = cells[0].strip()
            if first in ("file",) or set(first) <= set("-: "):
                continue
            rows.append((n, first, line))
    return rows


def check_table(root):
    problems = []
    doc = "docs/architecture.md"
    src = os.path.join(root, ACTORS_SRC)
    lines = read_lines(os.path.join(root, doc))
    rows = table_rows(lines)
    if not rows:
        return [f"{doc}: no '{TABLE_HEADING}' table found"]
    files = sorted(os.path.relpath(os.path.join(d, f), src).replace(os.sep, "/")
                   for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs"))
    named = set()
    for n, first, row in rows:
        first_names = [s for _, s in CODE_SPAN.findall(first)]
        row_names = [s for _, s in CODE_SPAN.findall(row)]
        for name in first_names:
            m = FOLDER.match(name)
            if m:
                folder = m.group(1)
                if not os.path.isdir(os.path.join(src, folder)):
                    problems.append(f"{doc}:{n}: table names folder `{name}`, not in {ACTORS_SRC}")
                    continue
                for inner in row_names:
                    if re.fullmatch(r"[a-z_0-9]+\.rs", inner):
                        p = f"{folder}/{inner}"
                        if os.path.isfile(os.path.join(src, p)):
                            named.add(p)
                        elif os.path.isfile(os.path.join(src, inner)):
                            pass  # a file of src/ the row refers to (`overflow.rs`)
                        else:
                            problems.append(f"{doc}:{n}: `{name}` row names `{inner}`, but {ACTORS_SRC}/{p} does not exist")
            elif name.endswith(".rs"):
                if os.path.isfile(os.path.join(src, name)):
                    named.add(name)
                else:
                    problems.append(f"{doc}:{n}: table names `{name}`, but {ACTORS_SRC}/{name} does not exist")
    heading_line = next((i for i, l in enumerate(lines, 1) if l.strip() == TABLE_HEADING), 0)
    for f in files:
        if f not in named:
            problems.append(f"{doc}:{heading_line}: {ACTORS_SRC}/{f} is not named in the file table")
    return problems


# ---------------------------------------------------------------- (b) paths in the docs

def looks_like_path(word):
    if not word or "://" in word or word.startswith(("/", "~", "$", "-")):
        return False
    if any(c in word for c in "*<>{}$|=,()[]\"'") or "..." in word:
        return False
    return word.startswith(PREFIXES) or word.endswith(SUFFIXES)


def normalise(word):
    word = word.split("#")[0]
    word = re.sub(r":\d+(-\d+)?$", "", word)
    return word.rstrip(".,;:")


def crates_in(text):
    return set(CRATE_NAME.findall(text)) | set(CRATE_PATH.findall(text))


def paragraphs(lines):
    """Map line index -> (start, end) of its paragraph (a table row is its own paragraph)."""
    spans, start = {}, 0
    for i, line in enumerate(lines + [""]):
        if not line.strip() or line.lstrip().startswith("|") or line.startswith("#") \
                or (i > 0 and lines[i - 1].lstrip().startswith("|")):
            for j in range(start, i):
                spans[j] = (start, i)
            if line.lstrip().startswith("|") or line.startswith("#"):
                spans[i] = (i, i + 1)
                start = i + 1
            else:
                start = i + 1 if not line.strip() else i
    return spans


_FILES = {}


def crate_files(cdir):
    """Every file of a crate, as '/'-prefixed paths relative to the crate (target/ left out)."""
    if cdir not in _FILES:
        out = set()
        for d, dirs, fs in os.walk(cdir):
            dirs[:] = [x for x in dirs if x not in ("target", ".git")]
            out |= {"/" + os.path.relpath(os.path.join(d, f), cdir).replace(os.sep, "/") for f in fs}
        _FILES[cdir] = out
    return _FILES[cdir]


def check_paths(root, doc):
    problems = []
    lines = read_lines(os.path.join(root, doc))
    # sections: heading to heading; the first section (title and intro) is the document's
    sections, cur = [], 0
    for i, line in enumerate(lines):
        if line.startswith("#") and not line.startswith("#!") and i:
            cur += 1
        sections.append(cur)
    section_text = {}
    fenced = False
    fence_of = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            fence_of.append(True)
            continue
        fence_of.append(fenced)
        section_text.setdefault(sections[i], []).append(line)
    section_crates = {s: crates_in("\n".join(t)) for s, t in section_text.items()}
    doc_crates = section_crates.get(0, set())
    paras = paragraphs(lines)
    docdir = os.path.dirname(doc)
    for i, line in enumerate(lines):
        if fence_of[i]:
            continue
        words = []
        for _, span in CODE_SPAN.findall(line):
            words += span.split()
        words += LINK.findall(line)
        if not words:
            continue
        s, e = paras.get(i, (i, i + 1))
        para = "\n".join(lines[s:e])
        crates = section_crates.get(sections[i], set()) | doc_crates | crates_in(para)
        folders = [f[:-1] for _, sp in CODE_SPAN.findall(para) for f in sp.split() if FOLDER.match(f)]
        bases = ["", docdir]
        for c in sorted(crates):
            cdir = "" if c == "kevents" else f"crates/{c}"
            bases += [cdir, os.path.join(cdir, "src")]
            bases += [os.path.join(cdir, "src", f) for f in folders]
        tails = set()
        for c in crates:
            cdir = os.path.join(root, "" if c == "kevents" else f"crates/{c}")
            if c != "kevents" and os.path.isdir(cdir):
                tails |= crate_files(cdir)
        for w in words:
            if not looks_like_path(w):
                continue
            p = normalise(w)
            if not p or not looks_like_path(p):
                continue
            if re.match(r"kevents-[a-z]+/", p) and os.path.exists(os.path.join(root, "crates", p)):
                continue
            if any(t.endswith("/" + p) for t in tails):
                continue
            if not any(os.path.exists(os.path.join(root, b, p)) for b in bases):
                where = ", ".join(sorted(crates)) or "no crate in context"
                problems.append(f"{doc}:{i + 1}: `{p}` does not exist (looked in the root, {docdir or '.'}, and {where})")
    return problems


def docs_of(root):
    out = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    d = os.path.join(root, "docs")
    if os.path.isdir(d):
        out += sorted("docs/" + f for f in os.listdir(d) if f.endswith(".md"))
    return out


def cargo_deps(root, crate):
    """Every dependency name of `crate`'s manifest (None if it has no manifest here)."""
    import tomllib
    path = os.path.join(root, "Cargo.toml" if crate == "kevents" else f"crates/{crate}/Cargo.toml")
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        manifest = tomllib.load(f)
    names = set()
    for key in ("dependencies", "dev-dependencies", "build-dependencies"):
        names |= set(manifest.get(key, {}))
    for target in manifest.get("target", {}).values():
        for key in ("dependencies", "dev-dependencies", "build-dependencies"):
            names |= set(target.get(key, {}))
    return names


def check_dependencies(root):
    doc = "docs/dependencies.md"
    if not os.path.isfile(os.path.join(root, doc)):
        return []
    problems = []
    crate, named, heading_line = None, set(), 0

    def finish():
        if crate is None:
            return
        deps = cargo_deps(root, crate)
        if deps is None:
            return
        deps = {d for d in deps if not d.startswith("kevents")}
        for d in sorted(deps - named):
            problems.append(f"{doc}:{heading_line}: {crate} depends on {d}, which its table does not name")
        for d in sorted(named - deps):
            problems.append(f"{doc}:{heading_line}: {crate}'s table names {d}, which is not in its Cargo.toml")

    for n, line in enumerate(read_lines(os.path.join(root, doc)), 1):
        m = re.match(r"^## (kevents[a-z-]*)", line)
        if m:
            finish()
            crate, named, heading_line = m.group(1), set(), n
            continue
        if line.startswith("## "):
            finish()
            crate = None
            continue
        if crate is None or not line.startswith("|"):
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        if first in ("crate", "") or set(first) <= set("-: ") or first.startswith("**"):
            continue
        first = re.sub(r"\([^)]*\)", "", first)
        for part in first.split(","):
            w = re.match(r"\s*`?([A-Za-z0-9_-]+)", part)
            if w and not w.group(1).startswith("kevents"):
                named.add(w.group(1))
    finish()
    return problems


SYNC_CLAIM = re.compile(r"pure, synchronous|synchronous core", re.I)


def check_sync_claims(root):
    problems = []
    for cdir in sorted(os.listdir(os.path.join(root, "crates"))) if os.path.isdir(os.path.join(root, "crates")) else []:
        src = os.path.join(root, "crates", cdir, "src")
        if not os.path.isdir(src):
            continue
        has_async = False
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                    if re.search(r"\basync (fn|move)\b", text):
                        has_async = True
        if not has_async:
            continue
        sources = [(d, False) for d in docs_of(root)] + [(f"crates/{cdir}/src/lib.rs", True)]
        for doc, own in sources:
            path = os.path.join(root, doc)
            if not os.path.isfile(path):
                continue
            for n, line in enumerate(read_lines(path), 1):
                if SYNC_CLAIM.search(line) and (own or cdir in line):
                    problems.append(f"{doc}:{n}: calls {cdir} synchronous, but its src/ has async code")
    return problems


NAMES_HEADING = "## Names of the two APIs"
API_ITEM = re.compile(r"\b(kevents[a-z_]*(?:::[A-Za-z0-9_]+)+)")
API_MARKS = re.compile(r"events_v1|EventsV1|EVENTS_V1|core_v1|CoreV1|CORE_V1|V1_[0-9]+")
BARE_V1 = re.compile(r"V1|_v1")
# Not an event API: the exec credential plugin protocol's versions.
NOT_EVENT_APIS = ("kevents_http::ExecApiVersion", "kevents_http::EXEC_API_V1")


def api_items(root):
    """Every item path of the public API listing (impl lines name no new item)."""
    items = set()
    api = os.path.join(root, "api")
    if not os.path.isdir(api):
        return items
    for name in sorted(os.listdir(api)):
        if not name.endswith(".txt"):
            continue
        for line in read_lines(os.path.join(api, name)):
            bare = line.replace("#[doc(hidden)] ", "")
            if bare.startswith("impl"):
                continue
            m = API_ITEM.search(bare)
            if m:
                items.add(m.group(1))
    return items


def check_names(root):
    problems = []
    items = api_items(root)
    for item in sorted(items):
        if item.startswith(NOT_EVENT_APIS):
            continue
        for seg in item.split("::"):
            if BARE_V1.search(API_MARKS.sub("", seg)):
                problems.append(f"api/: `{item}` names an event API by `V1`/`_v1` alone")
                break
    doc = os.path.join(root, "docs", "architecture.md")
    if not os.path.exists(doc):
        return problems
    section = False
    rows = 0
    for n, line in enumerate(read_lines(doc), 1):
        if line.startswith("## "):
            section = line.strip() == NAMES_HEADING
            continue
        if not section or not line.startswith("| `"):
            continue
        rows += 1
        for cell in line.strip().strip("|").split("|"):
            m = CODE_SPAN.search(cell)
            if not m:
                continue
            name = m.group(2).rstrip("!")
            if name not in items:
                problems.append(f"docs/architecture.md:{n}: `{name}` is not in the public API listing (api/)")
    if items and rows == 0:
        problems.append(f"docs/architecture.md: no table of twins under '{NAMES_HEADING}'")
    return problems


def check(root):
    _FILES.clear()
    problems = check_table(root)
    for doc in docs_of(root):
        problems += check_paths(root, doc)
    problems += check_dependencies(root)
    problems += check_sync_claims(root)
    problems += check_names(root)
    return problems


# ---------------------------------------------------------------- self-test

def self_test():
    def write(root, path, text=""):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    arch = (
        "# Architecture\n\n`kevents-actors` is the pipeline.\n\n"
        + TABLE_HEADING + "\n\n| file | role |\n|---|---|\n"
        "| `lib.rs` | root |\n| `policy.rs` | policies |\n"
        "| `recorder/` | `mod.rs`, `item.rs` (`build`) |\n\n"
        "## Flow\n\nThe item is built in `recorder/item.rs`, see [the demo](demo.md) and "
        "`scripts/filecycles.py` and `crates/kevents-actors/src/policy.rs:12`.\n"
    )
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for f in ("lib.rs", "policy.rs", "recorder/mod.rs", "recorder/item.rs"):
            write(root, f"{ACTORS_SRC}/{f}")
        write(root, "scripts/filecycles.py")
        write(root, "docs/demo.md", "# Demo\n\nIn `kevents-cli`: `src/main.rs` and `demo/mod.rs`.\n")
        write(root, "crates/kevents-cli/src/main.rs")
        write(root, "crates/kevents-cli/src/demo/mod.rs")
        write(root, "docs/architecture.md", arch)
        write(root, "README.md", "# x\n\n`.ci/run` and [arch](docs/architecture.md)\n")
        write(root, ".ci/run")
        got = check(root)
        if got:
            failures.append(f"a consistent tree reports problems: {got}")
        # a source file the table does not name
        write(root, f"{ACTORS_SRC}/recorder/coalesce.rs")
        got = check(root)
        if not any("recorder/coalesce.rs is not named" in p for p in got):
            failures.append(f"an unlisted recorder/coalesce.rs is not reported: {got}")
        os.remove(os.path.join(root, ACTORS_SRC, "recorder/coalesce.rs"))
        # a file the docs name that is gone: reported with its line
        os.remove(os.path.join(root, "scripts/filecycles.py"))
        os.remove(os.path.join(root, "crates/kevents-cli/src/demo/mod.rs"))
        got = check(root)
        if not any(p.startswith("docs/architecture.md:15: `scripts/filecycles.py` does not exist") for p in got):
            failures.append(f"a missing scripts/filecycles.py is not reported at line 15: {got}")
        if not any(p.startswith("docs/demo.md:3: `demo/mod.rs`") for p in got):
            failures.append(f"a missing demo/mod.rs is not reported: {got}")
        # a table entry whose file is gone
        os.remove(os.path.join(root, ACTORS_SRC, "policy.rs"))
        got = check(root)
        if not any("table names `policy.rs`" in p for p in got):
            failures.append(f"a table entry without its file is not reported: {got}")
    # (c) and (d): a dependency the table does not name, a name the manifest lacks, and a
    # crate with async code called synchronous.
    with tempfile.TemporaryDirectory() as root:
        for f in ("lib.rs", "policy.rs", "recorder/mod.rs", "recorder/item.rs"):
            write(root, f"{ACTORS_SRC}/{f}")
        write(root, "docs/architecture.md", arch.split("## Flow")[0])
        write(root, "crates/kevents-x/Cargo.toml",
              '[package]\nname = "kevents-x"\n[dependencies]\nserde = "1"\nkevents-core = { path = "../c" }\n'
              '[dev-dependencies]\nproptest = "1"\n')
        write(root, "crates/kevents-x/src/lib.rs", "//! The pure, synchronous part.\nasync fn f() {}\n")
        write(root, "docs/dependencies.md",
              "# D\n\n## kevents-x\n\n| crate | why |\n|---|---|\n| serde (derive) | the model |\n"
              "| **note** | prose |\n| lru, proptest (dev) | caches, tests |\n")
        got = check(root)
        want = ["kevents-x's table names lru", "crates/kevents-x/src/lib.rs:1: calls kevents-x synchronous"]
        for w in want:
            if not any(w in p for p in got):
                failures.append(f"{w!r} not reported: {got}")
        if any("kevents-core" in p for p in got):
            failures.append(f"a workspace crate is reported: {got}")
        write(root, "crates/kevents-x/src/lib.rs", "//! The core.\nasync fn f() {}\n")
        write(root, "docs/dependencies.md",
              "# D\n\n## kevents-x\n\n| crate | why |\n|---|---|\n| serde (derive) | the model |\n"
              "| proptest (dev) | tests |\n")
        got = check(root)
        if got:
            failures.append(f"a consistent crate reports problems: {got}")
        write(root, "crates/kevents-x/Cargo.toml",
              '[package]\nname = "kevents-x"\n[dependencies]\nserde = "1"\ntracing = "0.1"\n'
              '[dev-dependencies]\nproptest = "1"\n')
        got = check(root)
        if not any("kevents-x depends on tracing" in p for p in got):
            failures.append(f"an unnamed dependency is not reported: {got}")
        # (e) a bare V1 in a public name, and a twin the listing does not have
        write(root, "api/kevents-x.txt",
              "pub fn kevents_x::Sink::write_events_v1(&self)\npub fn kevents_x::Sink::write(&self)\n")
        with open(os.path.join(root, "docs/architecture.md"), "a", encoding="utf-8") as f:
            f.write("\n" + NAMES_HEADING + "\n\n| core/v1 | events.k8s.io/v1 |\n|---|---|\n"
                    "| `kevents_x::Sink::write` | `kevents_x::Sink::write_events_v1` |\n")
        got = check(root)
        if any("architecture.md" in p and "listing" in p for p in got) or any("api/" in p for p in got):
            failures.append(f"a consistent names table reports problems: {got}")
        write(root, "api/kevents-x.txt",
              "pub fn kevents_x::Sink::write_v1(&self)\npub fn kevents_x::Sink::write(&self)\n")
        got = check(root)
        if not any("kevents_x::Sink::write_v1" in p and "alone" in p for p in got):
            failures.append(f"a bare _v1 in a public name is not reported: {got}")
        if not any("write_events_v1` is not in the public API listing" in p for p in got):
            failures.append(f"a twin missing from the listing is not reported: {got}")
    for f in failures:
        print("self-test FAILED:", f)
    print("docscheck self-test:", "failed" if failures else "ok")
    return 1 if failures else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv if not a.startswith("--")]
    root = args[0] if args else "."
    problems = check(root)
    for p in problems:
        print(p)
    print(f"docs check: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
