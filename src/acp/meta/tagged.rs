//! Decoding a discriminated union (`tagged_union!`) in one pass when its discriminator comes
//! first, as every peer writes it: the payload is read straight from the rest of the object.
//! Any other object is read into a `Map` first and decoded from that, as before; both give the
//! same value and, for input that is a `Value`, the same error.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What [`decode`] needs to know of a union; `tagged_union!` implements it.
#[doc(hidden)]
pub trait TaggedUnion: Sized {
    /// The union's name, for messages.
    const NAME: &'static str;
    /// The JSON key that holds the discriminator.
    const TAG: &'static str;

    /// Whether the payload of `kind` is read from the members after the discriminator: a known
    /// kind whose payload does not keep the discriminator in its `Extra` bag.
    fn streams(kind: &str) -> bool;

    /// Decodes the payload of `kind`, one [`TaggedUnion::streams`] accepts.
    fn decode_payload<'de, D: Deserializer<'de>>(kind: &str, payload: D) -> Result<Self, D::Error>;

    /// Decodes the union from its whole object.
    fn from_object<E: de::Error>(object: Map<String, Value>) -> Result<Self, E>;
}

/// Decodes the union `U`.
#[doc(hidden)]
pub fn decode<'de, U: TaggedUnion, D: Deserializer<'de>>(deserializer: D) -> Result<U, D::Error> {
    deserializer.deserialize_any(UnionVisitor(PhantomData))
}

struct UnionVisitor<U>(PhantomData<U>);

impl<U: TaggedUnion> UnionVisitor<U> {
    fn not_an_object<E: de::Error>(other: Value) -> E {
        E::custom(format!("{} must be an object, found {other}", U::NAME))
    }
}

