//! The params of an inbound message, kept as the text they arrived as and parsed into a
//! `serde_json::Value` only when a step or a check first asks for one: a prompt turn reads two
//! members through a borrowed view and never builds the tree.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Params as received, with their `Value` form made on first use.
#[derive(Debug)]
pub struct Params {
    raw: Box<RawValue>,
    value: OnceLock<Value>,
}

impl Params {
    /// Params holding `raw`, a JSON text the decoder already validated.
    pub fn new(raw: Box<RawValue>) -> Self {
        Self {
            raw,
            value: OnceLock::new(),
        }
    }

    /// The params as a JSON value, parsed once.
    pub fn value(&self) -> &Value {
        self.value
            .get_or_init(|| serde_json::from_str(self.raw.get()).unwrap_or(Value::Null))
    }

    /// The params read into `T`, borrowing from the text where `T` borrows; `None` when they
    /// do not have `T`'s shape (the caller then falls back to [`Params::value`]).
    pub fn view<'a, T: Deserialize<'a>>(&'a self) -> Option<T> {
        serde_json::from_str(self.raw.get()).ok()
    }
}

/// A JSON string inside a [`Params::view`]: borrowed from the params' text, or owned when it had
/// escapes to undo. (serde borrows a bare `Cow<str>` field only, not one inside an `Option`.)
#[derive(Debug)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a str>);

        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }

        deserializer.deserialize_str(TextVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(text: &str) -> Params {
        Params::new(RawValue::from_string(text.to_owned()).unwrap())
    }

    #[test]
    fn the_value_is_the_parsed_text() {
        let p = params(r#"{"a": [1, "\u00e9"], "b": null}"#);
        assert_eq!(p.value(), &json!({"a": [1, "é"], "b": null}));
    }

    #[test]
    fn a_view_borrows_plain_strings_and_refuses_other_shapes() {
        #[derive(serde::Deserialize)]
        struct View<'a> {
            #[serde(borrow)]
            name: Option<Text<'a>>,
        }
        let p = params(r#"{"name": "plain", "other": [1]}"#);
        let view: View<'_> = p.view().unwrap();
        assert!(matches!(view.name, Some(Text(Cow::Borrowed("plain")))));
        let escaped = params(r#"{"name": "line\nbreak"}"#);
        let view: View<'_> = escaped.view().unwrap();
        assert!(matches!(view.name, Some(Text(Cow::Owned(ref text))) if text == "line\nbreak"));
        assert!(params(r#"{"name": 3}"#).view::<View<'_>>().is_none());
    }
}
