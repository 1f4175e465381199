//! What a prompt turn reads of its prompt: the session it names and its text, read from the
//! params' text through a borrowed view in one pass (no tree, no list of blocks), or from their
//! `Value` form when they have another shape, with the same result.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use serde_json::Value;

use super::inbound::Inbound;
use super::params::{Params, Text};
use super::state::SessionId;

/// The text of a prompt: the text blocks of `session/prompt` joined by spaces, or the `text`
/// of an intercom `prompt/send`.
pub fn prompt_text(inbound: &Inbound) -> Option<String> {
    match inbound.method.as_str() {
        "session/prompt" => {
            if let Some(view) = inbound.params.as_ref()?.view::<PromptView<'_>>() {
                return view.prompt.map(TextBlocks::into_string);
            }
            let blocks = inbound.param("prompt")?.as_array()?;
            let mut texts = TextBlocks::default();
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .for_each(|piece| texts.push(Cow::Borrowed(piece)));
            Some(texts.into_string())
        }
        "prompt/send" => inbound.param_str("text").map(str::to_owned),
        _ => None,
    }
}

/// The session a `session/prompt` names and its text, read through the borrowed view when the
/// params have its shape.
pub(super) fn prompt_session_and_text(inbound: &Inbound) -> (Option<SessionId>, Arc<str>) {
    if inbound.method == "session/prompt"
        && let Some(view) = inbound
            .params
            .as_ref()
            .and_then(Params::view::<PromptView<'_>>)
    {
        let text = view
            .prompt
            .map_or_else(|| Arc::from(""), TextBlocks::shared);
        return (view.session_id.map(|id| SessionId::from(id.0)), text);
    }
    (
        inbound.param_str("sessionId").map(SessionId::from),
        prompt_text(inbound).unwrap_or_default().into(),
    )
}

/// The members of `session/prompt` params a turn reads, borrowed from the received text.
/// Params of any other shape (a member of another type, a repeated member) fail this view and
/// are read from their `Value` form instead.
#[derive(serde::Deserialize)]
struct PromptView<'a> {
    #[serde(borrow, rename = "sessionId")]
    session_id: Option<Text<'a>>,
    #[serde(borrow)]
    prompt: Option<TextBlocks<'a>>,
}

/// One content block of the prompt, as far as a turn reads it.
#[derive(serde::Deserialize)]
struct BlockView<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Text<'a>>,
    #[serde(borrow)]
    text: Option<Text<'a>>,
}

impl<'a> BlockView<'a> {
    /// The text of a `text` block.
    fn into_text(self) -> Option<Cow<'a, str>> {
        match self.kind {
            Some(Text(kind)) if kind == "text" => self.text.map(|text| text.0),
            _ => None,
        }
    }
}

/// The texts of a prompt's text blocks, joined by spaces as the blocks are read.
#[derive(Default)]
enum TextBlocks<'a> {
    /// No text block.
    #[default]
    None,
    /// One text block (the usual prompt), still borrowed.
    One(Cow<'a, str>),
    /// Several, joined.
    Joined(String),
}

impl<'a> TextBlocks<'a> {
    fn push(&mut self, text: Cow<'a, str>) {
        *self = match std::mem::take(self) {
            TextBlocks::None => TextBlocks::One(text),
            TextBlocks::One(first) => TextBlocks::Joined(format!("{first} {text}")),
            TextBlocks::Joined(mut joined) => {
                joined.push(' ');
                joined.push_str(&text);
                TextBlocks::Joined(joined)
            }
        };
    }

    fn into_string(self) -> String {
        match self {
            TextBlocks::None => String::new(),
            TextBlocks::One(text) => text.into_owned(),
            TextBlocks::Joined(joined) => joined,
        }
    }

    /// The text, copied once into a shared string.
    fn shared(self) -> Arc<str> {
        match self {
            TextBlocks::None => Arc::from(""),
            TextBlocks::One(text) => Arc::from(text),
            TextBlocks::Joined(joined) => Arc::from(joined),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for TextBlocks<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BlocksVisitor<'a>(PhantomData<&'a str>);

        impl<'de: 'a, 'a> Visitor<'de> for BlocksVisitor<'a> {
            type Value = TextBlocks<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of content blocks")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextBlocks<'a>, A::Error> {
                let mut texts = TextBlocks::None;
                while let Some(block) = seq.next_element::<BlockView<'a>>()? {
                    if let Some(text) = block.into_text() {
                        texts.push(text);
                    }
                }
                Ok(texts)
            }
        }

        deserializer.deserialize_seq(BlocksVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::value::RawValue;

    use super::*;

    fn prompt(params: &str) -> Inbound {
        Inbound {
            method: "session/prompt".to_owned(),
            id: None,
            params: Some(Params::new(
                RawValue::from_string(params.to_owned()).unwrap(),
            )),
            jsonrpc: true,
        }
    }

    /// The view and the `Value` form (for params the view refuses) read the same session and
    /// text.
    #[rstest]
    #[case::one_block(
        r#"{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}"#,
        Some("s1"),
        Some("hi")
    )]
    #[case::text_blocks_joined(
        r#"{"sessionId":"s1","prompt":[{"type":"text","text":"a"},{"type":"image","data":"x"},{"text":"b","type":"text"},{"type":"text","text":"c"}]}"#,
        Some("s1"),
        Some("a b c")
    )]
    #[case::escapes_undone(
        r#"{"sessionId":"s\"1","prompt":[{"type":"text","text":"line\nbreak é"}]}"#,
        Some("s\"1"),
        Some("line\nbreak é")
    )]
    #[case::no_text_block(
        r#"{"sessionId":"s1","prompt":[{"type":"image"}]}"#,
        Some("s1"),
        Some("")
    )]
    #[case::no_prompt(r#"{"sessionId":"s1"}"#, Some("s1"), None)]
    #[case::null_prompt(r#"{"sessionId":"s1","prompt":null}"#, Some("s1"), None)]
    #[case::session_not_a_string(
        r#"{"sessionId":5,"prompt":[{"type":"text","text":"hi"}]}"#,
        None,
        Some("hi")
    )]
    #[case::repeated_member(r#"{"sessionId":"s1","prompt":[{"type":"text","text":"a"}],"prompt":[{"type":"text","text":"b"}]}"#, Some("s1"), Some("b"))]
    #[case::block_not_an_object(
        r#"{"sessionId":"s1","prompt":[3,{"type":"text","text":"a"}]}"#,
        Some("s1"),
        Some("a")
    )]
    fn the_prompt_is_read_alike_in_every_shape(
        #[case] params: &str,
        #[case] session: Option<&str>,
        #[case] text: Option<&str>,
    ) {
        let inbound = prompt(params);
        assert_eq!(prompt_text(&inbound).as_deref(), text);
        let (named, shared) = prompt_session_and_text(&inbound);
        assert_eq!(named.as_deref(), session);
        assert_eq!(&*shared, text.unwrap_or_default());
    }
}
