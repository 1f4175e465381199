//! Error codes ACP uses in JSON-RPC error responses, beyond the JSON-RPC 2.0 ones.

/// Invalid JSON.
pub const PARSE_ERROR: i32 = -32700;
/// Not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// Unknown method, or a capability-gated method that was not advertised.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// Params that do not fit the method.
pub const INVALID_PARAMS: i32 = -32602;
/// The receiver failed.
pub const INTERNAL_ERROR: i32 = -32603;
/// The request was cancelled (`$/cancel_request`).
pub const REQUEST_CANCELLED: i32 = -32800;
/// The method needs `authenticate` first.
pub const AUTH_REQUIRED: i32 = -32000;
/// A session, file or other resource does not exist.
pub const RESOURCE_NOT_FOUND: i32 = -32002;

/// The name ACP gives a known error code.
pub fn code_name(code: i32) -> Option<&'static str> {
    Some(match code {
        PARSE_ERROR => "parse error",
        INVALID_REQUEST => "invalid request",
        METHOD_NOT_FOUND => "method not found",
        INVALID_PARAMS => "invalid params",
        INTERNAL_ERROR => "internal error",
        REQUEST_CANCELLED => "request cancelled",
        AUTH_REQUIRED => "authentication required",
        RESOURCE_NOT_FOUND => "resource not found",
        _ => return None,
    })
}
