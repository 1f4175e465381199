//! Request ids: a number, a string or null, kept exactly as the peer wrote them.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::{self, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON-RPC request id.
///
/// Numbers and strings are distinct: `1` and `"1"` are different ids, and an id is always echoed
/// back in the form the peer sent it. A number that is not a plain 64-bit integer (beyond the
/// range of `i64`, with a fraction or an exponent, or `-0`) keeps the text it was written in, so
/// `1.0`, `1e2` and `-0` come back as `1.0`, `1e2` and `-0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// `null`, legal but discouraged; used for errors that cannot be tied to a request.
    Null,
    /// An integer id written the plain way (`7`, `-7`).
    Number(i64),
    /// A string id, for example a UUID.
    String(String),
    /// Any other JSON number, as the exact text it was written in (`1.0`, `1e2`, `-0`,
    /// `18446744073709551616`). Encoding fails with an error if the text is not a JSON number.
    NumberText(String),
}

impl RequestId {
    /// The id a JSON number written as `text` stands for: [`RequestId::Number`] when the text is
    /// a plain integer in the range of `i64`, else [`RequestId::NumberText`]. `None` when `text`
    /// is not a JSON number.
    pub fn from_number_text(text: &str) -> Option<Self> {
        if !is_json_number(text) {
            return None;
        }
        // A JSON number has no `+` and no leading zeros, so `-0` is the only integer text that
        // `i64` would not write back the same way.
        Some(match text.parse::<i64>() {
            Ok(n) if text != "-0" => RequestId::Number(n),
            _ => RequestId::NumberText(text.to_owned()),
        })
    }

    /// The id a JSON text (as it appeared in a message) stands for, or `None` when it is not a
    /// number, a string or null.
    pub fn from_json_text(text: &str) -> Option<Self> {
        match text.as_bytes().first()? {
            b'"' => serde_json::from_str(text).ok().map(RequestId::String),
            b'n' if text == "null" => Some(RequestId::Null),
            _ => Self::from_number_text(text),
        }
    }
}

/// Whether `text` is exactly one JSON number (the grammar of RFC 8259, no surrounding space).
fn is_json_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = usize::from(bytes.first() == Some(&b'-'));
    let digits = |at: &mut usize| {
        let start = *at;
        while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        *at - start
    };
    match bytes.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => {
            digits(&mut at);
        }
        _ => return false,
    }
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        if digits(&mut at) == 0 {
            return false;
        }
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        if digits(&mut at) == 0 {
            return false;
        }
    }
    at == bytes.len()
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Null => f.write_str("null"),
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
            RequestId::NumberText(text) => f.write_str(text),
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Null => serializer.serialize_unit(),
            RequestId::Number(n) => serializer.serialize_i64(*n),
            RequestId::String(s) => serializer.serialize_str(s),
            RequestId::NumberText(text) => {
                if !is_json_number(text) {
                    return Err(ser::Error::custom(format!(
                        "request id {text:?} is not a JSON number"
                    )));
                }
                // serde_json writes a raw value as it is; a `Value` gets the number it parses to.
                let raw: &RawValue = serde_json::from_str(text).map_err(ser::Error::custom)?;
                raw.serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    /// Reads a number, a string or null. Where only the number's value is left (serde_json's
    /// `Value`, other formats), a number that is not an `i64` keeps the text serde_json writes
    /// for that value; [`crate::jsonrpc::decode`] keeps the text of the message itself.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;

        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string or null")
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(n))
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<RequestId, E> {
                Ok(i64::try_from(n)
                    .map_or_else(|_| RequestId::NumberText(n.to_string()), RequestId::Number))
            }

            fn visit_f64<E: de::Error>(self, n: f64) -> Result<RequestId, E> {
                let number = serde_json::Number::from_f64(n)
                    .ok_or_else(|| E::custom("a request id must be a finite number"))?;
                Ok(RequestId::NumberText(number.to_string()))
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(s.to_owned()))
            }

            fn visit_string<E: de::Error>(self, s: String) -> Result<RequestId, E> {
                Ok(RequestId::String(s))
            }

            fn visit_unit<E: de::Error>(self) -> Result<RequestId, E> {
                Ok(RequestId::Null)
            }

            fn visit_none<E: de::Error>(self) -> Result<RequestId, E> {
                Ok(RequestId::Null)
            }
        }

        deserializer.deserialize_any(IdVisitor)
    }
}

impl From<i64> for RequestId {
    fn from(value: i64) -> Self {
        RequestId::Number(value)
    }
}

impl From<&str> for RequestId {
    fn from(value: &str) -> Self {
        RequestId::String(value.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(value: String) -> Self {
        RequestId::String(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_json_form() {
        for raw in ["1", "\"1\"", "null", "\"5f0c-uuid\"", "-7"] {
            let id: RequestId = serde_json::from_str(raw).unwrap();
            assert_eq!(serde_json::to_string(&id).unwrap(), raw);
            assert_eq!(RequestId::from_json_text(raw), Some(id));
        }
        let number: RequestId = serde_json::from_str("1").unwrap();
        let string: RequestId = serde_json::from_str("\"1\"").unwrap();
        assert_ne!(number, string);
    }

    #[test]
    fn numbers_beyond_plain_integers_keep_their_text() {
        for text in [
            "1.0",
            "1e2",
            "1E+2",
            "-0",
            "-0.0",
            "0.5e-3",
            "18446744073709551616",
            "-9223372036854775809",
        ] {
            let id = RequestId::from_json_text(text).unwrap();
            assert_eq!(id, RequestId::NumberText(text.to_owned()));
            assert_eq!(serde_json::to_string(&id).unwrap(), text);
            assert_eq!(id.to_string(), text);
        }
        assert_eq!(
            RequestId::from_number_text("-9223372036854775808"),
            Some(RequestId::Number(i64::MIN))
        );
    }

    #[test]
    fn texts_that_are_not_json_numbers_are_refused() {
        for text in [
            "", "-", "01", "+1", "1.", ".5", "1e", "1e+", "0x10", " 1", "1 ", "NaN", "true",
        ] {
            assert_eq!(RequestId::from_number_text(text), None, "{text:?}");
        }
        assert_eq!(RequestId::from_json_text("[1]"), None);
        assert_eq!(RequestId::from_json_text("{}"), None);
        let bad = RequestId::NumberText("1.".to_owned());
        assert!(serde_json::to_string(&bad).is_err());
    }

    #[test]
    fn ids_read_from_values_keep_what_the_value_holds() {
        let big: RequestId = serde_json::from_value(serde_json::json!(u64::MAX)).unwrap();
        assert_eq!(big, RequestId::NumberText(u64::MAX.to_string()));
        let fraction: RequestId = serde_json::from_value(serde_json::json!(1.5)).unwrap();
        assert_eq!(fraction, RequestId::NumberText("1.5".to_owned()));
        assert!(serde_json::from_value::<RequestId>(serde_json::json!(true)).is_err());
    }
}
