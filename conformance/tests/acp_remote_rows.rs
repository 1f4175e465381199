//! The ACP-HTTP rows and the transport rows over ACP's remote `/acp` endpoint, judged by the
//! runner (a real `ski-conformance run`): the reference passes them in the Streamable profile,
//! and the reference behind the corpus's HTTP front with one defect fails exactly the row that
//! defect breaks, the rest passing.

use crate::binaries;
use crate::corpus_http_front::{self, Defect};
use crate::support;

use ski::transport::child::{ChildSpec, spawn};
use ski_conformance::Target;

/// The built binaries' directory (their build blocks, so it runs off the runtime's threads).
async fn bin_dir() -> std::path::PathBuf {
    tokio::task::spawn_blocking(|| {
        let reference = Target::load("reference").expect("the reference profile");
        binaries::prepare_binaries(&reference).expect("the binaries are built")
    })
    .await
    .expect("the build task ends")
}

#[tokio::test]
async fn the_reference_over_streamable_http_passes_the_remote_rows_and_the_transport_rows() {
    let bin_dir = bin_dir().await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("out");
    let (bin_dir, out_text) = (bin_dir.display().to_string(), out.display().to_string());
    let run = support::ski_conformance(
        &[
            "run",
            "--target",
            "reference-http",
            "--suite",
            "acp",
            "--bin-dir",
            &bin_dir,
            "--out",
            &out_text,
            "--quiet",
            // The agent rows only: the client rows (018 on) judge a client, not the endpoint.
            "--id",
            "ACP-HTTP-00*",
            "--id",
            "ACP-HTTP-01[0-7]",
            "--id",
            "WS-001",
            "--id",
            "ACP-CORE-001",
            "--id",
            "ACP-CORE-005",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let all = crate::results::row_outcomes(&out);
    let remote: Vec<_> = all
        .iter()
        .filter(|(id, _, _)| id.starts_with("ACP-HTTP-"))
        .collect();
    assert_eq!(remote.len(), 17, "{all:?}");
    for (id, outcome, failure) in &all {
        let expected = if id == "WS-001" { "skip" } else { "pass" };
        assert_eq!(outcome, expected, "{id}: {failure}");
    }
}

/// `ski acp serve --transport http` on a free port: the process and its `HOST:PORT`.
async fn serve(bin_dir: &std::path::Path) -> (ski::transport::child::Child, String) {
    let spec = ChildSpec::new("serve", bin_dir.join("ski")).args([
        "acp",
        "serve",
        "--permission-mode",
        "disabled",
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut child = spawn(spec).expect("ski acp serve starts");
    while let Some((_, line)) = child.next_output_line().await {
        if let Some(authority) = corpus_http_front::http_authority(&line) {
            return (child, authority);
        }
    }
    panic!("ski acp serve printed no http:// address");
}

#[tokio::test]
async fn a_reference_behind_a_front_that_accepts_batches_fails_only_the_batch_row() {
    let bin_dir = bin_dir().await;
    let (agent, upstream) = serve(&bin_dir).await;
    let (front, relay) = corpus_http_front::start(upstream, Defect::AcceptsBatch)
        .await
        .expect("the front listens");
    let url = format!("http://{front}/acp");
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("out");
    let out_text = out.display().to_string();
    let run = support::ski_conformance(
        &[
            "run",
            "--agent-url",
            &url,
            "--no-discover",
            "--capability",
            "agent",
            "--capability",
            "acp-http-streamable",
            "--capability",
            "session",
            "--suite",
            "acp",
            "--out",
            &out_text,
            "--quiet",
            "--no-rerun",
            "--id",
            "ACP-HTTP-00*",
            "--id",
            "ACP-HTTP-010",
        ],
        dir.path(),
    )
    .await;
    relay.abort();
    drop(agent);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let all = crate::results::row_outcomes(&out);
    assert_eq!(all.len(), 10, "{all:?}");
    for (id, outcome, failure) in &all {
        if id == "ACP-HTTP-010" {
            assert_eq!(outcome, "fail", "{id}");
            assert!(failure.contains("the status of a batch POST"), "{failure}");
            assert!(failure.contains("202"), "{failure}");
        } else {
            assert_eq!(outcome, "pass", "{id}: {failure}");
        }
    }
}
