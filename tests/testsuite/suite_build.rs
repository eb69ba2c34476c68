//! The suite's own build stays small: its crate is the longest step of the test build (every
//! other test target waits on the library only), so code the compiler would generate once per
//! call site goes through a helper that boxes it. Read from the source.

use std::path::Path;

/// Every task the suite spawns goes through `support::spawn`, which boxes its future: spawned
/// unboxed, each distinct future is a copy of tokio's task machinery (a quarter of the suite's
/// generated code when it was measured).
#[test]
fn the_suite_spawns_tasks_through_the_boxing_helper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testsuite");
    let mut sources = Vec::new();
    crate::support::rust_sources(&root, &mut sources);
    let helper = root.join("support/mod.rs");
    let needle = ["tokio", "::spawn("].concat();
    let offenders: Vec<String> = sources
        .iter()
        .filter(|path| **path != helper)
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.contains(&needle) && !line.trim_start().starts_with("//"))
                .map(|(n, _)| format!("{}:{}", path.strip_prefix(&root).unwrap().display(), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(offenders.is_empty(), "spawn through crate::support::spawn instead: {offenders:?}");
    assert!(sources.len() > 50, "the suite's sources were found ({} files)", sources.len());
}
