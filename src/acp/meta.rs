//! Building blocks every ACP wire type shares: the `_meta`/unknown-field bag, tri-state fields,
//! open string enums and discriminated unions that keep unknown variants.
//!
//! The rules they implement:
//! - Every wire object carries an [`Extra`] bag, flattened into the object. It holds `_meta` and
//!   every field this version of ski does not know, so decoding and encoding again loses nothing.
//! - Optional fields are `Option<T>` and are omitted when absent. A `null` in such a field reads
//!   as absent. Where `null` has its own meaning on the wire (a `session_info_update` title that
//!   is cleared, a `nextCursor: null` on the last page), the field is a [`Nullable`].
//! - String enums (`string_enum!`) keep values they do not know in an `Unknown(String)` variant.
//! - Discriminated unions (`tagged_union!`) keep an unknown discriminator in an
//!   `Unknown(Value)` variant, while a known discriminator with a wrong payload is an error.

use std::cell::RefCell;

use serde::de::DeserializeOwned;
use serde::ser::{Error as _, Impossible, SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

#[doc(hidden)]
pub mod tagged;

/// The key under which ACP carries extension metadata on every object.
pub const META_KEY: &str = "_meta";

/// `_meta` and every field of a wire object that ski does not model, kept in wire order.
///
/// It is flattened into its parent object: decoding collects the leftover keys here, encoding
/// writes them back beside the known fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Extra(pub Map<String, Value>);

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        UNKNOWN_FIELDS.with(|recorder| {
            if let Some(found) = recorder.borrow_mut().as_mut() {
                found.extend(map.keys().filter(|key| *key != META_KEY).cloned());
            }
        });
        Ok(Self(map))
    }
}

thread_local! {
    static UNKNOWN_FIELDS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runs `decode` and returns its result with the names of every unknown field (other than
/// `_meta`) that any [`Extra`] bag collected meanwhile, at any depth.
///
/// This tells a check which fields a peer sent that ACP does not define (the specification
/// reserves the root of every type), and tells a test that a type knows every field of a
/// fixture. Decoding happens on the calling thread; nested calls record into the outermost one.
pub fn record_unknown_fields<T>(decode: impl FnOnce() -> T) -> (T, Vec<String>) {
    let outer = UNKNOWN_FIELDS.with(|recorder| recorder.borrow_mut().replace(Vec::new()));
    let result = decode();
    let found = UNKNOWN_FIELDS.with(|recorder| {
        let mut recorder = recorder.borrow_mut();
        let found = recorder.take().unwrap_or_default();
        if let Some(mut outer) = outer {
            outer.extend(found.iter().cloned());
            *recorder = Some(outer);
        }
        found
    });
    (result, found)
}

impl Extra {
    /// An empty bag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the bag holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `_meta` object, if present and an object.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.0.get(META_KEY).and_then(Value::as_object)
    }

    /// The raw `_meta` value, whatever its JSON type.
    pub fn meta_value(&self) -> Option<&Value> {
        self.0.get(META_KEY)
    }

    /// Replaces `_meta` with `meta`.
    pub fn set_meta(&mut self, meta: Map<String, Value>) {
        self.0.insert(META_KEY.to_owned(), Value::Object(meta));
    }

    /// Returns the bag with `_meta` set to `meta`.
    #[must_use]
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.set_meta(meta);
        self
    }

    /// Keys other than `_meta`: fields the peer sent that this version of ski does not know.
    /// The ACP specification reserves the root of every type, so a conforming peer sends none.
    pub fn unknown_keys(&self) -> impl Iterator<Item = &str> {
        self.0
            .keys()
            .map(String::as_str)
            .filter(|key| *key != META_KEY)
    }

    /// The value of one leftover field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Sets one leftover field, for example to emit a deliberately non-standard message.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        self.0.insert(key.into(), value)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Self(map)
    }
}

/// An object with no fields of its own: `{}` plus optional `_meta`. Params of `logout`, and
/// the result of every method that answers `{}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Empty {
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A field that can be absent, explicitly `null`, or set.
///
/// Used where ACP gives `null` a meaning of its own (for example "clear the title"). Declare it
/// with `#[serde(default, skip_serializing_if = "Nullable::is_absent")]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Nullable<T> {
    /// The key was not present.
    #[default]
    Absent,
    /// The key was present with the value `null`.
    Null,
    /// The key was present with a value.
    Value(T),
}

impl<T> Nullable<T> {
    /// Whether the key was absent; used to skip the field when encoding.
    pub fn is_absent(&self) -> bool {
        matches!(self, Nullable::Absent)
    }

