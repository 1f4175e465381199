//! ACP's remote transport (the "Streamable HTTP & WebSocket Transport" RFD) as the runner judges
//! it: the raw HTTP client ([`http`]), the Streamable HTTP message transport of a connection
//! ([`streamable`]), and the ACP-HTTP rows ([`rows`]).

pub mod http;
pub mod rows;
pub mod streamable;
