//! The documentation pages of the repository's `docs/` folder, packaged with the crate and
//! rendered here so they are on docs.rs too. Links between the pages name the repository's
//! files (`semantics.md`): follow them in the repository, or pick the page from this list.

#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}
#[doc = include_str!("../docs/semantics.md")]
pub mod semantics {}
#[doc = include_str!("../docs/compatibility.md")]
pub mod compatibility {}
#[doc = include_str!("../docs/http.md")]
pub mod http {}
#[doc = include_str!("../docs/events-v1.md")]
pub mod events_v1 {}
#[doc = include_str!("../docs/kube-rs.md")]
pub mod kube_rs {}
#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}
#[doc = include_str!("../docs/demo.md")]
pub mod demo {}
#[doc = include_str!("../docs/replay-format.md")]
pub mod replay_format {}
#[doc = include_str!("../docs/benchmarks.md")]
pub mod benchmarks {}
#[doc = include_str!("../docs/dependencies.md")]
pub mod dependencies {}
#[doc = include_str!("../docs/publishing.md")]
pub mod publishing {}
