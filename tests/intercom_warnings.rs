//! An ACP agent that floods its stdout with junk lines costs the server a bounded log: the first
//! warnings are logged whole, the rest counted and reported in a summary line, and no junk line
//! goes uncounted.

use crate::intercom_support;

use intercom_support::*;
use serde_json::Value;
use ski_mocks::slack::SlashCommand;

/// Junk lines the agent writes.
const JUNK: usize = 200_000;

/// An agent of the stream dialect: 200,000 lines that are not JSON, then a status, then it waits.
fn junk_agent() -> String {
    format!(
        r#"yes 'not json at all' | head -n {JUNK}
echo '{{"method":"status/update","params":{{"message":"junk done"}}}}'
while read line; do :; done"#
    )
}

/// The `suppressed` count of a summary log line (JSON log format).
fn suppressed(line: &str) -> Option<u64> {
    let record: Value = serde_json::from_str(line).ok()?;
    record["fields"]["suppressed"].as_u64()
}

#[tokio::test]
async fn a_flood_of_junk_lines_logs_a_bounded_number_of_warnings_and_counts_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slack = fake_slack().await;
    let config = write_config(
        dir.path(),
        &slack,
        &format!(
            "host_cli = \"/bin/sh\"\nhost_cli_args = [\"-c\", {:?}]\n[acp]\nstop_grace_ms = 300\n",
            junk_agent()
        ),
    );
    std::fs::create_dir_all(dir.path().join("ws-myproj")).expect("workspace dir");
    let server = Server::start(&config, &["--mode", "acp"]).await;
    let slash = |text: &str| {
        slack
            .slash_command(SlashCommand {
                command: SLASH.into(),
                text: text.into(),
                channel: CHANNEL_X.into(),
                user: ALICE.into(),
            })
            .expect("inject")
    };
    slash("session-start junk").ack(WAIT).await.expect("ack");
    slack
        .wait_for_message(|m| m.text() == "junk done", WAIT)
        .await
        .expect("the status after the junk");
    // The end of the run reports what is still counted, before the session's end is posted.
    slash("session-stop").ack(WAIT).await.expect("ack");
    slack
        .wait_for_message(|m| m.text().contains("Session ended"), WAIT)
        .await
        .expect("the session's end");
    // Logged after the run's summary: once it is read, so is everything before it.
    server.wait_log(r#""message":"session ended""#).await;
    let log = server.log();
    let whole = log
        .iter()
        .filter(|l| l.contains("received malformed JSON"))
        .count();
    let counted: u64 = log.iter().filter_map(|l| suppressed(l)).sum();
    assert!(
        log.len() < 200,
        "{} log lines for {JUNK} junk lines ({whole} of them malformed-JSON warnings)",
        log.len()
    );
    assert!(whole > 0, "the first junk lines are logged whole");
    assert_eq!(
        whole as u64 + counted,
        JUNK as u64,
        "every junk line is logged or counted ({whole} logged, {counted} counted)"
    );
    assert_eq!(server.stop().await, Some(0));
}
