//! TLS mode: a certificate authority made at start, a server certificate for the loopback
//! address signed by it, and the TLS front that serves the Web API over HTTPS and Socket Mode
//! over WSS. Clients trust the fake through the CA file (`SSL_CERT_FILE` for clients that read
//! the platform's roots, or their own CA option).

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::config::LimitsConfig;
use super::limits::{Gate, after_accept_error};

/// The host names the server certificate is valid for, besides `127.0.0.1`: the loopback name,
/// and Slack's own names, so that a program whose Slack URL cannot be changed can be sent to the
/// fake by name resolution (a hosts entry, a resolver in a test container) and trust it through
/// the CA file.
pub const SERVER_NAMES: &[&str] = &["localhost", "slack.com", "*.slack.com"];

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up TLS: {0}")]
pub struct TlsError(String);

fn tls_error(error: impl std::fmt::Display) -> TlsError {
    TlsError(error.to_string())
}

/// The CA and the acceptor of one fake.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    ca_pem: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// A new CA and a server certificate signed by it for [`SERVER_NAMES`] and `127.0.0.1`.
    pub fn generate() -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate().map_err(tls_error)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_error)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "ski-fake-slack test CA");
        let ca = ca_params.self_signed(&ca_key).map_err(tls_error)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().map_err(tls_error)?;
        let names = SERVER_NAMES
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>();
        let mut server_params = CertificateParams::new(names).map_err(tls_error)?;
        server_params
            .subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        server_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "ski-fake-slack");
        let server = server_params
            .signed_by(&server_key, &issuer)
            .map_err(tls_error)?;

        let chain = vec![
            CertificateDer::from(server.der().to_vec()),
            CertificateDer::from(ca.der().to_vec()),
        ];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(tls_error)?;
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            ca_pem: ca.pem(),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The acceptor that wraps a TCP connection in TLS.
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

/// Accepts TLS connections on `listener` and relays each, decrypted, to the plain server at
/// `backend` (the Web API's server), until the task is aborted.
pub async fn front(listener: TcpListener, backend: SocketAddr, tls: Tls, limits: LimitsConfig) {
    let gate = Gate::new(limits.max_connections);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            after_accept_error().await;
            continue;
        };
        let Some(permit) = gate.admit() else {
            gate.refuse(stream, "web_api");
            continue;
        };
        let tls = tls.clone();
        let handshake_timeout = limits.header_timeout();
        tokio::spawn(async move {
            let _permit = permit;
            // A client that gives up during the handshake, or takes too long, is gone.
            let handshake = tokio::time::timeout(handshake_timeout, tls.acceptor().accept(stream));
            let Ok(Ok(mut secure)) = handshake.await else {
                return;
            };
            let Ok(mut plain) = TcpStream::connect(backend).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut secure, &mut plain).await;
        });
    }
}
