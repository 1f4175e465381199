//! `cargo xtask modules`: the module index of `docs/ARCHITECTURE.md`, every source file of
//! every package with the first sentence of its `//!` doc, generated so it cannot fall behind
//! (`cargo xtask ci` fails when it differs from the sources).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

/// Options of `cargo xtask modules`.
#[derive(Debug, Args)]
pub struct ModulesArgs {
    /// Write the index into docs/ARCHITECTURE.md instead of checking it.
    #[arg(long)]
    pub write: bool,
}

/// The packages whose sources the index lists: name and source directory.
const PACKAGES: &[(&str, &str)] = &[
    ("ski", "src"),
    ("ski-mocks", "mocks/src"),
    ("ski-conformance", "conformance/src"),
    ("ski-conformance-sqlite", "conformance/sqlite/src"),
    ("ski-fuzz", "fuzz/src"),
    ("xtask", "xtask/src"),
];

/// The document that holds the index, relative to the workspace root.
const DOCUMENT: &str = "docs/ARCHITECTURE.md";
const BEGIN: &str =
    "<!-- module index: written by `cargo xtask modules --write`, checked by `cargo xtask ci` -->";
const END: &str = "<!-- end of the module index -->";

/// Checks (or with `--write` rewrites) the index in `docs/ARCHITECTURE.md`.
pub fn run(args: &ModulesArgs) -> Result<()> {
    let root = crate::ci::workspace_root();
    if args.write {
        write(&root)
    } else {
        check(&root)
    }
}

/// Fails, naming the command that mends it, when the document's index is not the sources'.
pub fn check(root: &Path) -> Result<()> {
    let document = std::fs::read_to_string(root.join(DOCUMENT))
        .with_context(|| format!("cannot read {DOCUMENT}"))?;
    let (_, current, _) = split(&document)?;
    if current != index(root)? {
        bail!(
            "the module index of {DOCUMENT} differs from the sources: run `cargo xtask modules --write` and commit"
        );
    }
    Ok(())
}

fn write(root: &Path) -> Result<()> {
    let path = root.join(DOCUMENT);
    let document =
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {DOCUMENT}"))?;
    let (before, _, after) = split(&document)?;
    let text = format!("{before}{}{after}", index(root)?);
    std::fs::write(&path, text).with_context(|| format!("cannot write {DOCUMENT}"))?;
    eprintln!("modules: {DOCUMENT} written");
    Ok(())
}

/// The document around the index, and the index: text before (through the begin marker's
/// line), the index, and the rest (from the end marker).
fn split(document: &str) -> Result<(&str, &str, &str)> {
    let begin = document
        .find(BEGIN)
        .with_context(|| format!("{DOCUMENT} has no line {BEGIN}"))?
        + BEGIN.len()
        + 1;
    let end = document[begin..]
        .find(END)
        .with_context(|| format!("{DOCUMENT} has no line {END}"))?
        + begin;
    Ok((&document[..begin], &document[begin..end], &document[end..]))
}

/// The index: one table per package, a row per source file in path order.
pub fn index(root: &Path) -> Result<String> {
    let mut text = String::new();
    for (package, dir) in PACKAGES {
        let _ = writeln!(text, "\n`{package}` (`{dir}/`):\n");
        text.push_str("| file | what it is for |\n|---|---|\n");
        let mut files = Vec::new();
        collect(&root.join(dir), &mut files)?;
        // By text, so `acp.rs` comes right before `acp/…`.
        files.sort_by_key(|file| file.display().to_string());
        for file in files {
            let source = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let relative = file
                .strip_prefix(root.join(dir))
                .unwrap_or(&file)
                .display()
                .to_string();
            let purpose = purpose(&source)
                .map(|text| without_links(&text))
                .unwrap_or_else(|| "(no `//!` doc)".to_owned());
            let _ = writeln!(text, "| `{relative}` | {} |", purpose.replace('|', "\\|"));
        }
    }
    text.push('\n');
    Ok(text)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// The first sentence of a file's leading `//!` paragraph, on one line.
fn purpose(source: &str) -> Option<String> {
    let mut paragraph = String::new();
    for line in source.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            break;
        };
        let text = text.trim();
        if text.is_empty() {
            break;
        }
        if !paragraph.is_empty() {
            paragraph.push(' ');
        }
        paragraph.push_str(text);
    }
    if paragraph.is_empty() {
        return None;
    }
    // A sentence ends at ". " outside backticks; the paragraph's end ends it too.
    let mut in_code = false;
    let chars: Vec<char> = paragraph.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        match c {
            '`' => in_code = !in_code,
            '.' if !in_code && chars.get(i + 1) == Some(&' ') => {
                return Some(chars[..=i].iter().collect());
            }
            _ => {}
        }
    }
    Some(paragraph)
}

/// Rustdoc's links as plain code: ``[`Name`]`` and ``[`Name`](path)`` become `` `Name` ``.
fn without_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(end) = rest[start..].find("`]").map(|at| at + start) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 1..end + 1]);
        rest = &rest[end + 2..];
        if rest.starts_with('(')
            && let Some(close) = rest.find(')')
        {
            rest = &rest[close + 1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purpose_is_the_first_sentence_of_the_first_doc_paragraph() {
        let source = "//! `cargo xtask ci`: the test command. It runs\n//! everything.\n//!\n//! More.\nuse x;";
        assert_eq!(
            purpose(source).as_deref(),
            Some("`cargo xtask ci`: the test command.")
        );
        assert_eq!(
            purpose("//! Reads `a. b` files\n//! and more\n").as_deref(),
            Some("Reads `a. b` files and more")
        );
        assert_eq!(purpose("use x;\n//! late"), None);
    }

    #[test]
    fn rustdoc_links_become_code() {
        assert_eq!(
            without_links("why ([`StopCause`]), see [`Ctx::has`](crate::Ctx::has) and [x]"),
            "why (`StopCause`), see `Ctx::has` and [x]"
        );
    }

    #[test]
    fn the_index_sits_between_its_markers() {
        let document = format!("# A\n{BEGIN}\nold\n{END}\ntail\n");
        let (before, index, after) = split(&document).unwrap();
        assert_eq!(before, format!("# A\n{BEGIN}\n"));
        assert_eq!(index, "old\n");
        assert_eq!(after, format!("{END}\ntail\n"));
        assert!(split("no markers").is_err());
    }

    #[test]
    fn the_committed_index_is_the_sources() {
        check(&crate::ci::workspace_root()).unwrap();
    }
}
