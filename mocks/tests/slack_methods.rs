//! The Web API coverage matrix: `mocks/SLACK-METHODS.md` is what `ski-fake-slack methods
//! --markdown` prints now, it lists at least 80 methods, each of them is served, and any other
//! method answers `unknown_method`.

use crate::slack_support;

use std::process::Command;

use ski_mocks::slack::{Config, FakeSlack, method_names, methods_markdown};
use slack_support::api;

const MATRIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/SLACK-METHODS.md");

#[test]
fn the_checked_in_matrix_is_current() {
    let checked_in = std::fs::read_to_string(MATRIX).expect("mocks/SLACK-METHODS.md");
    assert!(
        checked_in == methods_markdown(),
        "mocks/SLACK-METHODS.md is stale: run `ski-fake-slack methods --markdown > mocks/SLACK-METHODS.md`"
    );
    let printed = Command::new(env!("CARGO_BIN_EXE_ski-fake-slack"))
        .args(["methods", "--markdown"])
        .output()
        .expect("ski-fake-slack methods");
    assert!(printed.status.success());
    assert_eq!(String::from_utf8_lossy(&printed.stdout), checked_in);
    assert!(
        method_names().len() >= 80,
        "{} methods",
        method_names().len()
    );
}

#[tokio::test]
async fn every_listed_method_is_served_and_no_other() {
    let slack = FakeSlack::start(Config::default()).await.expect("start");
    for method in method_names() {
        let token = if method == "apps.connections.open" {
            "xapp-1"
        } else {
            "xoxp-1"
        };
        let url = format!("{}/{method}", slack.api_base_url());
        let answer = api(&url, Some("application/json"), Some(token), b"{}").await;
        assert_ne!(
            answer["error"], "unknown_method",
            "{method} is listed but not served"
        );
    }
    let url = format!("{}/chat.postMessageTwice", slack.api_base_url());
    let answer = api(&url, Some("application/json"), Some("xoxb-1"), b"{}").await;
    assert_eq!(answer["error"], "unknown_method");
}
