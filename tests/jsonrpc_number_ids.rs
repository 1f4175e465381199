//! Request ids that are JSON numbers but not plain 64-bit integers (beyond i64, with a fraction or
//! an exponent, `-0`) are answered with the id exactly as it was written, through a real
//! `ski acp serve` over stdio.

use std::time::Duration;

use serde_json::Value;
use ski::transport::child::{self, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any answer may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Id texts as a client may write them; each must come back byte for byte.
const IDS: &[&str] = &[
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1.0",
    "1e2",
    "1E+2",
    "-0",
    "0.5",
    "-1.25e-3",
    "9223372036854775807",
    "-9223372036854775808",
    "7",
    "\"7\"",
];

#[tokio::test]
async fn every_json_number_id_is_echoed_as_it_was_written() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args(["acp", "serve"]))
        .expect("spawn ski acp serve");
    for id in IDS {
        for (method, params) in [
            ("initialize", r#"{"protocolVersion":1}"#),
            ("ski/no-such-method", "{}"),
        ] {
            let request =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
            agent.send_line(&request).await.expect("write a request");
            let line = tokio::time::timeout(PATIENCE, agent.next_line())
                .await
                .expect("an answer in time")
                .expect("stdout readable")
                .expect("an answer");
            let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
            assert!(
                line.starts_with(&prefix),
                "id {id} of {method} not echoed as written: {line}"
            );
            let answer: Value = serde_json::from_str(&line).expect("the answer is JSON");
            if method == "initialize" {
                assert_eq!(answer["result"]["protocolVersion"], 1, "{line}");
            } else {
                assert_eq!(answer["error"]["code"], -32601, "{line}");
            }
        }
    }
    agent.close_stdin();
    let status = tokio::time::timeout(PATIENCE, agent.wait())
        .await
        .expect("exit at end of input")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(agent.shutdown().await.expect("teardown").group_gone);
}
