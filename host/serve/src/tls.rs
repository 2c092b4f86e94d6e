//! HTTPS for the listener: the certificate chain and key from PEM files,
//! and a listener that hands axum only connections whose handshake
//! finished. It must never let one slow or failed handshake stop the
//! listener from accepting others for longer than the handshake timeout.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

use crate::server::ServeError;

/// How long a client may take over its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The acceptor for a PEM certificate chain and private key.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ServeError> {
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        ServeError::Tls(format!("{what} {}: {e}", path.display()))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("cannot read the certificate", cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("cannot parse the certificate", cert, &e))?;
    if chain.is_empty() {
        return Err(bad("no certificate in", cert, &"the file holds none"));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| bad("cannot read the key", key, &e))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| ServeError::Tls(format!("the certificate and key do not fit: {e}")))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A TCP listener whose connections are TLS sessions.
pub struct TlsListener {
    pub tcp: TcpListener,
    pub acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // As axum's own listener does: an accept error (such as
                    // too many open files) is waited out, never fatal.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            match tokio::time::timeout(HANDSHAKE, self.acceptor.accept(stream)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => tracing::info!(%addr, error = %e, "TLS handshake failed"),
                Err(_) => tracing::info!(%addr, "TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
