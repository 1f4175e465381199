//! The remote `/acp` transport over TLS: `ski acp serve --transport http --tls-cert --tls-key`
//! with certificates made here (a CA and a server certificate for 127.0.0.1 it signed), `ski acp
//! client connect` doing prompt turns over `https://` in both profiles with `--ca-cert`, a client
//! that trusts another CA refused at once with a reason, and certificate or key files that cannot
//! be used refused with exit code 2.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use ski::transport::child::{self, Child, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// PEM files of one test: a CA, a server certificate for 127.0.0.1 and localhost signed by it
/// (the chain, server first), its key, and a second CA that signed nothing.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn authority(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let pem = params.self_signed(&key).expect("CA certificate").pem();
    (params, key, pem)
}

impl Pki {
    fn make() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca_params, ca_key, ca_pem) = authority("ski https test CA");
        let (_, _, other_pem) = authority("another CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate().expect("server key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        let server = params
            .signed_by(&server_key, &issuer)
            .expect("server certificate");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        Self {
            ca: write("ca.pem", &ca_pem),
            other_ca: write("other-ca.pem", &other_pem),
            cert: write("server.pem", &format!("{}{ca_pem}", server.pem())),
            key: write("server-key.pem", &server_key.serialize_pem()),
            _dir: dir,
        }
    }
}

/// A running `ski acp serve --transport http` with TLS on a free loopback port.
struct Served {
    agent: Child,
    url: String,
}

impl Served {
    async fn start(pki: &Pki) -> Self {
        let args = [
            "acp".as_ref(),
            "serve".as_ref(),
            "--transport".as_ref(),
            "http".as_ref(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--tls-cert".as_ref(),
            pki.cert.as_os_str(),
            "--tls-key".as_ref(),
            pki.key.as_os_str(),
        ];
        let args: Vec<String> = args
            .iter()
            .map(|arg: &&std::ffi::OsStr| arg.to_string_lossy().into_owned())
            .collect();
        let mut agent =
            child::spawn(ChildSpec::new("agent", SKI).args(args)).expect("spawn ski acp serve");
        let url = crate::acp_serve_support::listening_url(&mut agent, PATIENCE).await;
        assert!(
            url.starts_with("https://127.0.0.1:") && url.ends_with("/acp"),
            "{url}"
        );
        Self { agent, url }
    }

    async fn stop(self) {
        self.agent
            .signal_group(Signal::SIGTERM)
            .expect("signal the agent");
        let status = within("the agent to stop on SIGTERM", self.agent.wait())
            .await
            .expect("exit status");
        assert_eq!(status.code(), Some(0));
        assert!(self.agent.shutdown().await.expect("teardown").group_gone);
    }
}

fn client_turn(url: &str, profile: &str, ca: &Path) -> std::process::Output {
    std::process::Command::new(SKI)
        .args([
            "acp",
            "client",
            "connect",
            "--transport",
            "http",
            "--endpoint",
            url,
            "--profile",
            profile,
            "--prompt",
            "hello over tls",
        ])
        .arg("--ca-cert")
        .arg(ca)
        .env_remove("RUST_LOG")
        .output()
        .expect("run ski acp client connect")
}

#[tokio::test]
async fn the_client_does_prompt_turns_over_https_in_both_profiles() {
    let pki = Pki::make();
    let served = Served::start(&pki).await;
    for profile in ["http", "ws"] {
        let (url, ca) = (served.url.clone(), pki.ca.clone());
        let run = tokio::task::spawn_blocking(move || client_turn(&url, profile, &ca));
        let output = within("the client", run).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{profile}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout, "hello over tls\nstopReason: end_turn\n",
            "{profile}"
        );
    }
    served.stop().await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_at_once_and_says_why() {
    let pki = Pki::make();
    let served = Served::start(&pki).await;
    for profile in ["http", "ws"] {
        let (url, ca) = (served.url.clone(), pki.other_ca.clone());
        let started = Instant::now();
        let run = tokio::task::spawn_blocking(move || client_turn(&url, profile, &ca));
        let output = within("the client", run).await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{profile}: {stderr}");
        assert!(
            stderr.contains("refused the server's certificate") && stderr.contains("--ca-cert"),
            "{profile}: {stderr}"
        );
        // Its reconnect attempts (2, from 200 ms) are all the time it takes: no hang.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{profile}: {:?}",
            started.elapsed()
        );
    }
    served.stop().await;
}

fn serve_once(args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(SKI)
        .args([
            "acp",
            "serve",
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run ski acp serve")
}

#[test]
fn certificates_and_keys_that_cannot_be_used_exit_2_with_the_reason() {
    let pki = Pki::make();
    let missing = pki.ca.with_file_name("missing.pem");
    let cases: [(&str, [&Path; 2], &str); 4] = [
        (
            "a missing certificate",
            [&missing, &pki.key],
            "cannot read the certificate file",
        ),
        (
            "a key file as certificate",
            [&pki.key, &pki.key],
            "no PEM CERTIFICATE block",
        ),
        (
            "a certificate as key",
            [&pki.cert, &pki.cert],
            "no usable private key",
        ),
        (
            "a key of another certificate",
            [&pki.ca, &pki.key],
            "do not make a server identity",
        ),
    ];
    for (what, [cert, key], reason) in cases {
        let output = serve_once(&[
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(reason), "{what}: {stderr}");
    }
    let output = serve_once(&["--tls-cert".as_ref(), pki.cert.as_os_str()]);
    assert_eq!(output.status.code(), Some(2), "--tls-cert alone");
    let output = std::process::Command::new(SKI)
        .args([
            "acp",
            "serve",
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert")
        .arg(&pki.cert)
        .arg("--tls-key")
        .arg(&pki.key)
        .output()
        .expect("run ski acp serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("only to --transport http"), "{stderr}");
}