impl<'de, U: TaggedUnion> Visitor<'de> for UnionVisitor<U> {
    type Value = U;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} object", U::NAME)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<U, A::Error> {
        let mut object = Map::new();
        match map.next_key::<Key<'de>>()? {
            None => return U::from_object(object),
            Some(key) if key.0 == U::TAG => match map.next_value::<Value>()? {
                Value::String(kind) if U::streams(&kind) => {
                    let rest = WithoutTag {
                        map: &mut map,
                        tag: U::TAG,
                    };
                    return U::decode_payload(&kind, MapAccessDeserializer::new(rest)).map_err(
                        |error| de::Error::custom(format!("invalid {} `{kind}`: {error}", U::NAME)),
                    );
                }
                kind => {
                    object.insert(U::TAG.to_owned(), kind);
                }
            },
            Some(key) => {
                let value = map.next_value::<Value>()?;
                object.insert(key.0.into_owned(), value);
            }
        }
        // As a `Map` reads an object: a repeated key keeps its first place and its last value.
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            object.insert(key, value);
        }
        U::from_object(object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<U, A::Error> {
        let value = Value::deserialize(SeqAccessDeserializer::new(seq))?;
        Err(Self::not_an_object(value))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<U, E> {
        Err(Self::not_an_object(Value::Bool(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<U, E> {
        Err(Self::not_an_object(Value::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<U, E> {
        Err(Self::not_an_object(Value::from(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<U, E> {
        Err(Self::not_an_object(
            serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
        ))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<U, E> {
        Err(Self::not_an_object(Value::String(value.to_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<U, E> {
        Err(Self::not_an_object(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<U, E> {
        Err(Self::not_an_object(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<U, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// An object key, borrowed from the input where it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key)))
    }
}

/// The members after the discriminator. A second discriminator is an error here (a `Map` would
/// keep the last one); input that is text is then read again as a `Value`, as
/// `jsonrpc::decode_params_text` does, and a `Value` has no repeated key.
struct WithoutTag<'m, A> {
    map: &'m mut A,
    tag: &'static str,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutTag<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.map.next_key::<Key<'de>>()? {
            None => Ok(None),
            Some(key) if key.0 == self.tag => Err(de::Error::duplicate_field(self.tag)),
            Some(Key(Cow::Borrowed(key))) => seed
                .deserialize(BorrowedStrDeserializer::new(key))
                .map(Some),
            Some(Key(Cow::Owned(key))) => seed
                .deserialize(de::value::StringDeserializer::new(key))
                .map(Some),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::acp::{AuthMethod, ContentBlock, SessionUpdate};

    /// Decodes `text` as `T` from the text (one pass where the discriminator comes first) and
    /// from its `Value` (the path a peer's `Value` params take); both must give the same.
    fn both<T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
        text: &str,
    ) -> Result<T, String> {
        let from_value = serde_json::from_value::<T>(serde_json::from_str(text).unwrap())
            .map_err(|error| error.to_string());
        let from_text = serde_json::from_str::<T>(text);
        match (&from_value, from_text) {
            (Ok(value), Ok(text)) => assert_eq!(value, &text),
            (Err(_), Err(_)) => {}
            (value, text) => panic!("text and value disagree on {text:?}: {value:?}"),
        }
        from_value
    }

    #[test]
    fn a_leading_discriminator_decodes_as_the_whole_object_does() {
        let cases = [
            r#"{"type":"text","text":"hi"}"#,
            r#"{"text":"hi","type":"text"}"#,
            r#"{"type":"text","text":"hi","annotations":{"priority":0.5},"vendor":[1],"_meta":{"k":1}}"#,
            r#"{"type":"resource_link","uri":"file:///a","name":"a","size":3}"#,
            r#"{"type":"hologram","depth":3}"#,
            r#"{"depth":3,"type":"hologram"}"#,
        ];
        for case in cases {
            let block: ContentBlock = both(case).unwrap();
            assert_eq!(
                serde_json::to_value(&block).unwrap(),
                serde_json::from_str::<serde_json::Value>(case).unwrap(),
                "{case} is written back as it came"
            );
        }
        let nested =
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"t"}}"#;
        assert!(matches!(
            both::<SessionUpdate>(nested).unwrap(),
            SessionUpdate::AgentMessageChunk(_)
        ));
    }

    #[test]
    fn errors_from_a_value_read_as_before() {
        let cases = [
            (
                r#"{"type":"text"}"#,
                "invalid ContentBlock `text`: missing field `text`",
            ),
            (
                r#"{"type":"text","text":3}"#,
                "invalid ContentBlock `text`: invalid type: integer `3`, expected a string",
            ),
            (r#"{"text":"t"}"#, "missing field `type`"),
            (
                r#"{"type":3,"text":"t"}"#,
                "ContentBlock `type` must be a string, found 3",
            ),
            (
                r#""text""#,
                r#"ContentBlock must be an object, found "text""#,
            ),
            (
                r#"[1,{"a":null}]"#,
                r#"ContentBlock must be an object, found [1,{"a":null}]"#,
            ),
            ("2.5", "ContentBlock must be an object, found 2.5"),
            ("null", "ContentBlock must be an object, found null"),
        ];
        for (case, message) in cases {
            assert_eq!(both::<ContentBlock>(case).unwrap_err(), message, "{case}");
        }
    }

    #[test]
    fn a_repeated_discriminator_in_text_fails_so_that_its_value_decides() {
        let text = r#"{"type":"text","text":"t","type":"hologram"}"#;
        assert!(serde_json::from_str::<ContentBlock>(text).is_err());
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let block: ContentBlock = serde_json::from_value(value).unwrap();
        assert_eq!(block.kind(), "hologram", "a `Value` keeps the last one");
    }

    #[test]
    fn a_union_with_a_default_variant_keeps_an_explicit_discriminator() {
        let explicit: AuthMethod = both(r#"{"type":"agent","id":"key","name":"Key"}"#).unwrap();
        assert_eq!(
            serde_json::to_value(&explicit).unwrap(),
            json!({"type": "agent", "id": "key", "name": "Key"})
        );
        let other: AuthMethod = both(r#"{"type":"terminal","id":"t","name":"T"}"#).unwrap();
        assert_eq!(other.kind(), "terminal");
    }
}
