//! Interop of ski's remote `/acp` transport with the official Rust SDK's
//! (`agent-client-protocol-http`), both profiles each way: ski's client (`ski acp client
//! connect --transport http`, the real binary) against the SDK's server hosting an agent written
//! here with the SDK, and the SDK's client against `ski acp serve --transport http` (the real
//! binary on a free port): `initialize`, `session/new`, and a prompt turn whose chunks arrive and
//! whose stop reason is `end_turn`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, InitializeRequest, InitializeResponse, NewSessionRequest,
    NewSessionResponse, PermissionOptionKind, PromptRequest, PromptResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{
    Agent, Client, ConnectTo, on_receive_notification, on_receive_request,
};
use agent_client_protocol_http::{AcpHttpServer, HttpClient};
use hyper_util::rt::{TokioExecutor, TokioIo};
use nix::sys::signal::Signal;
use ski::transport::child::{self, ChildSpec};
use tokio::net::TcpListener;
use tower_service::Service;

const SKI: &str = env!("CARGO_BIN_EXE_ski");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the SDK agent streams in answer to every prompt.
const SDK_ANSWER: &str = "sdk agent says hello";

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// An agent written with the SDK: answers `initialize`, `session/new`, and each prompt with one
/// text chunk and `end_turn`.
fn sdk_agent() -> impl ConnectTo<Client> {
    Agent
        .v1()
        .name("ski-interop-agent")
        .on_receive_request(
            async |request: InitializeRequest, responder, _cx| {
                responder.respond(InitializeResponse::new(request.protocol_version))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async |_request: NewSessionRequest, responder, _cx| {
                responder.respond(NewSessionResponse::new("sdk-session-1"))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async |request: PromptRequest, responder, cx: ConnectionTo<Client>| {
                cx.send_notification(SessionNotification::new(
                    request.session_id,
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(
                        SDK_ANSWER,
                    ))),
                ))?;
                responder.respond(PromptResponse::new(StopReason::EndTurn))
            },
            on_receive_request!(),
        )
}

