//! Deliveries over https, the default: to a receiver whose certificate a
//! trusted authority signed for the URL's name, and never to one it did not.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use leasehold_webhooks::{Outcome, Secret, Sender, SenderOptions, Signed};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
}

/// An authority, and a certificate it signed for `hooks.test`, in `dir`.
fn certificates(dir: &Path) {
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:hooks.test\nbasicConstraints=CA:FALSE\n",
    )
    .expect("write the extensions");
    #[rustfmt::skip]
    openssl(dir, &["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hooks test CA"]);
    #[rustfmt::skip]
    openssl(dir, &["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=hooks.test"]);
    #[rustfmt::skip]
    openssl(dir, &["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf"]);
}

/// A TLS receiver on 127.0.0.1 answering 204; counts what it hears.
async fn tls_receiver(dir: &Path) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .expect("the chain")
        .collect::<Result<_, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).expect("the key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("a server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let heard = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = heard.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, h) = (acceptor.clone(), h.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let svc = service_fn(move |_: hyper::Request<Incoming>| {
                    h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    async {
                        let mut res = hyper::Response::new(Full::new(Bytes::new()));
                        *res.status_mut() = hyper::StatusCode::NO_CONTENT;
                        Ok::<_, std::convert::Infallible>(res)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, heard)
}

fn sender(roots: Vec<Vec<u8>>) -> Sender {
    Sender::new(SenderOptions {
        allowed: vec!["127.0.0.0/8".parse().expect("net")],
        resolve: [(
            "hooks.test".to_owned(),
            vec!["127.0.0.1".parse().expect("ip")],
        )]
        .into(),
        extra_roots: roots,
        timeout: Duration::from_secs(10),
        ..SenderOptions::default()
    })
    .expect("sender")
}

fn signed() -> Signed {
    let secret = Secret::generate().expect("secret");
    let body = b"{}";
    Signed {
        id: "msg_tls".into(),
        timestamp: 1_700_000_000,
        signature: secret.sign("msg_tls", 1_700_000_000, body),
        body: bytes::Bytes::from_static(body),
    }
}

#[tokio::test]
async fn https_is_delivered_to_a_trusted_certificate_and_never_to_an_unknown_one() {
    let dir = tempfile::tempdir().expect("tmp");
    certificates(dir.path());
    let (port, heard) = tls_receiver(dir.path()).await;
    let url = format!("https://hooks.test:{port}/in");
    let ca = std::fs::read(dir.path().join("ca.pem")).expect("the authority");

    let trusting = sender(vec![ca]);
    assert_eq!(
        trusting.send(&url, &signed()).await.outcome,
        Outcome::Status(204)
    );
    assert_eq!(heard.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Without the authority the certificate is unknown: the handshake
    // fails and nothing is sent.
    let untrusting = sender(Vec::new());
    match untrusting.send(&url, &signed()).await.outcome {
        Outcome::Failed(why) => assert!(why.to_lowercase().contains("certificate"), "{why}"),
        other => panic!("delivered over an unverified connection: {other:?}"),
    }
    assert_eq!(heard.load(std::sync::atomic::Ordering::SeqCst), 1);
}
