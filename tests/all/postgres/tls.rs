//! TLS against a throwaway cluster that accepts only TLS connections, with
//! a certificate authority each test makes (openssl CLI) and trusts or not.
//! Skips, saying so, where there is no PostgreSQL to start (no root, no
//! binaries) and no test database.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use leasehold_host::{Engine, Error, PgError};

const BIN: &str = "/usr/lib/postgresql/15/bin";

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    run(Command::new("openssl").current_dir(dir).args(args));
}

/// A certificate authority and a server certificate it signed for
/// `localhost` only, in `dir`: `NAME-ca.pem`, `NAME-server.pem`,
/// `NAME-server.key`.
fn make_ca(dir: &Path, name: &str) {
    let ca_key = format!("{name}-ca.key");
    let ca = format!("{name}-ca.pem");
    let key = format!("{name}-server.key");
    let csr = format!("{name}-server.csr");
    let cert = format!("{name}-server.pem");
    let ext = format!("{name}-ext.cnf");
    std::fs::write(
        dir.join(&ext),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .expect("write the extensions");
    #[rustfmt::skip]
    openssl(dir, &["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", &format!("/CN={name} test CA")]);
    #[rustfmt::skip]
    openssl(dir, &["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"]);
    #[rustfmt::skip]
    openssl(dir, &["x509", "-req", "-in", &csr, "-CA", &ca, "-CAkey", &ca_key, "-CAcreateserial",
        "-out", &cert, "-days", "2", "-extfile", &ext]);
}

/// A cluster of its own on a free port, TLS on, plaintext refused; stopped
/// and removed when dropped.
struct TlsCluster {
    dir: tempfile::TempDir,
    port: u16,
}

impl TlsCluster {
    fn start() -> Option<TlsCluster> {
        leasehold_tests::pg::url()?;
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if !root || !Path::new(BIN).join("initdb").exists() {
            eprintln!(
                "skipped: cannot start a PostgreSQL cluster of its own here (needs root and {BIN})"
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("a temp dir");
        let base = dir.path();
        let data = base.join("data");
        make_ca(base, "trusted");
        make_ca(base, "stranger");
        run(Command::new("chown").arg("-R").arg("postgres").arg(base));
        let as_postgres = |program: &str| {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(Path::new(BIN).join(program));
            c
        };
        run(as_postgres("initdb")
            .arg("-D")
            .arg(&data)
            .args(["--auth=trust", "-U", "postgres"]));
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nfsync = off\n",
            base.display(),
            base.join("trusted-server.pem").display(),
            base.join("trusted-server.key").display(),
        );
        let mut existing =
            std::fs::read_to_string(data.join("postgresql.conf")).expect("postgresql.conf");
        existing.push_str(&conf);
        std::fs::write(data.join("postgresql.conf"), existing).expect("postgresql.conf");
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .expect("pg_hba.conf");
        run(Command::new("chmod")
            .arg("600")
            .arg(base.join("trusted-server.key")));
        run(Command::new("chown").arg("-R").arg("postgres").arg(base));
        run(as_postgres("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(base.join("log"))
            .args(["-w", "start"]));
        Some(TlsCluster { dir, port })
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn url(&self, host: &str, params: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{params}", self.port)
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(Path::new(BIN).join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

fn tls_error(e: &Error) -> Option<String> {
    match e {
        Error::Storage(source) => match source.downcast_ref::<PgError>() {
            Some(p @ PgError::Tls { .. }) => {
                Some(format!("{p}: {:?}", std::error::Error::source(p)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `require` encrypts (the cluster refuses anything else) without checking
/// the certificate; `verify-full` with the right CA and host name works; a
/// host name the certificate does not name, or a CA that did not sign it,
/// fails `verify-full` with a TLS error that says why; `verify-ca` accepts
/// the right CA whatever the host name.
#[test]
fn sslmodes_encrypt_and_verify_as_libpq_does() {
    let Some(cluster) = TlsCluster::start() else {
        return;
    };
    let trusted = cluster.path("trusted-ca.pem");
    let stranger = cluster.path("stranger-ca.pem");
    let works = |url: &str| {
        let e = Engine::builder()
            .postgres(url)
            .unwrap_or_else(|e| panic!("{url}: {e:?}"));
        let t = e.tenant("acme").expect("tenant");
        t.open(&leasehold_tests::task("t1", 1)).expect("open");
        assert!(t.get("t1").expect("get").is_some());
    };
    let fails = |url: &str| {
        Engine::builder()
            .postgres(url)
            .err()
            .unwrap_or_else(|| panic!("{url} connected"))
    };

    // Plaintext is refused by the cluster, so every success below is TLS.
    let plain = fails(&cluster.url("127.0.0.1", "sslmode=disable"));
    assert!(
        matches!(&plain, Error::Storage(s) if matches!(s.downcast_ref::<PgError>(), Some(PgError::Connect { .. }))),
        "{plain:?}"
    );
    works(&cluster.url("127.0.0.1", "sslmode=require"));
    works(&cluster.url("127.0.0.1", "sslmode=prefer"));
    works(&cluster.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", trusted.display()),
    ));
    works(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={}", trusted.display()),
    ));

    let wrong_host = fails(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", trusted.display()),
    ));
    let why = tls_error(&wrong_host).unwrap_or_else(|| panic!("not a TLS error: {wrong_host:?}"));
    assert!(why.contains("NotValidForName"), "{why}");

    let unknown_ca = fails(&cluster.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", stranger.display()),
    ));
    let why = tls_error(&unknown_ca).unwrap_or_else(|| panic!("not a TLS error: {unknown_ca:?}"));
    assert!(why.contains("UnknownIssuer"), "{why}");
    // `require` with a root certificate checks the chain, as libpq does.
    let unknown_ca = fails(&cluster.url(
        "localhost",
        &format!("sslmode=require&sslrootcert={}", stranger.display()),
    ));
    assert!(tls_error(&unknown_ca).is_some(), "{unknown_ca:?}");

    let no_root = fails(&cluster.url("localhost", "sslmode=verify-full"));
    assert!(
        no_root.to_string().contains("TLS")
            || std::error::Error::source(&no_root).is_some_and(|s| s.to_string().contains("TLS")),
        "{no_root:?}"
    );
}
