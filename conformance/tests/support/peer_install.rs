//! Installing the foreign peers of `conformance/targets/peers` by their own scripts into
//! `<target>/peers`, where the profiles look for them, for the tests that run them.

use std::path::{Path, PathBuf};

use ski::storage::file_lock::FileLock;
use ski::transport::child::{ChildSpec, spawn};

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `<target>/peers`, where the profiles look for installed peers (`{bin_dir}/../peers`).
pub fn install_root() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("peers")
}

/// Runs a peer's install script into `<target>/peers/<name>`; `None` (with a plain note) when it
/// fails.
pub async fn install(name: &str) -> Option<PathBuf> {
    let dest = install_root().join(name);
    // One install of a peer at a time: tests running side by side (and the mocks' tests) share
    // its folder, and two installs into one (`npm install`, `python3 -m venv`) break each other.
    std::fs::create_dir_all(install_root()).expect("the peers' folder");
    let lock_path = install_root().join(format!("{name}.lock"));
    let _installing = tokio::task::spawn_blocking(move || FileLock::exclusive(&lock_path))
        .await
        .expect("the lock task")
        .expect("the peer's install lock");
    let script = workspace()
        .join("conformance/targets/peers")
        .join(name)
        .join("install.sh");
    let mut child = spawn(ChildSpec::new("install", "sh").arg(script).arg(&dest)).expect("sh");
    child.close_stdin();
    let mut output = String::new();
    while let Some((_, line)) = child.next_output_line().await {
        output.push_str(&line);
        output.push('\n');
    }
    if child.wait().await.is_ok_and(|status| status.success()) {
        Some(dest)
    } else {
        println!("{name} peer: NOT RUN (install.sh failed, registry unreachable?):\n{output}");
        None
    }
}
