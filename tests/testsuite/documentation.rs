//! The documents a user reads before the API: the README and the guides (docs/*.md, shown on
//! docs.rs as `zk_curator::guide`). Their links resolve where they are shown — the registry's page
//! of the README has no repository to resolve a relative link against —, every guide is a page of
//! the crate's docs, the migration guide names only types the crate has, and the crate docs list
//! every feature flag. No server: these read files.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::support::rust_sources;

const GUIDE_URL: &str = "https://docs.rs/zk-curator/latest/zk_curator/guide/";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The guides: `docs/<name>.md` by the module name docs.rs shows it under.
fn guides() -> HashMap<String, PathBuf> {
    let mut guides = HashMap::new();
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let module = path.file_stem().unwrap().to_str().unwrap().replace('-', "_");
            guides.insert(module, path);
        }
    }
    guides
}

/// The documents shown to a user: the README and every guide.
fn documents() -> Vec<PathBuf> {
    let mut documents = vec![root().join("README.md")];
    documents.extend(guides().into_values());
    documents.sort();
    documents
}

/// Markdown text outside fenced code blocks (a link in a code block is not one).
fn prose(markdown: &str) -> String {
    let mut in_code = false;
    let mut out = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The anchors of a Markdown document's headings, as GitHub and rustdoc derive them: lower case,
/// punctuation dropped, spaces as hyphens, a repeated heading numbered from `-1`.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    for line in prose(markdown).lines() {
        let Some(text) = line.strip_prefix('#') else { continue };
        let text = text.trim_start_matches('#').trim();
        let id: String = text
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap()),
                '-' | '_' => Some(c),
                ' ' => Some('-'),
                _ => None,
            })
            .collect();
        let n = seen.entry(id.clone()).or_insert(0);
        anchors.insert(if *n == 0 { id.clone() } else { format!("{id}-{n}") });
        *n += 1;
    }
    anchors
}

/// Every `[text](target)` link target in a Markdown document's prose.
fn link_targets(markdown: &str) -> Vec<String> {
    let text = prose(markdown);
    let mut targets = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        targets.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    targets
}

