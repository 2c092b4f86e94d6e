//! HTTPS for the listener: the certificate chain and key from PEM files,
//! made into the acceptor every connection's task handshakes with (see
//! `connections`). It must never accept a key that does not fit the
//! certificate, or a protocol version rustls deems unsafe.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

use crate::error::ServeError;

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
