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
}
