//! Closed sets stored as text: one macro, [`closed_set!`](crate::storage::closed_set::closed_set),
//! declares an enum whose members have one fixed name each, used alike on the wire (serde), in
//! SQLite (rusqlite's `ToSql`/`FromSql`) and in messages, with [`UnknownName`] for any other text.

/// A text that is none of a closed set's names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {set} {value:?} (known: {known})", known = .known.join(", "))]
pub struct UnknownName {
    /// Which set, in words (`session status`, `task status`).
    pub set: &'static str,
    /// The text found.
    pub value: String,
    /// The set's names.
    pub known: &'static [&'static str],
}

/// Declares a closed set: the enum, its members and names in declaration order (`ALL`,
/// `NAMES`), `as_str` and `FromStr` as the one mapping, `Display` (padded like a string), serde
/// under the same names, and SQLite storage as TEXT.
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $($(#[$variant_meta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
            /// Every member's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text,)+];
            /// What this set is called in an error.
            pub const SET: &'static str = $what;

            /// The name on the wire, in the database and in messages.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::storage::closed_set::UnknownName;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::storage::closed_set::UnknownName {
                        set: $what,
                        value: text.to_owned(),
                        known: $name::NAMES,
                    }),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::from(self.as_str()))
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                value.as_str()?.parse().map_err(
                    |error: $crate::storage::closed_set::UnknownName| {
                        rusqlite::types::FromSqlError::Other(Box::new(error))
                    },
                )
            }
        }
    };
}

pub(crate) use closed_set;
