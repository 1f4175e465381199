//! TLS for ACP's remote transport (`https://…/acp`): the server's certificate chain and key read
//! from PEM files, the client's trust (a CA file, else the platform's roots), both with rustls's
//! ring provider, and ALPN (`h2` for Streamable HTTP, `http/1.1` for the WebSocket upgrade).

use std::io;
use std::path::Path;
use std::sync::Arc;

use hyper_rustls::ConfigBuilderExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The ALPN name of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";

/// The ALPN name of HTTP/1.1 (the WebSocket upgrade needs it).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Why TLS could not be set up from the files given.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the {what} {path}: {source}")]
    Read {
        /// Which file (`certificate file`).
        what: &'static str,
        /// The path as given.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// A file was read but does not hold what it should.
    #[error("the {what} {path} {reason}")]
    Invalid {
        /// Which file.
        what: &'static str,
        /// The path as given.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the configuration (a key that does not fit the certificate, say).
    #[error("{0}")]
    Config(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.display().to_string(),
        source,
    })
}

/// Every `CERTIFICATE` block of a PEM file; at least one.
pub fn read_certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(what, path)?;
    let invalid = |reason: String| TlsError::Invalid {
        what,
        path: path.display().to_string(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid(format!("is not valid PEM: {error}")))?;
    if certificates.is_empty() {
        return Err(invalid(
            "holds no PEM CERTIFICATE block (expected -----BEGIN CERTIFICATE-----)".to_owned(),
        ));
    }
    Ok(certificates)
}

/// The server side for `--tls-cert` and `--tls-key`: the certificate chain (the server's
/// certificate first), its private key (PKCS#8, PKCS#1 or SEC1 PEM), ALPN `h2` then `http/1.1`.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = read_certificates("certificate file", cert)?;
    let key_bytes = read("key file", key)?;
    let private = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|error| TlsError::Invalid {
        what: "key file",
        path: key.display().to_string(),
        reason: format!(
            "holds no usable private key (a PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block): {error}"
        ),
    })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Config(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|error| {
            TlsError::Config(format!(
                "the certificate and key of {} and {} do not make a server identity: {error}",
                cert.display(),
                key.display()
            ))
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
    Ok(Arc::new(config))
}

/// The acceptor of a server configuration.
pub fn acceptor(config: Arc<ServerConfig>) -> TlsAcceptor {
    TlsAcceptor::from(config)
}

/// The client side: the certificate authorities of `ca` (a PEM file) or, without one, the
/// platform's roots; `alpn` the protocols offered, in order.
pub fn client_config(ca: Option<&Path>, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Config(error.to_string()))?;
    let builder = match ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for certificate in read_certificates("CA file", path)? {
                roots.add(certificate).map_err(|error| TlsError::Invalid {
                    what: "CA file",
                    path: path.display().to_string(),
                    reason: format!("holds a certificate rustls cannot use as a root: {error}"),
                })?;
            }
            builder.with_root_certificates(roots)
        }
        None => builder.with_native_roots().map_err(|error| {
            TlsError::Config(format!(
                "the platform's CA certificates cannot be read ({error}); name the CA that signed the server's certificate with a CA file"
            ))
        })?,
    };
    let mut config = builder.with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|name| name.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The host of `HOST:PORT` (brackets of an IPv6 address removed), as the name the server's
/// certificate must carry.
pub fn server_name(authority: &str) -> Result<ServerName<'static>, String> {
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_owned())
        .map_err(|error| format!("{host:?} is not a host name TLS can check: {error}"))
}

/// Whether a handshake failed because the server's certificate is not trusted (rather than,
/// say, the connection dropping).
pub fn is_certificate_error(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|error| {
            matches!(
                error,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            )
        })
}

/// The TLS handshake over `tcp` to the server at `authority` (`HOST:PORT`). Its error says
/// whether the server's certificate was refused.
pub async fn connect(
    config: Arc<ClientConfig>,
    authority: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let name = server_name(authority)?;
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|error| {
            if is_certificate_error(&error) {
                format!(
                    "the TLS handshake refused the server's certificate: {error} (is it signed by a certificate authority this client trusts? name that CA's PEM file)"
                )
            } else {
                format!("the TLS handshake failed: {error}")
            }
        })
}

/// The protocol the server chose by ALPN, if any.
pub fn negotiated(stream: &TlsStream<TcpStream>) -> Option<&[u8]> {
    stream.get_ref().1.alpn_protocol()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_authority() {
        assert!(matches!(
            server_name("127.0.0.1:443").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:8443").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("localhost:1").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(server_name("bad host:1").is_err());
    }

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem\n").unwrap();
        let missing = dir.path().join("missing.pem");
        let error = server_config(&missing, &missing).unwrap_err().to_string();
        assert!(
            error.contains("certificate file") && error.contains("missing.pem"),
            "{error}"
        );
        let error = client_config(Some(&empty), &[]).unwrap_err().to_string();
        assert!(error.contains("no PEM CERTIFICATE"), "{error}");
    }
}
