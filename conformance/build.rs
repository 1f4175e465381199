//! Compiles the catalogs (`catalog/*.toml`) and target profiles (`targets/*.toml`) into the
//! binary, so `ski-conformance` runs from any directory, and turns the catalogs'
//! `[capabilities]` tables into constants (`vocabulary::capability`), so a check names a
//! capability the compiler knows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    for (dir, file) in [("catalog", "catalogs.rs"), ("targets", "targets.rs")] {
        let source = manifest.join(dir);
        println!("cargo:rerun-if-changed={}", source.display());
        let listing = toml_files(&source);
        let mut code = String::from("&[\n");
        for path in listing {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = writeln!(
                code,
                "    ({name:?}, include_str!({:?})),",
                path.display().to_string()
            );
        }
        code.push(']');
        if let Err(e) = std::fs::write(out.join(file), code) {
            panic!("cannot write {file} into OUT_DIR: {e}");
        }
    }
    let constants = capability_constants(&toml_files(&manifest.join("catalog")));
    if let Err(e) = std::fs::write(out.join("capabilities.rs"), constants) {
        panic!("cannot write capabilities.rs into OUT_DIR: {e}");
    }
}

/// One `pub const NAME: Capability` per capability a catalog declares, and `ALL`.
fn capability_constants(catalogs: &[PathBuf]) -> String {
    let mut declared = std::collections::BTreeMap::new();
    for path in catalogs {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        // A catalog that does not parse is reported, with its line, by the catalog tests.
        let Ok(table) = text.parse::<toml::Table>() else {
            continue;
        };
        let suite = table
            .get("suite")
            .and_then(|s| s.as_str())
            .unwrap_or_default()
            .to_owned();
        if let Some(capabilities) = table.get("capabilities").and_then(|c| c.as_table()) {
            for (name, about) in capabilities {
                let about = about.as_str().unwrap_or_default().to_owned();
                declared
                    .entry(name.clone())
                    .or_insert((suite.clone(), about));
            }
        }
    }
    let mut code = String::new();
    for (name, (suite, about)) in &declared {
        let _ = writeln!(code, "/// `{name}` ({suite}): {}", about.replace('\n', " "));
        let _ = writeln!(
            code,
            "pub const {}: Capability = Capability({name:?});",
            name.to_uppercase().replace('-', "_")
        );
    }
    let _ = writeln!(code, "/// Every capability the catalogs declare.");
    let _ = writeln!(code, "pub const ALL: &[Capability] = &[");
    for name in declared.keys() {
        let _ = writeln!(code, "    {},", name.to_uppercase().replace('-', "_"));
    }
    code.push_str("];\n");
    code
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
