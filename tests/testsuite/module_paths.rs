//! The public API reads by family: the crate root keeps only the client, the errors and the few
//! names most programs start from; every recipe is named by its family module, whose `mod.rs` (a
//! door) says what the family is, its Curator counterpart and the type to start from, and whose
//! `pub use` list is its public surface. Read from the source, so that a new flat re-export or a
//! door without its overview fails here, not in a review.

use std::collections::BTreeSet;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What the crate root re-exports in the docs (lib.rs's docs, "What is at the root").
const ROOT_NAMES: &[&str] = &[
    "Acl",
    "BoundedExponentialBackoffRetry",
    "ConnectionState",
    "CreateMode",
    "CuratorClient",
    "CuratorClientBuilder",
    "Deadline",
    "Error",
    "ErrorCode",
    "ErrorDetail",
    "ErrorKind",
    "EventType",
    "ExponentialBackoffRetry",
    "Id",
    "OpResult",
    "Permissions",
    "Result",
    "RetryForever",
    "RetryNTimes",
    "RetryOneTime",
    "RetryPolicy",
    "RetryUntilElapsed",
    "Stat",
    "Transaction",
    "WatchedEvent",
];

/// The family modules, each a door (`src/<name>/mod.rs` or `src/<name>.rs`), with its Curator
/// counterpart as the door names it (`None`: no Curator recipe) and the type to start from.
const FAMILIES: &[(&str, Option<&str>, &str)] = &[
    ("locks", Some("recipes/locks"), "InterProcessMutex"),
    ("leader", Some("recipes/leader"), "LeaderLatch"),
    ("cache", Some("recipes/cache"), "CuratorCache"),
    ("nodes", Some("recipes/nodes"), "PersistentNode"),
    ("atomic", Some("recipes/atomic"), "DistributedAtomicLong"),
    ("shared", Some("recipes/shared"), "SharedCount"),
    ("barriers", Some("recipes/barriers"), "DistributedBarrier"),
    ("queue", Some("recipes/queue"), "SimpleDistributedQueue"),
    ("claims", None, "WorkClaims"),
    ("idempotency", None, "IdempotencyKeys"),
    ("inspect", None, "inspect()"),
    ("discovery", Some("curator-x-discovery"), "ServiceDiscovery"),
    ("framework", Some("CuratorFramework"), "ConnectionStateErrorPolicy"),
];

/// The other public modules.
const OTHER_MODULES: &[&str] = &["blocking", "guide", "raw", "testing"];

/// The flat names of 0.1, kept importable from the root (hidden) for one release. The list may
/// only shrink: a name added here is a new flat re-export.
const HIDDEN_FLAT_NAMES: &[&str] = &[
    "AclProvider",
    "AtomicNumber",
    "AtomicStats",
    "AtomicValue",
    "BarrierInfo",
    "BarrierMember",
    "BarrierReady",
    "Begin",
    "CacheEntry",
    "CacheEvent",
    "CacheEventStream",
    "CacheMode",
    "CacheState",
    "Claim",
    "ClaimState",
    "CloseMode",
    "CommitBuilder",
    "ConnectionStateErrorPolicy",
    "ConnectionStateStream",
    "Contender",
    "CreateBuilder",
    "CreatedNode",
    "CuratorCache",
    "CuratorCacheBuilder",
    "DEFAULT_CONNECTION_TIMEOUT",
    "DEFAULT_MAX_CLOSE_WAIT",
    "DEFAULT_MAX_DATA_SIZE",
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT",
    "DefaultAclProvider",
    "DeleteBuilder",
    "DeleteOutcome",
    "DistributedAtomicInteger",
    "DistributedAtomicLong",
    "DistributedAtomicNumber",
    "DistributedAtomicValue",
    "DistributedBarrier",
    "DistributedDoubleBarrier",
    "ExistsBuilder",
    "ExistsWatchBuilder",
    "FencingToken",
    "GetChildrenBuilder",
    "GetChildrenWatchBuilder",
    "GetDataBuilder",
    "GetDataWatchBuilder",
    "GroupMember",
    "GuardedWrite",
    "Hold",
    "HoldState",
    "HoldStateStream",
    "HolderId",
    "IdempotencyClaim",
    "IdempotencyKeys",
    "InspectOptions",
    "Inspection",
    "InterProcessLock",
    "InterProcessMultiLock",
    "InterProcessMutex",
    "InterProcessNonFairMutex",
    "InterProcessReadWriteLock",
    "InterProcessSemaphoreMutex",
    "InterProcessSemaphoreV2",
    "LATCH_LOCK_NAME",
    "LEASE_NODE_NAME",
    "LatchState",
    "LeaderLatch",
    "LeaderSelector",
    "Leadership",
    "LeadershipState",
    "LeadershipStream",
    "Lease",
    "LeaseDriver",
    "LockDriver",
    "LockFuture",
    "LockHolder",
    "LockInfo",
    "LockKind",
    "MAX_IDEMPOTENCY_KEY_LEN",
    "MembershipEvent",
    "MembershipStream",
    "MutexGuard",
    "NONFAIR_LOCK_NAME",
    "NodeSpec",
    "NodeState",
    "Participant",
    "PersistentNode",
    "PersistentTtlNode",
    "PersistentWatchBuilder",
    "PromotedToLock",
    "Protection",
    "READY_NODE_NAME",
    "READ_LOCK_NAME",
    "ReadLock",
    "ReadLockDriver",
    "ReadLockGuard",
    "Reclaimed",
    "Retention",
    "Revoker",
    "SELECTOR_LOCK_NAME",
    "SEMAPHORE_LEASE_PARENT",
    "SEMAPHORE_LOCK_PARENT",
    "SaslOptions",
    "SessionIdentity",
    "SetDataBuilder",
    "Settled",
    "SharedCount",
    "SharedValue",
    "SharedValueStream",
    "StandardLockDriver",
    "TTL_TOUCH_NODE_NAME",
    "TlsOptions",
    "Verdict",
    "VersionedValue",
    "WRITE_LOCK_NAME",
    "Watch",
    "WatchStream",
    "WorkClaims",
    "WriteLock",
    "WriteLockDriver",
    "WriteLockGuard",
    "driver",
    "inspect",
    "inspect_barrier",
    "inspect_lock",
    "inspect_with",
    "is_protected",
    "parse_sequence",
    "return_all",
    "strip_protection",
    "validate_path",
];

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One item of a module's body: its outer attributes and its text (up to its `;`, or its first
/// line for items with a body).
#[derive(Debug)]
struct Item {
    attributes: Vec<String>,
    text: String,
    /// Its first line's index.
    line: usize,
}

/// The top-level items of `source` that start with `pub use` or `pub mod`, with their attributes.
fn public_items(source: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut attributes = Vec::new();
    let mut lines = source.lines().enumerate();
    while let Some((at, line)) = lines.next() {
        if line.starts_with("#[") {
            attributes.push(line.to_string());
        } else if line.starts_with("pub use ") || line.starts_with("pub mod ") {
            let mut text = line.to_string();
            while line.starts_with("pub use ") && !text.contains(';') {
                text.push_str(lines.next().expect("a `pub use` ends with `;`").1.trim());
            }
            items.push(Item { attributes: std::mem::take(&mut attributes), text, line: at });
        } else if !line.starts_with("//") {
            attributes.clear();
        }
    }
    items
}

/// The names a `pub use` statement brings in (its leaves, or their `as` names).
fn use_names(text: &str) -> Vec<String> {
    let tree = text.trim_start_matches("pub use ").trim_end_matches(';');
    tree.split([',', '{', '}'])
        .map(str::trim)
        .filter(|leaf| !leaf.is_empty() && !leaf.ends_with("::"))
        .map(|leaf| match leaf.split_once(" as ") {
            Some((_, alias)) => alias.trim().to_string(),
            None => leaf.rsplit("::").next().unwrap().to_string(),
        })
        .collect()
}

fn is_hidden(item: &Item) -> bool {
    item.attributes.iter().any(|a| a.replace(' ', "") == "#[doc(hidden)]")
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// The root set is exactly the chosen one: a flat re-export added to lib.rs (one that is not
/// hidden) fails here; so does a root name dropped without updating the list and the docs.
#[test]
fn the_crate_root_re_exports_only_the_client_errors_and_starting_names() {
    let items = public_items(&read("src/lib.rs"));
    let shown: BTreeSet<String> = items
        .iter()
        .filter(|item| item.text.starts_with("pub use ") && !is_hidden(item))
        .flat_map(|item| use_names(&item.text))
        .collect();
    assert_eq!(shown, set(ROOT_NAMES), "lib.rs's non-hidden `pub use` list is not the root set");

    let modules: BTreeSet<String> = items
        .iter()
        .filter(|item| item.text.starts_with("pub mod "))
        .map(|item| item.text.trim_start_matches("pub mod ").trim_end_matches(';').trim().to_string())
        .collect();
    let expected: BTreeSet<String> =
        FAMILIES.iter().map(|(name, ..)| name.to_string()).chain(OTHER_MODULES.iter().map(|m| m.to_string())).collect();
    assert_eq!(modules, expected, "lib.rs's public modules are not the families and blocking, guide, raw, testing");
}

/// The flat names of 0.1 stay hidden, in one block, and no new one joins them.
#[test]
fn old_flat_names_stay_hidden_in_one_block_and_only_shrink() {
    let source = read("src/lib.rs");
    let block = source
        .lines()
        .position(|l| l.starts_with("// The flat names of release 0.1"))
        .expect("lib.rs's block of the old flat names");
    let items = public_items(&source);
    let hidden: Vec<&Item> = items.iter().filter(|item| is_hidden(item)).collect();
    for item in &hidden {
        assert!(item.line > block, "a hidden re-export outside the block of old flat names: {}", item.text);
    }
    // The block is the end of lib.rs: nothing but hidden re-exports after its comment.
    assert!(
        items.iter().filter(|item| item.line > block).all(is_hidden),
        "lib.rs: the block of old flat names holds only hidden re-exports"
    );
    let names: BTreeSet<String> = hidden.iter().flat_map(|item| use_names(&item.text)).collect();
    let old = set(HIDDEN_FLAT_NAMES);
    let new: Vec<&String> = names.difference(&old).collect();
    assert!(new.is_empty(), "new hidden flat re-exports (name them by their family instead): {new:?}");
}

/// Each family's door opens with an overview naming its Curator counterpart and the type to
/// start from, and its files stay private: its `pub use` list is its public surface (the lock
/// drivers' module, `locks::driver`, being the one public sub-module).
#[test]
fn every_family_module_is_a_door_with_an_overview() {
    for (family, curator, start) in FAMILIES {
        let path = if std::path::Path::new(&format!("{ROOT}/src/{family}/mod.rs")).exists() {
            format!("src/{family}/mod.rs")
        } else {
            format!("src/{family}.rs")
        };
        let source = read(&path);
        let overview: Vec<&str> =
            source.lines().take_while(|l| l.starts_with("//!")).map(|l| l.trim_start_matches("//!")).collect();
        let overview = overview.join("\n");
        assert!(overview.lines().count() >= 3, "{path}: no door overview (`//!`) at its top");
        match curator {
            Some(package) => {
                assert!(overview.contains(package), "{path}: the overview does not name Curator's `{package}`")
            }
            None => {
                assert!(overview.contains("Curator"), "{path}: the overview does not say how it relates to Curator")
            }
        }
        assert!(
            overview.contains(&format!("[`{start}`]")),
            "{path}: the overview does not link the type to start from, {start}"
        );
        for item in public_items(&source) {
            if item.text.starts_with("pub mod ") {
                assert_eq!(
                    (*family, item.text.as_str()),
                    ("locks", "pub mod driver;"),
                    "{path}: a public file module; export its items with `pub use` instead"
                );
            }
        }
        let surface: Vec<String> = public_items(&source)
            .iter()
            .filter(|item| item.text.starts_with("pub use "))
            .flat_map(|item| use_names(&item.text))
            .collect();
        let defines_items = source.lines().any(|l| {
            ["pub struct ", "pub enum ", "pub fn ", "pub async fn ", "pub trait ", "pub const "]
                .iter()
                .any(|p| l.starts_with(p))
        });
        assert!(!surface.is_empty() || defines_items, "{path}: a door with no public items");
    }
}

/// Every `.rs` and `.md` file under `dir` (relative to the crate), recursively.
fn files_under(dir: &str, into: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(format!("{ROOT}/{dir}")) else { return };
    for entry in entries {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let path = format!("{dir}/{name}");
        if std::path::Path::new(&format!("{ROOT}/{path}")).is_dir() {
            files_under(&path, into);
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            into.push(path);
        }
    }
}

/// The old flat names `text` names after `root::` (`zk_curator` or `crate`), with their byte
/// offsets: paths such as `zk_curator::InterProcessMutex::new` and the top-level items of groups
/// such as `zk_curator::{CuratorClient, InterProcessMutex}` (also across lines of a doc comment).
fn flat_names_after(text: &str, root: &str) -> Vec<(usize, String)> {
    let old = set(HIDDEN_FLAT_NAMES);
    let mut found = Vec::new();
    let pattern = format!("{root}::");
    let mut from = 0;
    while let Some(found_at) = text[from..].find(&pattern) {
        let at = from + found_at;
        from = at + pattern.len();
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &text[from..];
        let mut heads = Vec::new();
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut item) = (0, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => heads.push(std::mem::take(&mut item)),
                    _ => {}
                }
                if c != ',' || depth > 0 {
                    item.push(c);
                }
            }
            heads.push(item);
        } else {
            heads.push(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect());
        }
        for head in heads {
            // An item on a later line of a doc comment starts with the comment's marks.
            let mut head = head.trim();
            while let Some(stripped) =
                head.strip_prefix("///").or_else(|| head.strip_prefix("//!")).or_else(|| head.strip_prefix('#'))
            {
                head = stripped.trim();
            }
            let name: String = head.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            // `inspect::…` is the module of that name; the old flat `inspect` was the function.
            let module_path = name == "inspect" && head[name.len()..].starts_with("::");
            if old.contains(&name) && !module_path {
                found.push((at, name));
            }
        }
    }
    found
}

