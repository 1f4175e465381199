//! `ski acp serve` on stdio under a client that writes requests and never reads the answers: the
//! server stops reading once its writer is backed up, so what it takes in is bounded by its pipes
//! and its send queue, and once the answers are read again every request is answered.

use crate::acp_backpressure_support;

use std::sync::Arc;

use acp_backpressure_support::{
    PATIENCE, Progress, Unsettled, pipe_capacity, settle, write_tracked,
};
use serde_json::Value;
use ski::jsonrpc::framing::READ_CHUNK;
use ski::jsonrpc::peer::DEFAULT_MAX_IN_FLIGHT_SENDS;
use ski::transport::child::{self, ChildSpec};
use tokio::io::{AsyncBufReadExt, BufReader};

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// A method no agent has: every request is answered at once with -32601, nothing else happens.
const METHOD: &str = "ski/backpressure-probe";

/// One request line of a fixed length (string ids of eight digits).
fn request(n: usize) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{n:08}\",\"method\":\"{METHOD}\"}}\n")
}

#[tokio::test]
async fn a_client_that_does_not_read_stops_the_server_reading_and_loses_no_answer() {
    let mut agent = child::spawn(ChildSpec::new("agent", SKI).args(["acp", "serve"]))
        .expect("spawn ski acp serve");
    let pid = agent.pid();
    let stdin = agent.take_stdin().expect("stdin");
    let stdout = agent.take_stdout().expect("stdout");
    let request_bytes = request(0).len() as u64;
    // What the server may hold once it stops: its stdin pipe full, one read chunk in its line
    // reader, and the requests whose answers fill its stdout pipe (an answer is longer than 64
    // bytes), wait in the send queue or are on their way there.
    let answers_held =
        pipe_capacity(stdout.get_ref()) / 64 + DEFAULT_MAX_IN_FLIGHT_SENDS as u64 + 16;
    let bound = pipe_capacity(stdin.get_ref()) + READ_CHUNK as u64 + answers_held * request_bytes;
    // Four times what a bounded server can take in: one that reads on regardless takes it all.
    let requests = usize::try_from(4 * bound / request_bytes).expect("a request count");
    let progress = Arc::new(Progress::default());
    let bytes = (0..requests)
        .flat_map(|n| request(n).into_bytes())
        .collect();
    let writer = tokio::spawn({
        let progress = progress.clone();
        async move { write_tracked(stdin, bytes, &progress).await }
    });

    match settle(&progress, pid, bound).await {
        Ok(_) => {}
        Err(Unsettled::Overrun(written)) => panic!(
            "the server took in {written} bytes of requests ({} of {requests} written) while \
             nobody read its answers; a server with backpressure stops by {bound} bytes",
            written / request_bytes
        ),
        Err(Unsettled::Timeout(written)) => panic!(
            "the server neither stopped reading nor read everything within {PATIENCE:?} \
             ({written} bytes written)"
        ),
    }

    // Reading the answers lets the server go on: every request is answered, in order.
    let mut answers = BufReader::new(stdout).lines();
    for n in 0..requests {
        let line = tokio::time::timeout(PATIENCE, answers.next_line())
            .await
            .expect("answers keep coming once they are read")
            .expect("stdout readable")
            .expect("an answer for every request");
        let answer: Value = serde_json::from_str(&line).expect("an answer is JSON");
        assert_eq!(answer["id"], format!("{n:08}"), "{line}");
        assert_eq!(answer["error"]["code"], -32601, "{line}");
    }
    let stdin = writer.await.expect("the writer finishes");
    drop(stdin);
    let status = tokio::time::timeout(PATIENCE, agent.wait())
        .await
        .expect("the server exits at end of input")
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
    assert!(agent.shutdown().await.expect("teardown").group_gone);
}
