//! JSON-RPC 2.0 as ACP and the other protocols use it: messages, ids, error codes, NDJSON framing
//! and the peer.
//!
//! - [`message`]: the message types, how an incoming JSON text is classified (or rejected with the
//!   answer a peer owes), and the one-line encoding.
//! - [`framing`]: NDJSON over any `AsyncRead`/`AsyncWrite` with a bounded line length.
//! - [`transport`]: what a peer runs over, a byte stream or a message (frame) transport, with a
//!   WebSocket adapter.
//! - [`peer`]: the connection: pending table, timeouts, cancellation, concurrent dispatch,
//!   ordered notifications, send gate.
//! - [`wire`]: taps that see every raw line in and out.
//!
//! ```
//! use ski::jsonrpc::{Message, VersionField, decode};
//!
//! let message = decode(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#, VersionField::Required)
//!     .expect("a valid request");
//! assert_eq!(message.method(), Some("ping"));
//! assert_eq!(message.to_line().unwrap(), r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#);
//! ```

pub mod error;
pub mod framing;
pub mod id;
pub mod message;
pub mod peer;
pub mod transport;
pub mod wire;

pub(crate) mod websocket;

pub use error::{ErrorCode, RpcError, decode_params, decode_params_text};
pub use framing::{DEFAULT_MAX_LINE_BYTES, FrameError, LineReader, LineWriter};
pub use id::RequestId;
pub use message::{
    CallParams, DecodeError, EncodeError, Message, Notification, Request, Response, VersionField,
    classify, decode, decode_noting_version, decode_with_params, encode_into,
    encode_notification_into, encode_result_into,
};
pub use peer::{
    BoxFuture, CANCEL_REQUEST_METHOD, CallError, IdStyle, NotificationContext, NotificationHandler,
    Peer, PeerBuilder, PeerStats, RequestContext, RequestHandler, RequestOptions, ResponseFuture,
    SendError, TextRequestHandler, Timeout,
};
pub use transport::{MessageTooBig, Transport};
pub use wire::{Direction, WireEvent, WireObserver};
