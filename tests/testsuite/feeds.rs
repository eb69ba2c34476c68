//! The change feeds' one contract: every feed of the crate (found in its source, so that a new one
//! cannot drift) is a `Stream` (async) or an `Iterator` (blocking), is listed with its bound in the
//! docs' table (docs/failure-semantics.md, "Change feeds"), and documents its `next`'s cancel
//! safety.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The type names after `marker` (`impl<T> futures_core::Stream for Name<T>` gives `Name`) in the
/// library's source (not the command line tool's).
fn implementors(marker: &str) -> Vec<String> {
    let mut files = Vec::new();
    crate::support::rust_sources(&Path::new(ROOT).join("src"), &mut files);
    let mut names = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(Path::new(ROOT).join("src/bin"))) {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let line = line.trim_start();
            if !line.starts_with("impl") {
                continue;
            }
            if let Some((_, rest)) = line.split_once(marker) {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.push(name);
            }
        }
    }
    names.sort();
    names
}

/// The docs' section on feeds.
fn feeds_section() -> String {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/failure-semantics.md")).unwrap();
    let start = doc.find("## Change feeds").expect("docs/failure-semantics.md has a Change feeds section");
    let rest = &doc[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

fn assert_stream<S: futures::Stream + Send + Unpin + 'static>() {}
fn assert_blocking_feed<I: Iterator + Send + 'static>() {}

#[test]
fn every_change_feed_is_a_stream_or_an_iterator_listed_with_its_bound_in_the_docs() {
    assert_stream::<zk_curator::cache::CacheEventStream>();
    assert_stream::<zk_curator::framework::ConnectionStateStream>();
    assert_stream::<zk_curator::leader::LeadershipStream>();
    assert_stream::<zk_curator::locks::HoldStateStream>();
    assert_stream::<zk_curator::nodes::MembershipStream>();
    assert_stream::<zk_curator::shared::SharedValueStream<i32>>();
    assert_stream::<zk_curator::framework::WatchStream>();
    assert_blocking_feed::<zk_curator::blocking::CacheEvents>();
    assert_blocking_feed::<zk_curator::blocking::LeadershipChanges>();
    assert_blocking_feed::<zk_curator::blocking::HoldStateChanges>();
    assert_blocking_feed::<zk_curator::blocking::MembershipChanges>();
    assert_blocking_feed::<zk_curator::blocking::SharedValueChanges<i32>>();

    let streams = implementors("futures_core::Stream for ");
    let iterators = implementors("Iterator for ");
    assert_eq!(
        streams,
        [
            "CacheEventStream",
            "ConnectionStateStream",
            "HoldStateStream",
            "LeadershipStream",
            "MembershipStream",
            "QueueStream",
            "ServiceCacheEvents",
            "SharedValueStream",
            "WatchStream"
        ],
        "a new feed: add it above and to the docs' table"
    );
    let section = feeds_section();
    let table: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    for feed in streams.iter().chain(&iterators) {
        let listed = table.iter().any(|row| {
            let first_cell = row.split('|').nth(1).unwrap_or("");
            first_cell.contains(&format!("`{feed}`"))
                || first_cell.contains(&format!("`{feed}<T>`"))
                || first_cell.contains(&format!("`blocking::{feed}`"))
                || first_cell.contains(&format!("`blocking::{feed}<T>`"))
        });
        assert!(listed, "{feed} is not in the docs' table of feeds (docs/failure-semantics.md)");
    }
    for row in &table {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cells.len() >= 6 && cells[3..6].iter().all(|c| !c.is_empty()), "item, bound and lag said: {row}");
    }
}

#[test]
fn every_feeds_next_documents_its_cancel_safety() {
    let mut files = Vec::new();
    crate::support::rust_sources(&Path::new(ROOT).join("src"), &mut files);
    let mut undocumented = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("pub async fn next(") {
                continue;
            }
            let docs: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("///") || l.trim_start().starts_with("#["))
                .copied()
                .collect();
            if !docs.iter().any(|l| l.contains("# Cancel safety")) {
                undocumented.push(format!("{}:{}", file.display(), i + 1));
            }
        }
    }
    assert!(undocumented.is_empty(), "a feed's next without `# Cancel safety`: {undocumented:?}");
}