#[test]
fn every_link_in_the_readme_and_the_guides_resolves_where_they_are_shown() {
    let guides = guides();
    let mut broken = Vec::new();
    for document in documents() {
        let text = read(&document);
        let own_anchors = anchors(&text);
        for target in link_targets(&text) {
            let problem = if let Some(anchor) = target.strip_prefix('#') {
                (!own_anchors.contains(anchor)).then(|| "no such heading in this document".to_string())
            } else if let Some(page) = target.strip_prefix(GUIDE_URL) {
                let (module, anchor) = match page.split_once('#') {
                    Some((module, anchor)) => (module, Some(anchor)),
                    None => (page, None),
                };
                let module = module.trim_end_matches("/index.html").trim_end_matches('/');
                match guides.get(module) {
                    None => Some(format!("no guide docs/{}.md", module.replace('_', "-"))),
                    Some(guide) => anchor
                        .filter(|anchor| !anchors(&read(guide)).contains(*anchor))
                        .map(|anchor| format!("no heading #{anchor} in {}", guide.display())),
                }
            } else if target.starts_with("https://") || target.starts_with("http://") {
                None
            } else {
                Some("a relative link: it does not resolve on the registry's page or on docs.rs".to_string())
            };
            if let Some(problem) = problem {
                broken.push(format!("{}: ({target}): {problem}", document.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_guide_is_a_page_of_the_crate_docs() {
    let guide_rs = read(&root().join("src/guide.rs"));
    let index = guide_rs.split("\n\n").next().unwrap();
    for (module, path) in guides() {
        let file = path.file_name().unwrap().to_str().unwrap();
        assert!(
            guide_rs.contains(&format!("include_str!(\"../docs/{file}\")"))
                && guide_rs.contains(&format!("pub mod {module} {{}}")),
            "docs/{file} is not a page of zk_curator::guide (src/guide.rs): docs.rs would not show it"
        );
        assert!(index.contains(&format!("[`{module}`]")), "the guide's index (src/guide.rs) does not list `{module}`");
    }
}

/// Names of the standard library, of `zookeeper-client` and of Curator that the migration guide's
/// Rust column may show without the crate declaring them.
const NOT_OURS: &[&str] = &[
    "Box",
    "Clone",
    "Display",
    "Duration",
    "Future",
    "Instant",
    "Into",
    "Iterator",
    "Option",
    "Send",
    "Stream",
    "StreamExt",
    "String",
    "Vec",
    // zookeeper-client, named where the guide maps it
    "AuthId",
    "SaslOptions",
    "TlsOptions",
];

/// The names the crate declares: types, traits, modules, and enum variants.
fn declared_names() -> BTreeSet<String> {
    let mut sources = Vec::new();
    rust_sources(&root().join("src"), &mut sources);
    let mut names = BTreeSet::new();
    for source in sources {
        let text = read(&source);
        let words: Vec<&str> =
            text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        for pair in words.windows(2) {
            if matches!(pair[0], "struct" | "enum" | "trait" | "type" | "mod") {
                names.insert(pair[1].to_string());
            }
        }
        // Enum variants: a capitalised word opening a line, followed by `,`, `(`, `{` or `=`.
        for line in text.lines() {
            let line = line.trim_start();
            let word: String = line.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let after = line[word.len()..].trim_start();
            if word.starts_with(|c: char| c.is_ascii_uppercase())
                && (after.is_empty() || after.starts_with([',', '(', '{', '=']))
            {
                names.insert(word);
            }
        }
    }
    names
}

/// CamelCase words (a capital, then at least one lower-case letter) in the code spans of `text`.
fn type_names_in_code(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        for word in span.split(|c: char| !c.is_alphanumeric()) {
            if word.starts_with(|c: char| c.is_ascii_uppercase()) && word.chars().any(|c| c.is_ascii_lowercase()) {
                names.push(word.to_string());
            }
        }
    }
    names
}

/// The migration guide's mapping rows: (Curator's column, zk-curator's column) of every table
/// whose header names both.
fn migration_rows() -> Vec<(String, String)> {
    let guide = read(&root().join("docs/curator-migration.md"));
    let cells = |line: &str| -> Vec<String> {
        line.trim().trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect()
    };
    let mut rows = Vec::new();
    let mut columns: Option<(usize, usize)> = None;
    let mut previous = "";
    for line in prose(&guide).lines() {
        if !line.starts_with('|') {
            columns = None;
        } else if line.starts_with("|---") {
            let header = cells(previous);
            let curator = header.iter().position(|c| c.starts_with("Curator"));
            let ours = header.iter().position(|c| c.starts_with("zk-curator"));
            columns = curator.zip(ours);
        } else if let Some((curator, ours)) = columns {
            let row = cells(line);
            if let (Some(c), Some(o)) = (row.get(curator), row.get(ours)) {
                rows.push((c.clone(), o.clone()));
            }
        }
        previous = line;
    }
    rows
}

#[test]
fn the_migration_guide_names_only_types_the_crate_has() {
    let declared = declared_names();
    let rows = migration_rows();
    assert!(rows.len() > 100, "the migration guide's tables were not found ({} rows)", rows.len());
    let mut unknown = BTreeSet::new();
    for (_, ours) in &rows {
        for name in type_names_in_code(ours) {
            if !declared.contains(&name) && !NOT_OURS.contains(&name.as_str()) {
                unknown.insert(name);
            }
        }
    }
    assert!(unknown.is_empty(), "the migration guide names types the crate does not have: {unknown:?}");
}

#[test]
fn the_migration_guide_calls_nothing_missing_that_the_crate_has() {
    let declared = declared_names();
    let mut stale = Vec::new();
    for (curator, ours) in migration_rows() {
        let lower = ours.to_lowercase();
        if !(lower.contains("not yet") || lower.contains("no equivalent")) {
            continue;
        }
        for name in type_names_in_code(&curator) {
            if declared.contains(&name) {
                stale.push(format!("`{name}` is said to be missing, but the crate declares it"));
            }
        }
    }
    assert!(stale.is_empty(), "stale rows in the migration guide:\n{}", stale.join("\n"));
}

#[test]
fn the_crate_docs_list_every_feature_flag() {
    let manifest = read(&root().join("Cargo.toml"));
    let features = manifest.split("\n[features]\n").nth(1).expect("a [features] table").split("\n[").next().unwrap();
    let lib = read(&root().join("src/lib.rs"));
    let table = lib.split("//! # Feature flags").nth(1).expect("a \"Feature flags\" section in the crate docs");
    let table = table.split("//! # ").next().unwrap();
    let mut missing = Vec::new();
    for line in features.lines() {
        let Some((name, _)) = line.split_once(" = ") else { continue };
        if name != "default" && !name.starts_with('#') && !table.contains(&format!("//! | `{name}` |")) {
            missing.push(name.to_string());
        }
    }
    assert!(missing.is_empty(), "feature flags missing from the crate docs' table: {missing:?}");
}
