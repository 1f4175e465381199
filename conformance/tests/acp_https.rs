//! The ACP-HTTP rows over `https://`, judged by the runner (a real `ski-conformance run`): the
//! reference served with a certificate made here (`--tls-cert`, `--tls-key`) and trusted through
//! the profile's `settings.http_ca` passes every row in the Streamable profile (the WebSocket
//! upgrade as `wss://`, the HTTP/2 preface after ALPN `h2`); trusting another CA, the rows fail
//! with the refused certificate named, not a hang.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use ski_conformance::Target;

use crate::{binaries, support};

/// The built binaries' directory (their build blocks, so it runs off the runtime's threads).
async fn bin_dir() -> std::path::PathBuf {
    tokio::task::spawn_blocking(|| {
        let reference = Target::load("reference").expect("the reference profile");
        binaries::prepare_binaries(&reference).expect("the binaries are built")
    })
    .await
    .expect("the build task ends")
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

/// Writes `ca.pem`, `other-ca.pem`, `server.pem` (for 127.0.0.1, signed by `ca.pem`) and
/// `server-key.pem` into `dir`.
fn make_pki(dir: &Path) {
    let (ca_params, ca_key, ca_pem) = authority("ski-conformance https test CA");
    let (_, _, other_pem) = authority("another CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().expect("server key");
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    let server = params.signed_by(&server_key, &issuer).expect("certificate");
    for (name, text) in [
        ("ca.pem", ca_pem.clone()),
        ("other-ca.pem", other_pem),
        ("server.pem", format!("{}{ca_pem}", server.pem())),
        ("server-key.pem", server_key.serialize_pem()),
    ] {
        std::fs::write(dir.join(name), text).expect("write a PEM file");
    }
}

/// `reference-http.toml` with TLS on its endpoint and `settings.http_ca = ca`, written to `dir`.
fn profile(dir: &Path, ca: &str) -> std::path::PathBuf {
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("targets/reference-http.toml"),
    )
    .expect("the reference-http profile");
    let plain = "http_args = \"--transport http --listen 127.0.0.1:0\"\n";
    assert!(
        reference.contains(plain),
        "reference-http.toml sets {plain}"
    );
    let tls = format!(
        "http_args = \"--transport http --listen 127.0.0.1:0 --tls-cert {cert} --tls-key {key}\"\nhttp_ca = \"{ca}\"\n",
        cert = dir.join("server.pem").display(),
        key = dir.join("server-key.pem").display(),
        ca = dir.join(ca).display(),
    );
    let text = reference
        .replace(plain, &tls)
        .replace("name = \"reference-http\"", "name = \"reference-https\"");
    let path = dir.join("reference-https.toml");
    std::fs::write(&path, text).expect("write the profile");
    path
}

async fn run_rows(
    dir: &Path,
    profile: &Path,
    ids: &[&str],
) -> (support::Output, Vec<(String, String, String)>) {
    let bin_dir = bin_dir().await.display().to_string();
    let out = dir.join("out");
    let (out_text, profile_text) = (out.display().to_string(), profile.display().to_string());
    let mut args = vec![
        "run",
        "--target",
        &profile_text,
        "--suite",
        "acp",
        "--bin-dir",
        &bin_dir,
        "--out",
        &out_text,
        "--quiet",
        "--no-rerun",
    ];
    for id in ids {
        args.extend(["--id", id]);
    }
    let run = support::ski_conformance(&args, dir).await;
    let all = crate::results::row_outcomes(&out);
    (run, all)
}

#[tokio::test]
async fn the_reference_over_https_passes_every_remote_row() {
    let dir = tempfile::tempdir().expect("a temp dir");
    make_pki(dir.path());
    let profile = profile(dir.path(), "ca.pem");
    let (run, all) = run_rows(dir.path(), &profile, &["ACP-HTTP-*", "ACP-CORE-001"]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    // The endpoint's rows, ACP-HTTP-001 to -017, all pass; the client-side rows after them
    // need a client command this profile does not declare and are skipped.
    let server_rows = |id: &str| {
        id.strip_prefix("ACP-HTTP-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n <= 17)
    };
    let passed = all
        .iter()
        .filter(|(id, outcome, _)| server_rows(id) && outcome == "pass");
    assert_eq!(passed.count(), 17, "{all:?}");
    for (id, outcome, failure) in &all {
        let expected = if id.starts_with("ACP-HTTP-") && !server_rows(id) {
            "skip"
        } else {
            "pass"
        };
        assert_eq!(outcome, expected, "{id}: {failure}");
    }
}

#[tokio::test]
async fn a_profile_trusting_another_ca_fails_the_rows_with_the_refused_certificate() {
    let dir = tempfile::tempdir().expect("a temp dir");
    make_pki(dir.path());
    let profile = profile(dir.path(), "other-ca.pem");
    let (run, all) = run_rows(dir.path(), &profile, &["ACP-HTTP-001", "ACP-HTTP-017"]).await;
    assert_ne!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(all.len(), 2, "{all:?}");
    for (id, outcome, failure) in &all {
        assert_ne!(outcome, "pass", "{id}");
        assert!(
            failure.contains("certificate"),
            "{id}: {outcome}: {failure}"
        );
    }
}
