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
/// the `ski` program (`--symbol-ordering-file` of LLD, the linker of Rust's x86_64 Linux
/// toolchains since 1.90). Spread over the 14 MB of code they cost one page fault per 64 KiB
/// window they touch; together they fit in a few. The list is `src/bin/ski.order`, written by
/// `cargo xtask startup-order`; a name the build no longer has is skipped.
fn startup_order() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let list = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("src/bin/ski.order");
    println!("cargo::rerun-if-changed={}", list.display());
    println!("cargo::rerun-if-env-changed=SKI_NO_STARTUP_ORDER");
    if var("CARGO_PKG_NAME") != "ski" {
        return;
    }
    let lld_by_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
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