/// Our own code — the library, its doc examples, the CLI, the tests, the recipes, the benchmarks,
/// README and docs — names everything by its family path; the old flat names are only for the
/// users who have not moved yet. A file added with a flat import fails here, naming the line.
#[test]
fn our_own_code_and_docs_use_the_family_paths() {
    let mut files = vec!["README.md".to_string()];
    for dir in ["src", "tests", "recipes", "benches", "docs"] {
        files_under(dir, &mut files);
    }
    let mut flat = Vec::new();
    // This file names the old paths in its own docs, as examples of what it looks for.
    files.retain(|file| file != "tests/testsuite/module_paths.rs");
    for file in &files {
        let mut source = read(file);
        if file == "src/lib.rs" {
            // The block of old flat names itself.
            let block = source.find("// The flat names of release 0.1").expect("lib.rs's block of the old flat names");
            source.truncate(block);
        }
        if file == "docs/curator-migration.md" {
            // The migration guide's map from the old paths to the new ones.
            let section = source.find("\n## Module paths\n").expect("the migration guide's \"Module paths\"");
            let end = source[section + 1..].find("\n## ").map_or(source.len(), |e| section + 1 + e);
            source.replace_range(section..end, &"\n".repeat(source[section..end].lines().count()));
        }
        let mut names = flat_names_after(&source, "zk_curator");
        // `crate::` is the library's own root only in the library (the CLI and the tests are
        // crates of their own).
        if file.starts_with("src/") && !file.starts_with("src/bin/") {
            names.extend(flat_names_after(&source, "crate"));
        }
        for (at, name) in names {
            let line = source[..at].matches('\n').count() + 1;
            flat.push(format!("{file}:{line}: {name}"));
        }
    }
    assert!(flat.is_empty(), "old flat paths (name them by their family, docs/curator-migration.md): {flat:#?}");
}

