//! Helpers the fake Slack tests share: the slack-morphism client pointed at the fake, and a plain
//! HTTP client for the request shapes other clients send.

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use ski_mocks::slack::FakeSlack;
use slack_morphism::prelude::*;

pub type Connector = SlackClientHyperConnector<hyper_rustls::HttpsConnector<HttpConnector>>;

/// slack-morphism with its documented base-URL option and an `https_or_http` connector (its
/// default connector is https-only).
pub fn morphism(slack: &FakeSlack) -> Arc<SlackClient<Connector>> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(tokio_rustls::rustls::crypto::ring::default_provider())
        .expect("native roots")
        .https_or_http()
        .enable_http1()
        .build();
    let connector =
        SlackClientHyperConnector::with_connector(https).with_slack_api_url(&slack.api_base_url());
    Arc::new(SlackClient::new(connector))
}

pub fn bot_token() -> SlackApiToken {
    SlackApiToken::new("xoxb-fake-bot".into())
}

pub fn app_token() -> SlackApiToken {
    SlackApiToken::new("xapp-fake-app".into())
}

/// One request with this method, content type and body; answers the status and the body text.
pub async fn raw(
    method: &str,
    url: &str,
    content_type: Option<&str>,
    token: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut request = hyper::Request::builder().method(method).uri(url);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("request");
    send(&client, request).await
}

/// Sends `request` through `client`: answers the status and the body text.
async fn send<C>(
    client: &Client<C, Full<Bytes>>,
    request: hyper::Request<Full<Bytes>>,
) -> (u16, String)
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let response = client.request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A JSON API call's answer.
pub async fn api(url: &str, content_type: Option<&str>, token: Option<&str>, body: &[u8]) -> Value {
    let (status, text) = raw("POST", url, content_type, token, body).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("json answer")
}

/// A JSON API call over HTTPS that trusts only the CA in `ca_pem`: answers the status and the body.
pub async fn https_get(ca_pem: &str, url: &str, token: &str) -> (u16, Value) {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(certificate.expect("a PEM certificate"))
            .expect("a usable CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let request = hyper::Request::builder()
        .method("GET")
        .uri(url)
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let (status, text) = send(&client, request).await;
    (status, serde_json::from_str(&text).expect("json answer"))
}
