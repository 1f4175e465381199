//! What the fake Slack saw in one scenario (the target's Web API requests and the messages it
//! posted, the last ones, each cut short), written into the scenario's wire log when its world goes
//! away, so that a failing intercom row shows what the target asked and posted beside its output.

use ski_mocks::slack::FakeSlack;

use crate::Ctx;

/// The wire-log channel of the fake Slack's record.
const CHANNEL: &str = "fake-slack";

/// How many of the last requests and of the last messages are written.
const KEPT: usize = 100;

/// The most text one entry keeps of a request's parameters or a message.
const TEXT_BYTES: usize = 1024;

/// Writes the fake's record into `ctx`'s wire log.
pub fn write(ctx: &Ctx, slack: &FakeSlack) {
    let wire = ctx.wire();
    let requests = slack.requests();
    let left_out = requests.len().saturating_sub(KEPT);
    if left_out > 0 {
        wire.note(CHANNEL, &format!("{left_out} earlier requests left out"));
    }
    for request in &requests[left_out..] {
        let params = serde_json::Value::Object(request.params.clone()).to_string();
        wire.note(
            CHANNEL,
            &format!(
                "request #{} {} {} -> {} {}",
                request.seq,
                request.http_method,
                request.method,
                request.status,
                cut(&params)
            ),
        );
    }
    let messages = slack.all_messages();
    let left_out = messages.len().saturating_sub(KEPT);
    if left_out > 0 {
        wire.note(CHANNEL, &format!("{left_out} earlier messages left out"));
    }
    for message in &messages[left_out..] {
        wire.note(
            CHANNEL,
            &format!(
                "message in {} ts {} thread {}: {}",
                message.channel,
                message.ts(),
                message.thread_ts().unwrap_or("-"),
                cut(&message.message.to_string())
            ),
        );
    }
}

fn cut(text: &str) -> String {
    if text.len() <= TEXT_BYTES {
        return text.to_owned();
    }
    let mut end = TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}