    /// Whether the key was present with `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Nullable::Null)
    }

    /// The value, if one was given.
    pub fn value(&self) -> Option<&T> {
        match self {
            Nullable::Value(value) => Some(value),
            Nullable::Absent | Nullable::Null => None,
        }
    }

    /// The value, if one was given, by value.
    pub fn into_value(self) -> Option<T> {
        match self {
            Nullable::Value(value) => Some(value),
            Nullable::Absent | Nullable::Null => None,
        }
    }
}

impl<T> From<T> for Nullable<T> {
    fn from(value: T) -> Self {
        Nullable::Value(value)
    }
}

impl<T> From<Option<T>> for Nullable<T> {
    /// `Some` becomes a value, `None` becomes absent.
    fn from(value: Option<T>) -> Self {
        value.map_or(Nullable::Absent, Nullable::Value)
    }
}

impl<T: Serialize> Serialize for Nullable<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Nullable::Value(value) => value.serialize(serializer),
            Nullable::Absent | Nullable::Null => serializer.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            Some(value) => Nullable::Value(value),
            None => Nullable::Null,
        })
    }
}

/// Deserializes a present field as `Some`, even when its value is `null`.
///
/// For `Option<T>` fields whose `T` itself has a `null` form (a JSON-RPC request id), so that
/// `"requestId": null` is kept instead of read as absent. Use with `#[serde(default)]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Decodes the payload of one union variant from the object that carried the discriminator.
///
/// `keep_tag` leaves the discriminator in the object (for variants that may also appear without
/// one, so the key lands in [`Extra`] and is written back).
#[doc(hidden)]
pub fn decode_variant<T: DeserializeOwned>(
    union: &'static str,
    tag: &'static str,
    kind: &str,
    mut object: Map<String, Value>,
    keep_tag: bool,
) -> Result<T, String> {
    if !keep_tag {
        object.remove(tag);
    }
    serde_json::from_value(Value::Object(object))
        .map_err(|error| format!("invalid {union} `{kind}`: {error}"))
}

/// Serializes a union payload as one object with the discriminator first, streaming into
/// `serializer` (no intermediate JSON tree). The payload must serialize as a map or struct, and
/// its [`Extra`] bag must not hold the discriminator key.
#[doc(hidden)]
pub fn encode_variant<S: Serializer, T: Serialize>(
    serializer: S,
    tag: &'static str,
    kind: &'static str,
    payload: &T,
) -> Result<S::Ok, S::Error> {
    payload.serialize(TagFirst {
        inner: serializer,
        tag,
        kind,
    })
}

/// A serializer that writes `tag: kind` before the fields of the map or struct it is given.
struct TagFirst<S> {
    inner: S,
    tag: &'static str,
    kind: &'static str,
}

impl<S: Serializer> TagFirst<S> {
    fn not_an_object(&self) -> S::Error {
        S::Error::custom(format!(
            "the payload of `{}` must encode as an object",
            self.kind
        ))
    }
}

/// The struct form of [`TagFirst`]: struct fields become map entries.
struct TagFirstStruct<M>(M);

impl<M: SerializeMap> SerializeStruct for TagFirstStruct<M> {
    type Ok = M::Ok;
    type Error = M::Error;

    fn serialize_field<V: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &V,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    fn end(self) -> Result<M::Ok, M::Error> {
        self.0.end()
    }
}

macro_rules! reject_scalars {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<S::Ok, S::Error> {
            Err(self.not_an_object())
        })*
    };
}

impl<S: Serializer> Serializer for TagFirst<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = TagFirstStruct<S::SerializeMap>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    reject_scalars! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str), serialize_unit_variant(&'static str, u32, &'static str),
    }

    fn serialize_some<V: ?Sized + Serialize>(self, value: &V) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &V,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &V,
    ) -> Result<S::Ok, S::Error> {
        Err(self.not_an_object())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(self.not_an_object())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(self.not_an_object())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(self.not_an_object())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(self.not_an_object())
    }

    fn serialize_map(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        let mut map = self.inner.serialize_map(len.map(|len| len + 1))?;
        map.serialize_entry(self.tag, self.kind)?;
        Ok(map)
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.serialize_map(Some(len)).map(TagFirstStruct)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(self.not_an_object())
    }
}

/// Reads the discriminator of a union object; `Ok(None)` when the key is absent.
#[doc(hidden)]
pub fn read_tag<'a>(
    union: &'static str,
    tag: &'static str,
    object: &'a Map<String, Value>,
) -> Result<Option<&'a str>, String> {
    match object.get(tag) {
        None => Ok(None),
        Some(Value::String(kind)) => Ok(Some(kind.as_str())),
        Some(other) => Err(format!("{union} `{tag}` must be a string, found {other}")),
    }
}

