//! Decides whether the real-apiserver tests run: sets `cfg(kevents_apiserver)` when the
//! kube-apiserver binary of the version `KEVENTS_K8S_VERSION` chooses is provisioned, or when CI (`CI` set to anything but `false`/`0`) or
//! `KEVENTS_REQUIRE_APISERVER=1` require it (the tests then fail if it is missing). Without
//! the cfg, `real_apiserver_tests!` marks them `#[ignore]` with the command that runs them,
//! so `cargo test` reports them as ignored instead of passing without running.

use std::path::PathBuf;

/// The same lookup as `kevents_testkit::apiserver_binary`.
fn apiserver_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("KEVENTS_KUBE_APISERVER") {
        return PathBuf::from(p);
    }
    let v = std::env::var("KEVENTS_K8S_VERSION").unwrap_or_default();
    let v = v.trim_start_matches('v');
    let under_cache = if v == "1.36" || v.starts_with("1.36.") {
        "k8s-1.36/kube-apiserver"
    } else if v == "1.37" || v.starts_with("1.37.") {
        "k8s-1.37/kube-apiserver"
    } else {
        "bin/kube-apiserver"
    };
    std::env::var_os("KEVENTS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kevents"))
        .join(under_cache)
}

/// The same rule as `kevents_testkit::apiserver_required`.
fn apiserver_required() -> bool {
    let ci = std::env::var("CI")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false);
    ci || std::env::var("KEVENTS_REQUIRE_APISERVER").is_ok_and(|v| v == "1")
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kevents_apiserver)");
    for var in [
        "CI",
        "KEVENTS_REQUIRE_APISERVER",
        "KEVENTS_CACHE",
        "KEVENTS_KUBE_APISERVER",
        "KEVENTS_K8S_VERSION",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let bin = apiserver_binary();
    let provisioned = bin.is_file();
    // What to watch so that provisioning (or removing) the binary is noticed by the next
    // build: the binary itself; while it is missing, its directory (`provision.sh` creates
    // it first, and it holds only that binary); while that is missing too, the binary's path,
    // which Cargo then checks on every build until it appears.
    let watched = match bin.parent() {
        Some(dir) if !provisioned && dir.is_dir() => dir.to_path_buf(),
        _ => bin.clone(),
    };
    println!("cargo::rerun-if-changed={}", watched.display());
    if provisioned || apiserver_required() {
        println!("cargo::rustc-cfg=kevents_apiserver");
    }
}
