//! The guides: the longer documents behind the API pages, one page each.
//!
//! They are the repository's `docs/*.md`, shipped in the package and shown here so that a link to
//! them works wherever the crate is read — this site, the registry's page of the README, the
//! repository. Their examples are compiled with the crate's documentation tests.
//!
//! | page | what it answers |
//! |---|---|
//! | [`curator_migration`] | Curator class or call → zk-curator, row by row, and where the defaults differ |
//! | [`failure_semantics`] | what each recipe does on time-outs, cancellation, lost sessions, cuts and restarts |
//! | [`architecture`] | the layers, and how a lock is acquired |
//! | [`wire_protocol`] | what goes on the wire, node by node, so that Curator and zk-curator interoperate |
//! | [`observability`] | inspecting locks (who holds what, since when), metrics names, labels and units |
//! | [`security`] | authorization, TLS, SASL, ACL providers, starting while the ensemble is down |
//! | [`cli`] | the `zk-curator` command: `lock`, `elect`, `inspect`, `watch` and the rest |
//! | [`performance`] | measured costs, next to Curator's and the raw ZooKeeper floor, and how to measure |

// The pages are Markdown written for any renderer (the repository's too): clippy's rustdoc
// style lints do not apply to them.
#![allow(clippy::doc_lazy_continuation, clippy::doc_overindented_list_items)]

// Each page's examples need the features they use; the documentation build (docs.rs builds with
// every feature) always shows the page.
#[doc = include_str!("../docs/curator-migration.md")]
pub mod curator_migration {}

#[doc = include_str!("../docs/failure-semantics.md")]
pub mod failure_semantics {}

#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}

#[doc = include_str!("../docs/wire-protocol.md")]
pub mod wire_protocol {}

#[cfg_attr(any(not(doctest), feature = "metrics"), doc = include_str!("../docs/observability.md"))]
pub mod observability {}

#[cfg_attr(any(not(doctest), all(feature = "tls", feature = "sasl")), doc = include_str!("../docs/security.md"))]
pub mod security {}

#[doc = include_str!("../docs/cli.md")]
pub mod cli {}

#[doc = include_str!("../docs/performance.md")]
pub mod performance {}
