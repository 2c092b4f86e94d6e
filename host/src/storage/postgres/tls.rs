//! TLS for PostgreSQL connections: libpq's `sslmode` and `sslrootcert`,
//! over rustls. It owns how a server's certificate is checked; it never
//! weakens a mode below what libpq does for the same setting.
//!
//! As in libpq: `disable` never encrypts; `prefer` encrypts when the server
//! offers it and `require` insists, and both check the certificate only
//! against an `sslrootcert` if one is given (then as `verify-ca`);
//! `verify-ca` checks the chain against `sslrootcert`, and `verify-full`
//! checks the host name as well.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, the certificate unchecked.
    Prefer,
    /// TLS always, the certificate unchecked.
    Require,
    /// TLS always, the certificate signed by a trusted CA.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    /// The mode a libpq `sslmode` value names.
    pub fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// The mode's libpq name.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the driver itself is told: it only knows whether to ask for TLS
    /// and whether to insist; checking the certificate is done here.
    pub fn driver_mode(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as M;
        match self {
            SslMode::Disable => M::Disable,
            SslMode::Prefer => M::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => M::Require,
        }
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `verify-ca` or `verify-full` with no CA to verify against.
    #[error("sslmode={} needs sslrootcert, the CA certificates to trust", .0.name())]
    NoRootCert(SslMode),
    /// The `sslrootcert` file could not be read.
    #[error("cannot read sslrootcert {path:?}")]
    RootCertFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The `sslrootcert` file holds no certificate that can be used.
    #[error("sslrootcert {path:?} holds no usable CA certificate")]
    RootCertEmpty {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the configuration.
    #[error("cannot set up TLS")]
    Rustls(#[source] rustls::Error),
    /// The host cannot be named by a certificate.
    #[error("{0:?} is not a host name or address a certificate can name")]
    ServerName(String),
}

/// The TLS connector for one configuration, or `None` for `disable`.
#[derive(Clone)]
pub struct MakeRustls {
    config: Option<Arc<ClientConfig>>,
}

impl MakeRustls {
    pub fn new(mode: SslMode, root_cert: Option<&Path>) -> Result<MakeRustls, TlsError> {
        if mode == SslMode::Disable {
            return Ok(MakeRustls { config: None });
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = root_cert.map(load_roots).transpose()?;
        let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
            (SslMode::VerifyFull, Some(roots)) => web_pki(roots, &provider)?,
            (SslMode::VerifyCa | SslMode::Require | SslMode::Prefer, Some(roots)) => {
                Arc::new(ChainOnly(web_pki(roots, &provider)?))
            }
            (SslMode::VerifyFull | SslMode::VerifyCa, None) => {
                return Err(TlsError::NoRootCert(mode));
            }
            (SslMode::Disable | SslMode::Prefer | SslMode::Require, _) => {
                Arc::new(EncryptOnly(provider.signature_verification_algorithms))
            }
        };
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(MakeRustls {
            config: Some(Arc::new(config)),
        })
    }
}

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::RootCertFile {
            path: path.to_owned(),
            source,
        })?;
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::RootCertEmpty {
            path: path.to_owned(),
        });
    }
    Ok(roots)
}

fn web_pki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, TlsError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))
}

/// `verify-ca`: the chain must lead to a trusted CA; the name is not checked.
/// The chain is checked before the name, so a name error means the chain
/// passed.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without `sslrootcert`: encrypted, but the
/// certificate is not checked, as in libpq. The handshake's signatures still
/// are, so the session is with whoever holds the certificate's key.
#[derive(Debug)]
struct EncryptOnly(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, TlsError> {
        let name = match &self.config {
            Some(_) => Some(
                ServerName::try_from(domain.to_owned())
                    .map_err(|_| TlsError::ServerName(domain.to_owned()))?,
            ),
            None => None,
        };
        Ok(RustlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

/// One connection's TLS handshake.
pub struct RustlsConnect {
    config: Option<Arc<ClientConfig>>,
    name: Option<ServerName<'static>>,
}

type Handshake<S> = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        Box::pin(async move {
            let (Some(config), Some(name)) = (self.config, self.name) else {
                return Err(io::Error::other("TLS is disabled (sslmode=disable)"));
            };
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A connection's stream once TLS is up.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM authenticates without it, as it does for
    /// libpq when the server does not insist.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
