//! Request ids: integer, string or null, kept exactly as the peer wrote them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A JSON-RPC request id.
///
/// Integers and strings are distinct: `1` and `"1"` are different ids, and an id is always echoed
/// back in the form the peer sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// `null`, legal but discouraged; used for errors that cannot be tied to a request.
    Null,
    /// An integer id.
    Number(i64),
    /// A string id, for example a UUID.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Null => f.write_str("null"),
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
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
        }
        let number: RequestId = serde_json::from_str("1").unwrap();
        let string: RequestId = serde_json::from_str("\"1\"").unwrap();
        assert_ne!(number, string);
    }
}
