//! Typed params and results chosen by method name: the bridge between a JSON-RPC message
//! (`method` plus raw `params`, or a raw `result` plus the method of the pending request) and
//! the ACP types, built from the v1 rows of the method table ([`methods`]). The v2 rows share
//! names with v1 rows and are typed through their keys ([`methods::v2::typed`]), not here.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

#[allow(
    clippy::wildcard_imports,
    reason = "the method table names the types as acp exports them"
)]
use super::*;

/// Params or a result that do not fit the method they came with.
#[derive(Debug, thiserror::Error)]
#[error("invalid {part} for {method}: {source}")]
pub struct PayloadError {
    /// The method.
    pub method: String,
    /// `params` or `result`.
    pub part: &'static str,
    /// What serde found wrong.
    #[source]
    pub source: serde_json::Error,
}

fn decode<T: DeserializeOwned>(
    method: &str,
    part: &'static str,
    payload: Option<Value>,
) -> Result<T, PayloadError> {
    // Absent params read as an empty object, so `logout` without params decodes.
    let payload = payload.unwrap_or_else(|| Value::Object(Map::new()));
    serde_json::from_value(payload).map_err(|source| PayloadError {
        method: method.to_owned(),
        part,
        source,
    })
}

/// [`MethodParams`] and [`MethodResult`] from the rows of the method table.
macro_rules! method_payloads {
    (v1 { $(
        $konst:ident = $name:literal [$side:ident, $stability:ident, $generation:ident, $kind:ident,
            gate $gate:tt, auth $auth:tt]
            $( $key:ident($params:ty $(=> $result:ty)?) )?;
    )* } v2 { $($v2:tt)* }) => {
        /// The typed params of a request or notification, chosen by method name.
        #[allow(clippy::large_enum_variant, reason = "decoded once per message and matched at once")]
        #[derive(Debug, Clone, PartialEq)]
        pub enum MethodParams {
            $($( #[doc = concat!("Params of `", $name, "`.")] $key($params), )?)*
            /// A method ski has no types for (extension methods among them), kept raw.
            Other {
                /// The method name.
                method: String,
                /// The params as sent.
                params: Option<Value>,
            },
        }

        impl MethodParams {
            /// Decodes `params` for `method`. A method ski has no types for gives `Other`.
            pub fn decode(method: &str, params: Option<Value>) -> Result<Self, PayloadError> {
                Ok(match method {
                    $($( methods::$konst => Self::$key(decode(method, "params", params)?), )?)*
                    _ => Self::Other { method: method.to_owned(), params },
                })
            }

            /// The method name.
            pub fn method(&self) -> &str {
                match self {
                    $($( Self::$key(_) => methods::$konst, )?)*
                    Self::Other { method, .. } => method,
                }
            }

            /// The params as JSON; `None` only for `Other` without params.
            pub fn to_value(&self) -> Result<Option<Value>, serde_json::Error> {
                match self {
                    $($( Self::$key(params) => serde_json::to_value(params).map(Some), )?)*
                    Self::Other { params, .. } => Ok(params.clone()),
                }
            }
        }

        /// The typed result of a request, chosen by the method of the request it answers.
        #[allow(clippy::large_enum_variant, reason = "decoded once per message and matched at once")]
        #[derive(Debug, Clone, PartialEq)]
        pub enum MethodResult {
            $($($( #[doc = concat!("Result of `", $name, "`.")] $key($result), )?)?)*
            /// A method ski has no types for, kept raw.
            Other {
                /// The method name.
                method: String,
                /// The result as sent.
                result: Value,
            },
        }

        impl MethodResult {
            /// Decodes `result` as the answer to `method`.
            pub fn decode(method: &str, result: Value) -> Result<Self, PayloadError> {
                Ok(match method {
                    $($($( methods::$konst => {
                        Self::$key(decode::<$result>(method, "result", Some(result))?)
                    } )?)?)*
                    _ => Self::Other { method: method.to_owned(), result },
                })
            }

            /// The method of the request this answers.
            pub fn method(&self) -> &str {
                match self {
                    // The type names the row's result, which only the rows with one have.
                    $($($( Self::$key(result) => {
                        let _: &$result = result;
                        methods::$konst
                    } )?)?)*
                    Self::Other { method, .. } => method,
                }
            }

            /// The result as JSON.
            pub fn to_value(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $($($( Self::$key(result) => serde_json::to_value::<&$result>(result), )?)?)*
                    Self::Other { result, .. } => Ok(result.clone()),
                }
            }
        }
    };
}

methods::acp_method_table!(method_payloads);
