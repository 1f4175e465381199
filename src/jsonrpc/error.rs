//! The JSON-RPC error object `{code, message, data?}` and the error codes the protocols use.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON-RPC error code.
///
/// Any integer is legal on the wire; the associated constants name the ones ski's protocols use.
/// Codes are kept as `i64` so that a peer sending a code outside the `i32` range is still read
/// (and can be reported) rather than rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// `-32700`: the line or frame is not valid JSON (or not valid UTF-8).
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// `-32600`: valid JSON, but not a valid JSON-RPC message (batch, missing `jsonrpc`, ...).
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// `-32601`: no handler for the requested method.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// `-32602`: the params do not fit the method.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// `-32603`: the handler failed.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// `-32800`: the request was cancelled (the answer to `$/cancel_request`).
    pub const REQUEST_CANCELLED: ErrorCode = ErrorCode(-32800);
    /// `-32000`: authentication is required first (ACP `auth_required`).
    pub const AUTH_REQUIRED: ErrorCode = ErrorCode(-32000);
    /// `-32002`: a named resource (session, file) does not exist.
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);

    /// The standard message for a named code, or `None` for other codes.
    pub fn default_message(self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::PARSE_ERROR => "Parse error",
            ErrorCode::INVALID_REQUEST => "Invalid request",
            ErrorCode::METHOD_NOT_FOUND => "Method not found",
            ErrorCode::INVALID_PARAMS => "Invalid params",
            ErrorCode::INTERNAL_ERROR => "Internal error",
            ErrorCode::REQUEST_CANCELLED => "Request cancelled",
            ErrorCode::AUTH_REQUIRED => "Authentication required",
            ErrorCode::RESOURCE_NOT_FOUND => "Resource not found",
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<i64> for ErrorCode {
    fn from(value: i64) -> Self {
        ErrorCode(value)
    }
}

/// A JSON-RPC error object, as carried by an error response.
///
/// It is also the error type of request handlers: a handler returning `Err(RpcError)` makes the
/// peer answer with exactly this object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("rpc error {code}: {message}")]
pub struct RpcError {
    /// The error code.
    pub code: ErrorCode,
    /// A short description.
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and message and no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// An error with the standard message of `code` (or `"Error"` for codes without one).
    pub fn from_code(code: ErrorCode) -> Self {
        Self::new(code, code.default_message().unwrap_or("Error"))
    }

    /// Returns the error with `data` set.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700` with a reason in `data.reason`.
    pub fn parse_error(reason: impl Into<String>) -> Self {
        Self::from_code(ErrorCode::PARSE_ERROR).with_reason(reason)
    }

    /// `-32600` with a reason in `data.reason`.
    pub fn invalid_request(reason: impl Into<String>) -> Self {
        Self::from_code(ErrorCode::INVALID_REQUEST).with_reason(reason)
    }

    /// `-32601` with `data.method` naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::from_code(ErrorCode::METHOD_NOT_FOUND)
            .with_data(serde_json::json!({ "method": method }))
    }

    /// `-32602` with a reason in `data.reason`.
    pub fn invalid_params(reason: impl Into<String>) -> Self {
        Self::from_code(ErrorCode::INVALID_PARAMS).with_reason(reason)
    }

    /// `-32603` with a reason in `data.reason`.
    pub fn internal_error(reason: impl Into<String>) -> Self {
        Self::from_code(ErrorCode::INTERNAL_ERROR).with_reason(reason)
    }

    /// `-32800`, the answer to a cancelled request.
    pub fn request_cancelled() -> Self {
        Self::from_code(ErrorCode::REQUEST_CANCELLED)
    }

    /// `-32000`, authentication required.
    pub fn auth_required() -> Self {
        Self::from_code(ErrorCode::AUTH_REQUIRED)
    }

    /// `-32002` with a reason in `data.reason` (for example which session is unknown).
    pub fn resource_not_found(reason: impl Into<String>) -> Self {
        Self::from_code(ErrorCode::RESOURCE_NOT_FOUND).with_reason(reason)
    }

    fn with_reason(self, reason: impl Into<String>) -> Self {
        self.with_data(serde_json::json!({ "reason": reason.into() }))
    }
}

/// Decodes request params into a typed value, mapping failure to `-32602 invalid params`.
///
/// Absent params decode as JSON `null`, so an `Option<T>` or a type with all-default fields accepts
/// a request without params.
pub fn decode_params<T: serde::de::DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|e| RpcError::invalid_params(e.to_string()))
}

/// As [`decode_params`], from the params' text (see `jsonrpc::TextRequestHandler`): params that
/// decode are read straight from the text, without a `Value`; params that do not are decoded
/// again as a `Value`, so that the answer is exactly the one [`decode_params`] gives (its message
/// names no text position, and a repeated member keeps its last value, as in a `Value`).
pub fn decode_params_text<T: serde::de::DeserializeOwned>(
    params: Option<&RawValue>,
) -> Result<T, RpcError> {
    let Some(text) = params else {
        return decode_params(None);
    };
    serde_json::from_str(text.get()).or_else(|_| {
        let value = serde_json::from_str(text.get())
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        decode_params(Some(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_codes_have_their_numbers() {
        let table = [
            (ErrorCode::PARSE_ERROR, -32700),
            (ErrorCode::INVALID_REQUEST, -32600),
            (ErrorCode::METHOD_NOT_FOUND, -32601),
            (ErrorCode::INVALID_PARAMS, -32602),
            (ErrorCode::INTERNAL_ERROR, -32603),
            (ErrorCode::REQUEST_CANCELLED, -32800),
            (ErrorCode::AUTH_REQUIRED, -32000),
            (ErrorCode::RESOURCE_NOT_FOUND, -32002),
        ];
        for (code, number) in table {
            assert_eq!(code.0, number);
            assert!(code.default_message().is_some());
        }
    }

    #[test]
    fn error_object_omits_absent_data() {
        let error = RpcError::request_cancelled();
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"code":-32800,"message":"Request cancelled"}"#
        );
        let error = RpcError::method_not_found("_x/y");
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::json!({"code": -32601, "message": "Method not found", "data": {"method": "_x/y"}})
        );
    }
}
