//! What the tests that run foreign peers share: finding a program on `PATH`, the peers' folder
//! (`conformance/targets/peers`), installing a peer by its own script into `<target>/peers`, and
//! running a program (or a scenario against the fake Slack, plain or over TLS) to its end. Not
//! every test that includes it uses every part.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ski::storage::file_lock::FileLock;
use ski::transport::child::{ChildSpec, spawn};

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// `conformance/targets/peers`: each peer's install script and scenario.
pub fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/targets/peers")
}

/// `<target>/peers`, beside the build profiles.
pub fn install_root() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_ski-fake-slack"))
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("peers")
}

/// Runs a program to its end: its exit code and its output, both streams in order.
pub async fn run_to_end(spec: ChildSpec) -> (Option<i32>, String) {
    let mut child = spawn(spec.grace(Duration::from_millis(500))).expect("spawn");
    let mut output = String::new();
    while let Some((_, line)) = child.next_output_line().await {
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait().await.expect("exit");
    (status.code(), output)
}

/// Runs a peer's install script into `<target>/peers/<name>`; `None` (with a plain note) when
/// it fails.
pub async fn install(name: &str) -> Option<PathBuf> {
    let dest = install_root().join(name);
    // One install of a peer at a time: tests running side by side share its folder.
    std::fs::create_dir_all(install_root()).expect("the peers' folder");
    let lock_path = install_root().join(format!("{name}.lock"));
    let _installing = tokio::task::spawn_blocking(move || FileLock::exclusive(&lock_path))
        .await
        .expect("the lock task")
        .expect("the peer's install lock");
    let (code, output) = run_to_end(
        ChildSpec::new("install", "bash")
            .arg(peers_dir().join(name).join("install.sh"))
            .arg(&dest),
    )
    .await;
    if code == Some(0) {
        Some(dest)
    } else {
        println!("{name} peer: NOT RUN (install.sh failed, registry unreachable?):\n{output}");
        None
    }
}

/// Starts the fake Slack (`fake`), runs `scenario` with the fake's readiness line as its last
/// argument and no proxy in its environment, stops the fake, and checks that the scenario ended
/// with `<name>: ok`.
pub async fn run_against_fake(name: &str, fake: ChildSpec, scenario: ChildSpec) {
    let mut fake = spawn(fake).expect("spawn the fake");
    let ready = fake
        .next_line()
        .await
        .expect("read")
        .expect("readiness line");
    let mut scenario = scenario.arg(&ready);
    for proxy in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        scenario = scenario.env_remove(proxy);
    }
    let (code, output) = run_to_end(scenario).await;
    fake.shutdown().await.expect("stop the fake");
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains(&format!("{name}: ok")), "{output}");
    println!("{name} peer: ran, ok");
}

/// How `ski-fake-slack serve` serves a scenario.
#[derive(Debug, Clone, Copy)]
pub enum Transport {
    Plain,
    /// `serve --tls`: the scenario trusts the fake's CA the way each runtime trusts an extra CA,
    /// `SSL_CERT_FILE` for Python, `NODE_EXTRA_CA_CERTS` for Node (both are set).
    Tls,
}

/// A signing secret of the fake's own, for the apps that take the Events API over HTTP.
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Starts the fake binary (with [`SIGNING_SECRET`], over `transport`), runs `scenario` with the
/// readiness line as its last argument, and checks that it ends with `<name>: ok`.
pub async fn run_against_fake_slack(name: &str, scenario: ChildSpec, transport: Transport) {
    let ca_dir = tempfile::tempdir().expect("a directory for the CA");
    let ca_file = ca_dir.path().join("fake-slack-ca.pem");
    let mut fake = ChildSpec::new("ski-fake-slack", env!("CARGO_BIN_EXE_ski-fake-slack"))
        .args(["serve", "--signing-secret", SIGNING_SECRET])
        .grace(Duration::from_millis(500));
    let mut scenario = scenario;
    if let Transport::Tls = transport {
        fake = fake.arg("--tls").arg("--ca-file").arg(&ca_file);
        scenario = scenario
            .env("SSL_CERT_FILE", &ca_file)
            .env("NODE_EXTRA_CA_CERTS", &ca_file);
    }
    run_against_fake(name, fake, scenario).await;
}

/// A Python peer's program: `<venv>/bin/python <peers>/<script>`, once `install` worked; `None`
/// (with a plain note) when `python3` is missing or the install failed.
pub async fn python_peer(install_name: &str, script: &str) -> Option<(PathBuf, ChildSpec)> {
    if !on_path("python3") {
        println!("{install_name} peer: NOT RUN (python3 is not on PATH)");
        return None;
    }
    let venv = install(install_name).await?;
    let program =
        ChildSpec::new(install_name, venv.join("bin/python")).arg(peers_dir().join(script));
    Some((venv, program))
}

/// A Node peer's program: `node <peers>/<script>` with `NODE_PATH` at what `install` put in
/// place; `None` (with a plain note) when `node` or `npm` is missing or the install failed.
pub async fn node_peer(install_name: &str, script: &str) -> Option<ChildSpec> {
    if !on_path("node") || !on_path("npm") {
        println!("{install_name} peer: NOT RUN (node or npm is not on PATH)");
        return None;
    }
    let modules = install(install_name).await?;
    Some(
        ChildSpec::new(install_name, "node")
            .arg(peers_dir().join(script))
            .env("NODE_PATH", modules.join("node_modules")),
    )
}
