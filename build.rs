//! Link settings of the project's programs (`ski`, and through `build = "../build.rs"` the
//! programs of `ski-mocks`).
//!
//! On Linux with glibc the programs are linked as position-dependent executables (`-no-pie`) with
//! packed relative relocations (`-z pack-relative-relocs`, DT_RELR, for what remains). As
//! position-independent executables they carry some 30,000 relative relocations: before `main`
//! runs, the dynamic loader writes every relocated word, and each page it writes is copied on
//! first touch: about 100 page faults and half a millisecond at every start of an agent (`perf
//! stat` on `ski acp serve`). Position-dependent, the words are final at link time. The price is
//! that the program image is not placed at a random address (the libraries, heap and stack still
//! are); tests and benchmarks are not affected.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-arg-bins=-no-pie");
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    startup_order();
}

/// The functions `ski acp serve` runs from `exec` to its first answers, placed side by side in
/// the `ski` program by LLD's `--symbol-ordering-file` (LLD links Rust's x86_64 Linux programs
/// since 1.90; older toolchains use the system's linker and get no list). Spread over the 14 MB
/// of code they cost one page fault per 64 KiB window they touch; together they fit in a few.
/// The list is `src/bin/ski.order`, written by `cargo xtask startup-order`; a name the build no
/// longer has is skipped. `SKI_NO_STARTUP_ORDER=1` links without it (to measure what it gives).
fn startup_order() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_PKG_NAME") != "ski" {
        return;
    }
    let list = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("src/bin/ski.order");
    println!("cargo::rerun-if-changed={}", list.display());
    println!("cargo::rerun-if-env-changed=SKI_NO_STARTUP_ORDER");
    let lld_by_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && rustc_minor().is_some_and(|minor| minor >= 90);
    // A linker chosen by hand (`-C linker`, `-C link-self-contained`, `-fuse-ld`) may not be LLD.
    let linker_chosen = var("CARGO_ENCODED_RUSTFLAGS").contains("link")
        || std::env::vars()
            .any(|(name, _)| name.starts_with("CARGO_TARGET_") && name.ends_with("_LINKER"));
    if !lld_by_default
        || linker_chosen
        || std::env::var_os("SKI_NO_STARTUP_ORDER").is_some()
        || !list.exists()
    {
        return;
    }
    println!(
        "cargo::rustc-link-arg-bin=ski=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo::rustc-link-arg-bin=ski=-Wl,--no-warn-symbol-ordering");
}

/// The minor version of the compiler building this (`1.N.x`), from `rustc --version`.
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let output = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("1"), Some(minor)) => minor.parse().ok(),
        _ => None,
    }
}
