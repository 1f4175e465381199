//! Link settings of the project's programs (`ski`, and through `build = "../build.rs"` the
//! programs of `ski-mocks`).
//!
//! On Linux with glibc the relative relocations are packed (`-z pack-relative-relocs`, DT_RELR):
//! the binaries carry tens of thousands of them, and the dynamic loader reads a table of several
//! hundred KiB at every start before `main` runs. Packed, the table is a few KiB. Only programs
//! are affected, not libraries, tests or benchmarks.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