/// Declares an open string enum: known values as variants, anything else kept in `Unknown`.
///
/// The generated type has `as_str`, `is_known`, `KNOWN` (every known wire value, in declaration
/// order), `From<&str>`, `Display`, and serializes as a plain JSON string.
macro_rules! string_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $(#[$vattr:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vattr])* $variant, )*
            /// A value this version of ski does not know, kept as it came.
            Unknown(String),
        }

        impl $name {
            /// Every known wire value, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($wire),*];

            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )*
                    Self::Unknown(value) => value.as_str(),
                }
            }

            /// Whether the value is one the schema names.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $wire => Self::$variant, )*
                    other => Self::Unknown(other.to_owned()),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self::from(value.as_ref()))
            }
        }
    };
}
pub(crate) use string_enum;

/// Declares a discriminated union over one JSON key.
///
/// A known discriminator decodes its payload strictly (a missing required field is an error);
/// an unknown one is kept whole in `Unknown(Value)` and written back unchanged. With
/// `untagged = Variant` the given variant is also chosen when the key is absent; its payload then
/// sees the whole object, so an explicit discriminator is kept in its [`Extra`] bag.
macro_rules! tagged_union {
    (
        $(#[$attr:meta])*
        pub enum $name:ident : $tag:literal $(, untagged = $default:ident)? {
            $( $(#[$vattr:meta])* $variant:ident($ty:ty) = $wire:literal, )*
        }
    ) => {
        $(#[$attr])*
        // Wire messages are built once and moved a few times; boxing variants would only make
        // them harder to construct and match.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vattr])* $variant($ty), )*
            /// A discriminator this version of ski does not know, kept whole as it came.
            Unknown(::serde_json::Value),
        }

        impl $name {
            /// The JSON key that holds the discriminator.
            pub const TAG: &'static str = $tag;
            /// Every known discriminator value, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($wire),*];

            /// The discriminator value; for an unknown variant, whatever string it carried.
            pub fn kind(&self) -> &str {
                match self {
                    $( Self::$variant(_) => $wire, )*
                    Self::Unknown(value) => value.get($tag).and_then(::serde_json::Value::as_str).unwrap_or(""),
                }
            }

            /// Whether the discriminator is one this version of ski knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                #[allow(unused_variables)]
                let untagged: Option<&str> = None;
                $( let untagged: Option<&str> = Some(stringify!($default)); )?
                match self {
                    $( Self::$variant(payload) => {
                        if untagged == Some(stringify!($variant)) {
                            ::serde::Serialize::serialize(payload, serializer)
                        } else {
                            $crate::acp::meta::encode_variant(serializer, $tag, $wire, payload)
                        }
                    } )*
                    Self::Unknown(value) => ::serde::Serialize::serialize(value, serializer),
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::acp::meta::tagged::decode(deserializer)
            }
        }

        impl $crate::acp::meta::tagged::TaggedUnion for $name {
            const NAME: &'static str = stringify!($name);
            const TAG: &'static str = $tag;

            fn streams(kind: &str) -> bool {
                #[allow(unused_variables)]
                let untagged: Option<&str> = None;
                $( let untagged: Option<&str> = Some(stringify!($default)); )?
                match kind {
                    $( $wire => untagged != Some(stringify!($variant)), )*
                    _ => false,
                }
            }

            fn decode_payload<'de, D: ::serde::Deserializer<'de>>(kind: &str, payload: D) -> Result<Self, D::Error> {
                use ::serde::de::Error as _;
                match kind {
                    $( $wire => <$ty as ::serde::Deserialize>::deserialize(payload).map(Self::$variant), )*
                    other => Err(D::Error::custom(format!("{} has no variant `{other}`", stringify!($name)))),
                }
            }

            fn from_object<E: ::serde::de::Error>(object: ::serde_json::Map<String, ::serde_json::Value>) -> Result<Self, E> {
                let union = stringify!($name);
                #[allow(unused_variables)]
                let untagged: Option<&str> = None;
                $( let untagged: Option<&str> = Some(stringify!($default)); )?
                let kind = $crate::acp::meta::read_tag(union, $tag, &object).map_err(E::custom)?;
                let Some(kind) = kind else {
                    $( return $crate::acp::meta::decode_variant(union, $tag, "", object, true)
                        .map(Self::$default)
                        .map_err(E::custom); )?
                    #[allow(unreachable_code)]
                    return Err(E::missing_field($tag));
                };
                match kind {
                    $( $wire => {
                        let keep = untagged == Some(stringify!($variant));
                        let kind = $wire;
                        $crate::acp::meta::decode_variant(union, $tag, kind, object, keep)
                            .map(Self::$variant)
                            .map_err(E::custom)
                    } )*
                    _ => Ok(Self::Unknown(::serde_json::Value::Object(object))),
                }
            }
        }
    };
}
pub(crate) use tagged_union;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::acp::{
        AuthMethod, CreateElicitationRequest, McpServer, SessionInfoUpdate, ToolKind,
    };

    fn round_trip<T: Serialize + DeserializeOwned>(input: Value) -> T {
        let decoded: T = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(serde_json::to_value(&decoded).unwrap(), input);
        decoded
    }

    #[test]
    fn nullable_keeps_absent_null_and_value_apart() {
        let absent: SessionInfoUpdate = round_trip(json!({}));
        assert!(absent.title.is_absent());
        let null: SessionInfoUpdate = round_trip(json!({"title": null}));
        assert!(null.title.is_null());
        let set: SessionInfoUpdate = round_trip(json!({"title": "t"}));
        assert_eq!(set.title.value().map(String::as_str), Some("t"));
        assert_eq!(Nullable::from(Some(3)).into_value(), Some(3));
        assert!(Nullable::<u8>::from(None).is_absent());
    }

    #[test]
    fn extra_holds_meta_of_any_type_and_unknown_keys() {
        let empty: Empty = round_trip(json!({"_meta": null, "vendor": [1]}));
        assert_eq!(empty.extra.meta_value(), Some(&Value::Null));
        assert!(empty.extra.meta().is_none());
        assert_eq!(empty.extra.unknown_keys().collect::<Vec<_>>(), ["vendor"]);
        let mut extra = Extra::new().with_meta(Map::from_iter([("k".to_owned(), json!(1))]));
        extra.insert("x", json!(true));
        assert_eq!(
            serde_json::to_value(Empty { extra }).unwrap(),
            json!({"_meta": {"k": 1}, "x": true})
        );
    }

    #[test]
    fn unknown_fields_are_recorded_at_every_depth_and_nest() {
        let input = json!({"sessionUpdate": "agent_message_chunk", "a": 1,
                           "content": {"type": "text", "text": "t", "b": 2, "_meta": {}}});
        let ((), outer) = record_unknown_fields(|| {
            let (decoded, inner) = record_unknown_fields(|| {
                serde_json::from_value::<crate::acp::SessionUpdate>(input.clone())
            });
            assert!(decoded.is_ok());
            let mut inner = inner;
            inner.sort();
            assert_eq!(inner, ["a", "b"]);
        });
        assert_eq!(
            outer.len(),
            2,
            "the outer recorder sees the nested fields too"
        );
        let ((), none) = record_unknown_fields(|| ());
        assert!(none.is_empty());
    }

    #[test]
    fn untagged_default_variants_accept_an_explicit_tag() {
        let agent: AuthMethod = round_trip(json!({"id": "key", "name": "Key"}));
        assert!(matches!(agent, AuthMethod::Agent(_)));
        let explicit: AuthMethod = round_trip(json!({"type": "agent", "id": "key", "name": "Key"}));
        assert!(matches!(explicit, AuthMethod::Agent(_)));
        let other: AuthMethod = round_trip(json!({"type": "oauth", "id": "o", "name": "OAuth"}));
        assert_eq!((other.kind(), other.id()), ("oauth", Some("o")));
        let stdio: McpServer =
            round_trip(json!({"name": "fs", "command": "/bin/fs", "args": [], "env": []}));
        assert_eq!(stdio.kind(), "stdio");
        let broken =
            serde_json::from_value::<AuthMethod>(json!({"type": "terminal", "name": "no id"}));
        assert!(
            broken.is_err(),
            "a known type with a bad payload must not fall back"
        );
    }

    #[test]
    fn string_enums_keep_unknown_values() {
        let kind: ToolKind = serde_json::from_value(json!("shell")).unwrap();
        assert_eq!(kind, ToolKind::Unknown("shell".into()));
        assert!(!kind.is_known());
        assert_eq!(serde_json::to_value(&kind).unwrap(), json!("shell"));
        assert_eq!(ToolKind::from("switch_mode"), ToolKind::SwitchMode);
        assert_eq!(ToolKind::KNOWN.len(), 10);
    }

    #[test]
    fn request_scoped_elicitation_keeps_a_null_request_id() {
        let request: CreateElicitationRequest = round_trip(json!({
            "mode": "url", "message": "m", "elicitationId": "e", "url": "https://example.com", "requestId": null
        }));
        let CreateElicitationRequest::Url(url) = request else {
            panic!("expected url mode")
        };
        assert_eq!(url.scope.request_id, Some(crate::jsonrpc::RequestId::Null));
    }
}