/// The SDK's server (its axum router) on a free loopback port, served HTTP/1.1 and cleartext
/// HTTP/2 with upgrades, as an application embedding it would; its `http://…/acp` URL.
async fn sdk_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let router = AcpHttpServer::new(sdk_agent).into_router();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let router = router.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let mut router = router.clone();
                    async move {
                        Ok::<_, Infallible>(
                            router.call(request).await.unwrap_or_else(|e| match e {}),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{address}/acp")
}

/// `ski acp client connect --transport http` in `profile` with one prompt: its stdout.
fn ski_client(url: &str, profile: &str) -> String {
    let output = std::process::Command::new(SKI)
        .args(["acp", "client", "connect", "--transport", "http"])
        .args(["--endpoint", url, "--profile", profile])
        .args(["--prompt", "hello sdk"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run ski acp client connect");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{profile}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ski_client_does_a_turn_against_the_sdk_server_in_both_profiles() {
    let url = sdk_server().await;
    for profile in ["http", "ws"] {
        let endpoint = url.clone();
        let run = tokio::task::spawn_blocking(move || ski_client(&endpoint, profile));
        let stdout = within("ski's client", run).await.expect("client task");
        assert_eq!(
            stdout,
            format!("{SDK_ANSWER}\nstopReason: end_turn\n"),
            "{profile}"
        );
    }
}

/// `ski acp serve --transport http` with `args` on a free port, and its `http://…/acp` URL.
async fn ski_serve(args: &[&str]) -> (child::Child, String) {
    let spec = ChildSpec::new("serve", SKI)
        .args([
            "acp",
            "serve",
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args);
    let mut agent = child::spawn(spec).expect("spawn ski acp serve");
    let url = crate::acp_serve_support::listening_url(&mut agent, PATIENCE).await;
    (agent, url)
}

/// What the SDK's client saw of one conversation.
#[derive(Debug)]
struct Seen {
    protocol: ProtocolVersion,
    chunks: String,
    stop: StopReason,
}

/// The SDK's client at `endpoint`: `initialize`, `session/new`, one prompt, permission asked
/// during the turn granted once; the SDK's error if the conversation failed.
async fn sdk_client(endpoint: &str) -> Result<Seen, agent_client_protocol::Error> {
    let transport = HttpClient::with_endpoint(endpoint).expect("an SDK client");
    let chunks = Arc::new(Mutex::new(String::new()));
    let sink = chunks.clone();
    let (protocol, stop) = Client
        .v1()
        .on_receive_request(
            async |request: RequestPermissionRequest, responder, _cx| {
                let outcome = request
                    .options
                    .iter()
                    .find(|option| option.kind == PermissionOptionKind::AllowOnce)
                    .map_or(RequestPermissionOutcome::Cancelled, |option| {
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                            option.option_id.clone(),
                        ))
                    });
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let SessionUpdate::AgentMessageChunk(ContentChunk {
                    content: ContentBlock::Text(TextContent { text, .. }),
                    ..
                }) = notification.update
                {
                    sink.lock().unwrap().push_str(&text);
                }
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_with(transport, async |connection: ConnectionTo<Agent>| {
            let initialized = connection
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = connection
                .send_request(NewSessionRequest::new(std::env::temp_dir()))
                .block_task()
                .await?;
            let answer = connection
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::from("hello from the sdk")],
                ))
                .block_task()
                .await?;
            Ok((initialized.protocol_version, answer.stop_reason))
        })
        .await?;
    let chunks = chunks.lock().unwrap().clone();
    Ok(Seen {
        protocol,
        chunks,
        stop,
    })
}

/// Ends `ski acp serve` with SIGTERM; it exits 0.
async fn stop(agent: child::Child) {
    agent.signal_group(Signal::SIGTERM).expect("signal serve");
    let status = within("serve to stop", agent.wait())
        .await
        .expect("exit status");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_does_a_turn_against_ski_serve_in_both_profiles() {
    // No permission asked: the SDK's client posts its answers to agent requests without
    // Acp-Session-Id (ERRATA E-ACP-65), which the next test pins.
    let (agent, url) = ski_serve(&["--permission-mode", "disabled"]).await;
    let ws = url.replacen("http://", "ws://", 1);
    for endpoint in [url.as_str(), ws.as_str()] {
        let seen = within("the SDK client", sdk_client(endpoint))
            .await
            .unwrap_or_else(|error| panic!("{endpoint}: {error:?}"));
        assert_eq!(seen.protocol, ProtocolVersion::V1, "{endpoint}");
        // The reference agent echoes the prompt as its answer.
        assert_eq!(seen.chunks, "hello from the sdk", "{endpoint}: {seen:?}");
        assert_eq!(seen.stop, StopReason::EndTurn, "{endpoint}");
    }
    stop(agent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_clients_permission_answer_lacks_acp_session_id_over_streamable_http() {
    // The turn asks permission. Over WebSocket the answer needs no header and the turn ends;
    // over Streamable HTTP the SDK posts it without the Acp-Session-Id the RFD requires on
    // "permission responses", and ski refuses it 400 as the RFD's validation says.
    let (agent, url) = ski_serve(&[]).await;
    let ws = url.replacen("http://", "ws://", 1);
    let seen = within("the SDK client over WebSocket", sdk_client(&ws))
        .await
        .expect("the WebSocket conversation");
    assert_eq!(seen.stop, StopReason::EndTurn);
    let error = within("the SDK client over Streamable HTTP", sdk_client(&url))
        .await
        .expect_err("the SDK's header-less permission answer is refused");
    let data = format!("{:?}", error.data);
    assert!(
        data.contains("400") && data.contains("needs the header Acp-Session-Id"),
        "{error:?}"
    );
    stop(agent).await;
}