/// Every name of 0.1's flat list (and its `driver` module) still resolves at its old path: the
/// hidden re-exports are what keeps a 0.1 program compiling. Checked by the compiler, not by
/// reading the source.
#[test]
#[allow(unused_imports, deprecated)]
fn every_old_flat_path_still_resolves() {
    #[cfg(feature = "sasl")]
    use zk_curator::SaslOptions;
    #[cfg(feature = "tls")]
    use zk_curator::TlsOptions;
    use zk_curator::{
        inspect, inspect_barrier, inspect_lock, inspect_with, is_protected, parse_sequence, return_all,
        strip_protection, validate_path, Acl, AclProvider, AtomicNumber, AtomicStats, AtomicValue, BarrierInfo,
        BarrierMember, BarrierReady, Begin, BoundedExponentialBackoffRetry, CacheEntry, CacheEvent, CacheEventStream,
        CacheMode, CacheState, Claim, ClaimState, CloseMode, CommitBuilder, ConnectionState,
        ConnectionStateErrorPolicy, ConnectionStateStream, Contender, CreateBuilder, CreateMode, CreatedNode,
        CuratorCache, CuratorCacheBuilder, CuratorClient, CuratorClientBuilder, Deadline, DefaultAclProvider,
        DeleteBuilder, DeleteOutcome, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber,
        DistributedAtomicValue, DistributedBarrier, DistributedDoubleBarrier, Error, ErrorCode, ErrorDetail, ErrorKind,
        EventType, ExistsBuilder, ExistsWatchBuilder, ExponentialBackoffRetry, FencingToken, GetChildrenBuilder,
        GetChildrenWatchBuilder, GetDataBuilder, GetDataWatchBuilder, GroupMember, GuardedWrite, Hold, HoldState,
        HoldStateStream, HolderId, Id, IdempotencyClaim, IdempotencyKeys, InspectOptions, Inspection, InterProcessLock,
        InterProcessMultiLock, InterProcessMutex, InterProcessNonFairMutex, InterProcessReadWriteLock,
        InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LatchState, LeaderLatch, LeaderSelector, Leadership,
        LeadershipState, LeadershipStream, Lease, LeaseDriver, LockDriver, LockFuture, LockHolder, LockInfo, LockKind,
        MembershipEvent, MembershipStream, MutexGuard, NodeSpec, NodeState, OpResult, Participant, Permissions,
        PersistentNode, PersistentTtlNode, PersistentWatchBuilder, PromotedToLock, Protection, ReadLock,
        ReadLockDriver, ReadLockGuard, Reclaimed, Result, Retention, RetryForever, RetryNTimes, RetryOneTime,
        RetryPolicy, RetryUntilElapsed, Revoker, SessionIdentity, SetDataBuilder, Settled, SharedCount, SharedValue,
        SharedValueStream, StandardLockDriver, Stat, Transaction, Verdict, VersionedValue, Watch, WatchStream,
        WatchedEvent, WorkClaims, WriteLock, WriteLockDriver, WriteLockGuard, DEFAULT_CONNECTION_TIMEOUT,
        DEFAULT_MAX_CLOSE_WAIT, DEFAULT_MAX_DATA_SIZE, DEFAULT_SESSION_TIMEOUT,
        DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT, LATCH_LOCK_NAME, LEASE_NODE_NAME, MAX_IDEMPOTENCY_KEY_LEN,
        NONFAIR_LOCK_NAME, READY_NODE_NAME, READ_LOCK_NAME, SELECTOR_LOCK_NAME, SEMAPHORE_LEASE_PARENT,
        SEMAPHORE_LOCK_PARENT, TTL_TOUCH_NODE_NAME, WRITE_LOCK_NAME,
    };
    let _ = (validate_path("/a"), is_protected("a"), DEFAULT_MAX_DATA_SIZE);
    {
        use zk_curator::driver::{
            evaluate_by_key, java_cmp, read_write_sort_key, standard_evaluate, standard_sort_key, standard_verdict,
            Contender, LeaseDriver, LockDriver, NodeSpec, ReadLockDriver, StandardLockDriver, Verdict, WriteLockDriver,
        };
        let _ = java_cmp("a", "b");
    }
}
