//! The documentation pages of the repository's `docs/` folder, packaged with the crate and
//! rendered here so they are on docs.rs too. Links between the pages name the repository's
//! files (`semantics.md`): follow them in the repository, or pick the page from this list.
//!
//! Every page is here (`tests/docs_pages.rs` checks it), and the pages' ```` ```rust ````
//! blocks are this crate's doc tests: `cargo test -p kevents --all-features --doc` compiles
//! them all (the kube-rs and preflight pages' with the `kube-client` feature, the metrics
//! page's with `prometheus`; without it such a page is a line naming its file).

#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}
#[doc = include_str!("../docs/semantics.md")]
pub mod semantics {}
#[doc = include_str!("../docs/compatibility.md")]
pub mod compatibility {}
#[doc = include_str!("../docs/http.md")]
pub mod http {}
#[doc = include_str!("../docs/runtime.md")]
pub mod runtime {}
#[doc = include_str!("../docs/events-v1.md")]
pub mod events_v1 {}
#[cfg_attr(feature = "kube-client", doc = include_str!("../docs/kube-rs.md"))]
#[cfg_attr(
    not(feature = "kube-client"),
    doc = "kube-rs interop: `docs/kube-rs.md` (rendered with the `kube-client` feature)."
)]
pub mod kube_rs {}
#[cfg_attr(feature = "kube-client", doc = include_str!("../docs/preflight.md"))]
#[cfg_attr(
    not(feature = "kube-client"),
    doc = "Preflight and `kevents doctor`: `docs/preflight.md` (rendered with the `kube-client` feature)."
)]
pub mod preflight {}
#[cfg_attr(feature = "prometheus", doc = include_str!("../docs/metrics.md"))]
#[cfg_attr(
    not(feature = "prometheus"),
    doc = "Metrics and Prometheus: `docs/metrics.md` (rendered with the `prometheus` feature)."
)]
pub mod metrics {}
#[doc = include_str!("../docs/demo.md")]
pub mod demo {}
#[doc = include_str!("../docs/export.md")]
pub mod export {}
#[doc = include_str!("../docs/replay-format.md")]
pub mod replay_format {}
#[doc = include_str!("../docs/simulator.md")]
pub mod simulator {}
#[doc = include_str!("../docs/benchmarks.md")]
pub mod benchmarks {}
#[doc = include_str!("../docs/cli-bounds.md")]
pub mod cli_bounds {}
#[doc = include_str!("../docs/dependencies.md")]
pub mod dependencies {}
#[doc = include_str!("../docs/publishing.md")]
pub mod publishing {}
