//! An echo ACP agent on the official Rust SDK, the baseline of ski's benchmarks: `initialize`,
//! `session/new`, and `session/prompt`, whose reply (the prompt's text) goes out as one
//! `agent_message_chunk`, or `_meta.ski.floodChunks` of them.
//!
//! `official-agent` serves on stdio; `official-agent --ws` listens on a free loopback port,
//! prints `listening on ws://HOST:PORT/acp` on stderr and serves every connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::{Agent, ConnectTo, Stdio, on_receive_request};
use anyhow::{Context, Result, bail};
use ski_bench_official::{flood_chunks, ws_lines};

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => serve(Stdio::new(), Arc::default()).await,
        ["--ws"] => serve_ws().await,
        _ => bail!("usage: official-agent [--ws]"),
    }
}

async fn serve_ws() -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind a loopback port")?;
    eprintln!("listening on ws://{}/acp", listener.local_addr()?);
    let sessions = Arc::new(AtomicU64::new(0));
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let sessions = sessions.clone();
        tokio::spawn(async move {
            match tokio_tungstenite::accept_async(tcp).await {
                Ok(ws) => {
                    if let Err(error) = serve(ws_lines(ws), sessions).await {
                        eprintln!("connection failed: {error}");
                    }
                }
                Err(error) => eprintln!("websocket handshake failed: {error}"),
            }
        });
    }
}

/// Serves one connection until its input ends.
async fn serve(transport: impl ConnectTo<Agent> + 'static, sessions: Arc<AtomicU64>) -> Result<()> {
    Agent
        .v1()
        .name("ski-bench-official-agent")
        .on_receive_request(
            async |request: InitializeRequest, responder, _cx| {
                let version = if request.protocol_version > ProtocolVersion::V1 {
                    ProtocolVersion::V1
                } else {
                    request.protocol_version
                };
                responder.respond(InitializeResponse::new(version))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed) + 1;
                responder.respond(NewSessionResponse::new(format!("official-{n}")))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async |request: PromptRequest, responder, cx| {
                let text: Vec<&str> = request
                    .prompt
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text(text) => Some(text.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let reply = text.join("\n");
                for _ in 0..flood_chunks(request.meta.as_ref()) {
                    let chunk = SessionUpdate::AgentMessageChunk(
                        agent_client_protocol::v1::schema::ContentChunk::new(ContentBlock::from(
                            reply.clone(),
                        )),
                    );
                    cx.send_notification(SessionNotification::new(
                        request.session_id.clone(),
                        chunk,
                    ))?;
                }
                responder.respond(PromptResponse::new(StopReason::EndTurn))
            },
            on_receive_request!(),
        )
        .connect_to(transport)
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))
}
