//! `ski-fake-slack`: a fake Slack.
fn main() {}
