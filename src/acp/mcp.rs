//! MCP servers the client asks the agent to connect to in session setup.

use serde::{Deserialize, Serialize};

use super::meta::{Extra, tagged_union};

tagged_union! {
    /// An MCP server, discriminated by `type`; no `type` means stdio.
    pub enum McpServer: "type", untagged = Stdio {
        /// A child process speaking MCP over stdio.
        Stdio(McpServerStdio) = "stdio",
        /// Streamable HTTP; needs `mcpCapabilities.http`.
        Http(McpServerHttp) = "http",
        /// Server-sent events; needs `mcpCapabilities.sse`.
        Sse(McpServerHttp) = "sse",
        /// Unstable: MCP carried over ACP `mcp/message`.
        Acp(McpServerAcp) = "acp",
    }
}

/// A stdio MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStdio {
    /// A name for the server.
    pub name: String,
    /// Absolute path of the executable.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<EnvVariable>,
    /// `_meta`, an explicit `type: "stdio"`, and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An HTTP or SSE MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerHttp {
    /// A name for the server.
    pub name: String,
    /// The server URL.
    pub url: String,
    /// Headers to send.
    pub headers: Vec<HttpHeader>,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Unstable: an MCP server reached through the client over ACP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerAcp {
    /// A name for the server.
    pub name: String,
    /// The id the client uses in `mcp/message`.
    pub server_id: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An environment variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVariable {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An HTTP header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeader {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
    /// `_meta` and unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
