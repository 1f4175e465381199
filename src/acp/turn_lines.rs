//! The two lines of every prompt turn, the `agent_message_chunk` update and the prompt result,
//! assembled from fixed text around their few varying values. They are byte for byte what the
//! generic encoders (`encode_notification_into`, `encode_result_into`) write for the same values
//! (tested below), without serialising a dozen constant keys and strings one by one: those were
//! the largest part of an agent's work per prompt round trip. `ski acp serve` and
//! `ski-mock-agent` both write their turns with them.

use crate::jsonrpc::RequestId;

/// Appends the `session/update` notification carrying `text` as an `agent_message_chunk` of
/// `session`, with `"jsonrpc":"2.0"` if `jsonrpc`.
pub fn message_chunk(
    session: &str,
    text: &str,
    jsonrpc: bool,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    message_chunk_with_id(session, text, None, jsonrpc, out)
}

/// [`message_chunk`] with the `messageId` of the message the chunk belongs to, when there is one.
pub fn message_chunk_with_id(
    session: &str,
    text: &str,
    message_id: Option<&str>,
    jsonrpc: bool,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(if jsonrpc {
        br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#
    } else {
        br#"{"method":"session/update","params":{"sessionId":"#
    });
    push_json_str(session, out)?;
    out.extend_from_slice(
        br#","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"#,
    );
    push_json_str(text, out)?;
    out.push(b'}');
    if let Some(message_id) = message_id {
        out.extend_from_slice(br#","messageId":"#);
        push_json_str(message_id, out)?;
    }
    out.extend_from_slice(b"}}}");
    Ok(())
}

/// Appends the success response to the prompt `id` with `stop_reason`, with `"jsonrpc":"2.0"`
/// if `jsonrpc`.
pub fn prompt_result(
    id: &RequestId,
    stop_reason: &str,
    jsonrpc: bool,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(if jsonrpc {
        br#"{"jsonrpc":"2.0","id":"#
    } else {
        br#"{"id":"#
    });
    serde_json::to_writer(&mut *out, id)?;
    out.extend_from_slice(br#","result":{"stopReason":"#);
    push_json_str(stop_reason, out)?;
    out.extend_from_slice(b"}}");
    Ok(())
}

/// Appends `text` as a JSON string, as serde_json writes it: between quotes as it is when none
/// of its bytes needs an escape (the usual text; one pass without branches per byte, which the
/// compiler vectorises), else through serde_json, which escapes byte by byte.
fn push_json_str(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let needs_escape = text.bytes().fold(false, |any, byte| {
        any | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    });
    if needs_escape {
        return serde_json::to_writer(&mut *out, text);
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::{ContentBlock, ContentChunk, SessionNotification, SessionUpdate};
    use crate::jsonrpc::{VersionField, encode_notification_into, encode_result_into};

    fn version(jsonrpc: bool) -> VersionField {
        if jsonrpc {
            VersionField::Required
        } else {
            VersionField::Optional
        }
    }

    /// Texts with everything JSON escapes, and text it leaves alone.
    const TEXTS: &[&str] = &[
        "",
        "hello",
        "quote \" backslash \\ slash /",
        "controls \u{0} \u{1f} \n \r \t \u{8} \u{c} del \u{7f}",
        "non-ascii é 漢字 🦀 \u{2028}",
    ];

    #[test]
    fn the_chunk_line_is_what_the_generic_encoder_writes() {
        for jsonrpc in [true, false] {
            for session in ["sess-1", "a \"quoted\" id"] {
                for text in TEXTS {
                    let params = serde_json::json!({
                        "sessionId": session,
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": text},
                        },
                    });
                    let mut expected = Vec::new();
                    encode_notification_into(
                        "session/update",
                        &params,
                        version(jsonrpc),
                        &mut expected,
                    )
                    .unwrap();
                    // The typed update `ski acp serve` would otherwise encode.
                    let typed = SessionNotification::new(
                        session,
                        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::text(
                            *text,
                        ))),
                    );
                    let mut from_type = Vec::new();
                    encode_notification_into(
                        "session/update",
                        &typed,
                        version(jsonrpc),
                        &mut from_type,
                    )
                    .unwrap();
                    assert_eq!(from_type, expected);
                    let mut line = b"queued before|".to_vec();
                    message_chunk(session, text, jsonrpc, &mut line).unwrap();
                    assert_eq!(
                        String::from_utf8(line).unwrap(),
                        format!("queued before|{}", String::from_utf8(expected).unwrap())
                    );
                    // With the id of its message, as the typed chunk writes it.
                    let mut chunk = ContentChunk::new(ContentBlock::text(*text));
                    chunk.message_id = Some(format!("msg_{text}"));
                    let typed =
                        SessionNotification::new(session, SessionUpdate::AgentMessageChunk(chunk));
                    let mut expected = Vec::new();
                    encode_notification_into(
                        "session/update",
                        &typed,
                        version(jsonrpc),
                        &mut expected,
                    )
                    .unwrap();
                    let mut line = Vec::new();
                    let id = format!("msg_{text}");
                    message_chunk_with_id(session, text, Some(&id), jsonrpc, &mut line).unwrap();
                    assert_eq!(line, expected);
                }
            }
        }
    }

    #[test]
    fn a_string_is_written_as_serde_json_writes_it() {
        let mut texts: Vec<String> = (0..=0x7f_u8)
            .map(|byte| format!("a{}b", byte as char))
            .collect();
        texts.extend(TEXTS.iter().map(|text| (*text).to_owned()));
        for text in texts {
            let mut line = Vec::new();
            push_json_str(&text, &mut line).unwrap();
            assert_eq!(line, serde_json::to_vec(&text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn the_result_line_is_what_the_generic_encoder_writes() {
        let ids = [
            RequestId::Number(7),
            RequestId::Number(-1),
            RequestId::String("s2c-\"1\"".to_owned()),
            RequestId::Null,
        ];
        for jsonrpc in [true, false] {
            for id in &ids {
                for reason in ["end_turn", "cancelled", TEXTS[3]] {
                    let mut expected = Vec::new();
                    encode_result_into(
                        id,
                        &serde_json::json!({"stopReason": reason}),
                        version(jsonrpc),
                        &mut expected,
                    )
                    .unwrap();
                    let mut line = Vec::new();
                    prompt_result(id, reason, jsonrpc, &mut line).unwrap();
                    assert_eq!(
                        String::from_utf8(line).unwrap(),
                        String::from_utf8(expected).unwrap()
                    );
                }
            }
        }
    }
}
