//! Compiles the catalogs (`catalog/*.toml`) and target profiles (`targets/*.toml`) into the
//! binary, so `ski-conformance` runs from any directory.

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
