//! Every Rust snippet of the adopter pages is compiled, and stays so: every `docs/*.md` page
//! is a page of `src/guide.rs` (whose code blocks are this crate's doc tests, run by
//! `cargo test -p kevents --all-features --doc`), no Rust block of README.md or docs/*.md is
//! `ignore`d, every fenced block names its language (rustdoc compiles a bare fence as Rust),
//! and README.md's Rust blocks are the two front-page examples `tests/readme.rs` compares
//! with the compiled doc examples.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One fenced code block: the line of its opening fence and its info string.
struct Fence {
    line: usize,
    info: String,
}

/// The fenced blocks (```` ``` ```` or `~~~`) of a markdown text.
fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut open: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            "```"
        } else if t.starts_with("~~~") {
            "~~~"
        } else {
            continue;
        };
        match open {
            None => {
                open = Some(marker);
                out.push(Fence {
                    line: i + 1,
                    info: t.trim_start_matches(marker).trim().to_owned(),
                });
            }
            Some(m) if m == marker && t.trim_end() == marker => open = None,
            Some(_) => {}
        }
    }
    out
}

/// rustdoc's attributes of a Rust code block (a block whose info string has only these, or
/// `rust` and these, is compiled as Rust).
const RUSTDOC_ATTRIBUTES: &[&str] = &[
    "ignore",
    "no_run",
    "compile_fail",
    "should_panic",
    "test_harness",
    "standalone_crate",
    "edition2015",
    "edition2018",
    "edition2021",
    "edition2024",
];

fn tokens(info: &str) -> Vec<&str> {
    info.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Whether rustdoc takes the block for Rust.
fn is_rust(info: &str) -> bool {
    tokens(info)
        .iter()
        .all(|t| *t == "rust" || RUSTDOC_ATTRIBUTES.contains(t) || t.starts_with("ignore-"))
}

fn is_ignored(info: &str) -> bool {
    tokens(info)
        .iter()
        .any(|t| *t == "ignore" || t.starts_with("ignore-"))
}

/// Problems of one page: ignored Rust blocks and blocks without a language.
fn fence_problems(name: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for f in fences(text) {
        if f.info.is_empty() {
            problems.push(format!(
                "{name}:{}: a fence without a language (rustdoc compiles it as Rust): write ```rust or ```text",
                f.line
            ));
        } else if is_rust(&f.info) && is_ignored(&f.info) {
            problems.push(format!(
                "{name}:{}: ```{} is not compiled: make it compile (no_run where it needs a cluster), or compile_fail, or text with a sentence saying why",
                f.line, f.info
            ));
        }
    }
    problems
}

fn docs_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

/// The docs pages `src/guide.rs` includes (`include_str!("../docs/NAME.md")`).
fn included_pages(guide: &str) -> Vec<String> {
    guide
        .split("include_str!(\"../docs/")
        .skip(1)
        .filter_map(|rest| rest.split_once("\")").map(|(name, _)| name.to_owned()))
        .collect()
}

#[test]
fn every_docs_page_is_a_guide_page() {
    let guide = read(&root().join("src/guide.rs"));
    let included = included_pages(&guide);
    let missing: Vec<String> = docs_pages()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| !included.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs pages not included in src/guide.rs (their Rust blocks would not be compiled): {missing:?}"
    );
    for name in &included {
        assert!(
            root().join("docs").join(name).is_file(),
            "src/guide.rs includes docs/{name}, which does not exist"
        );
    }
    // The guide module is read by the doc tests, not only by rustdoc's rendering.
    let lib = read(&root().join("src/lib.rs"));
    assert!(
        lib.contains("#[cfg(any(doc, doctest))]\npub mod guide;"),
        "src/lib.rs must declare `#[cfg(any(doc, doctest))] pub mod guide;`"
    );
}

#[test]
fn no_rust_block_of_the_pages_is_ignored_and_every_fence_names_its_language() {
    let mut problems = fence_problems("README.md", &read(&root().join("README.md")));
    for page in docs_pages() {
        let name = format!("docs/{}", page.file_name().unwrap().to_string_lossy());
        problems.extend(fence_problems(&name, &read(&page)));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_has_no_rust_block_but_the_two_checked_examples() {
    // README.md is not a rustdoc page: its Rust blocks are compiled as the crates' front-page
    // doc examples (tests/readme.rs), so it may hold only those two.
    let readme = read(&root().join("README.md"));
    let rust: Vec<Fence> = fences(&readme)
        .into_iter()
        .filter(|f| is_rust(&f.info))
        .collect();
    let lines: Vec<usize> = rust.iter().map(|f| f.line).collect();
    assert_eq!(
        rust.len(),
        2,
        "README.md's Rust blocks (lines {lines:?}) are not the two front-page examples"
    );
    for f in &rust {
        assert_eq!(
            f.info, "rust",
            "README.md:{}: tests/readme.rs compares ```rust blocks",
            f.line
        );
    }
}

#[test]
fn the_check_finds_what_it_is_for() {
    let page = "# p\n\n```rust,ignore\nx\n```\n\n```\ny\n```\n\n```ignore\nz\n```\n\n```sh\nls\n```\n\n```rust,no_run\nfn main() {}\n```\n\n```text\nignore\n```\n";
    let problems = fence_problems("p.md", page);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].starts_with("p.md:3: ```rust,ignore"));
    assert!(problems[1].starts_with("p.md:7: a fence without a language"));
    assert!(problems[2].starts_with("p.md:11: ```ignore"));
    assert_eq!(
        included_pages(
            "#[doc = include_str!(\"../docs/a.md\")]\n#[cfg_attr(x, doc = include_str!(\"../docs/b.md\"))]"
        ),
        ["a.md", "b.md"]
    );
}
