//! Operations: health, readiness, metrics, request ids, and the limits
//! (body size, per-request timeout, in-flight bound).

use std::time::Duration;

use leasehold_serve::Options;
use serde_json::json;

use crate::harness::{Service, each_backend, new_task, stores, test_options};

#[test]
fn health_readiness_and_metrics_answer_without_a_credential() {
    each_backend(|svc| {
        let r = svc.call("GET", "/healthz", None, None);
        assert_eq!(r.status, 200);
        let r = svc.call("GET", "/readyz", None, None);
        assert_eq!(r.status, 200);
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
            .expect_ok();
        svc.call("POST", "/v1/tasks/t-1/claim", Some("bob"), None)
            .expect_ok();
        svc.call("POST", "/v1/tasks/t-1/claim", Some("alice"), None)
            .expect_problem(409, "already-claimed");
        let m = svc.call("GET", "/metrics", Some("olga"), None);
        assert_eq!(m.status, 200);
        let text = &m.text;
        for needle in [
            r#"leasehold_calls_total{verb="open",outcome="ok"}"#,
            r#"leasehold_calls_total{verb="claim",outcome="already-claimed"}"#,
            "leasehold_call_seconds_bucket{verb=\"claim\"",
            "leasehold_calls_in_flight",
            r#"route="/v1/tasks/{id}/claim""#,
            r#"status="409""#,
            "leasehold_pg_conflict_retries_total",
        ] {
            assert!(text.contains(needle), "/metrics lacks {needle}:\n{text}");
        }
        let backend_counter = match svc.store.name() {
            "redb" => "leasehold_group_commits_total",
            _ => "leasehold_pg_round_trips_total",
        };
        assert!(
            text.contains(backend_counter),
            "/metrics lacks {backend_counter}"
        );
        // Labels never carry task ids or actors.
        assert!(!text.contains("t-1") && !text.contains("alice"), "{text}");
    });
}

#[test]
fn every_answer_carries_a_request_id_and_keeps_the_callers() {
    each_backend(|svc| {
        let r = svc.call("GET", "/v1/tasks/x", Some("sam"), None);
        let id = r.headers.get("x-request-id").expect("a request id");
        assert!(!id.is_empty());
        let r = svc.call("GET", "/v1/tasks/x", None, None);
        assert!(r.headers.contains_key("x-request-id"), "a 401 too");
        let given = svc
            .client
            .get(svc.url("/healthz"))
            .header("x-request-id", "trace-me-42")
            .send()
            .expect("answers");
        assert_eq!(given.headers()["x-request-id"], "trace-me-42");
    });
}

#[test]
fn past_the_in_flight_bound_a_call_is_refused_with_retry_after() {
    for store in stores() {
        let options = Options {
            max_in_flight: 0,
            ..test_options()
        };
        let svc = Service::start(store, options);
        let r = svc.call("GET", "/v1/stats/open-count", Some("olga"), None);
        r.expect_problem(503, "overloaded");
        assert_eq!(r.headers["retry-after"], "1");
        // Operations endpoints stay outside the bound.
        assert_eq!(svc.call("GET", "/healthz", None, None).status, 200);
        assert_eq!(svc.call("GET", "/readyz", None, None).status, 200);
    }
}

/// A request whose body never finishes arriving is answered 408 at its
/// deadline, and nothing was done: the client holds the rest back until the
/// answer has come.
#[test]
fn a_body_that_never_arrives_is_answered_408_and_changes_nothing() {
    use std::io::{Read, Write};
    for store in stores() {
        let options = Options {
            request_timeout: Duration::from_millis(200),
            ..test_options()
        };
        let svc = Service::start(store, options);
        let addr = svc.url("").trim_start_matches("http://").to_owned();
        let mut tcp = std::net::TcpStream::connect(&addr).expect("connects");
        let head = format!(
            "POST /v1/tasks HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"id\":",
            svc.tokens.get("sam")
        );
        tcp.write_all(head.as_bytes()).expect("writes");
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") || !answer.ends_with(b"}") {
            let n = tcp.read(&mut buf).expect("reads");
            assert!(
                n > 0,
                "closed before answering: {}",
                String::from_utf8_lossy(&answer)
            );
            answer.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(
            text.contains("urn:leasehold:problem:body-timeout"),
            "{text}"
        );
        drop(tcp);
        // Nothing was opened.
        let r = svc.call("GET", "/v1/stats/open-count", Some("olga"), None);
        assert_eq!(r.expect_ok()["count"], 0);
    }
}

#[test]
fn a_smaller_body_limit_is_enforced() {
    for store in stores() {
        let options = Options {
            body_limit: 64,
            ..test_options()
        };
        let svc = Service::start(store, options);
        let r = svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")));
        r.expect_problem(413, "body-too-large");
        let r = svc.call(
            "POST",
            "/v1/timers/claim-due",
            Some("sam"),
            Some(json!({"lease_ms": 5})),
        );
        r.expect_ok();
    }
}

/// Stopping while requests are in flight: each one is answered in full or
/// never started, and every one answered 200 is there after a restart.
#[test]
fn stopping_lets_calls_in_flight_finish_and_keeps_what_they_answered() {
    for store in stores() {
        let mut svc = Service::start(store, test_options());
        let url = svc.url("/v1/tasks");
        let token = svc.tokens.get("sam").to_owned();
        let clients: Vec<_> = (0..64)
            .map(|i| {
                let (url, token, client) = (url.clone(), token.clone(), svc.client.clone());
                std::thread::spawn(move || {
                    let r = client
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&new_task(&format!("g-{i}")))
                        .send();
                    match r {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            // An answer that started arrives whole.
                            let body: serde_json::Value = r.json().expect("a whole body");
                            (i, Some((status, body)))
                        }
                        Err(_) => (i, None),
                    }
                })
            })
            .collect();
        svc.stop();
        let mut answered = Vec::new();
        for c in clients {
            let (i, outcome) = c.join().expect("client thread");
            if let Some((status, body)) = outcome {
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["id"], format!("g-{i}"));
                answered.push(i);
            }
        }
        svc.restart();
        for i in &answered {
            svc.call("GET", &format!("/v1/tasks/g-{i}"), Some("sam"), None)
                .expect_ok();
        }
        eprintln!("{} of 64 were answered before the stop", answered.len());
    }
}

/// With a certificate and key the listener speaks HTTPS only: a client that
/// trusts the certificate is served, and plain HTTP gets no answer.
#[test]
fn the_listener_serves_https_with_the_given_certificate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key, pem) = crate::harness::tls_certificate(dir.path());
    let mut tokens = leasehold_serve::TokenTable::default();
    tokens.insert(
        "lh_tls_operator",
        leasehold_serve::Principal {
            tenant: "acme".to_owned(),
            actor: "olga".to_owned(),
            roles: Vec::new(),
            scope: leasehold_serve::Scope::Operator,
        },
    );
    let server = leasehold_serve::Server::start(leasehold_serve::Config {
        db: dir.path().join("tls.redb").to_string_lossy().into_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        credentials: leasehold_serve::Credentials { tokens, jwt: None },
        options: Options::default(),
        engine: leasehold_host::Engine::builder(),
        tls: Some((cert.clone(), key)),
        reload: None,
        cursor_key: None,
        handle_signals: false,
    })
    .expect("starts with TLS");
    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a certificate"))
        .build()
        .expect("client");
    let port = server.addr().port();
    let r = client
        .get(format!("https://127.0.0.1:{port}/v1/check"))
        .bearer_auth("lh_tls_operator")
        .send()
        .expect("an HTTPS answer");
    assert_eq!(r.status(), 200);
    let plain = reqwest::blocking::get(format!("http://127.0.0.1:{port}/healthz"));
    assert!(plain.is_err() || plain.is_ok_and(|r| !r.status().is_success()));
    server.shutdown().expect("stops");
}

/// A PEM public key works as well as a JWKS: here the RSA key alone.
#[test]
fn a_pem_public_key_verifies_rs256_tokens() {
    use leasehold_serve::{ClaimNames, JwtConfig, JwtVerifier, Scope};
    let dir = tempfile::tempdir().expect("temp dir");
    let private = dir.path().join("rsa.pem");
    std::fs::write(&private, &crate::harness::idp().rsa_private).expect("write");
    let public = dir.path().join("rsa.pub.pem");
    let status = std::process::Command::new("openssl")
        .arg("pkey")
        .arg("-in")
        .arg(&private)
        .arg("-pubout")
        .arg("-out")
        .arg(&public)
        .status()
        .expect("openssl runs");
    assert!(status.success());
    let verifier = JwtVerifier::load(
        &public,
        JwtConfig {
            issuer: crate::harness::ISSUER.to_owned(),
            audience: crate::harness::AUDIENCE.to_owned(),
            claims: ClaimNames::default(),
        },
    )
    .expect("loads");
    let token = crate::harness::jwt(
        "RS256",
        &crate::harness::claims("acme", "alice", "service", &[]),
    );
    let p = verifier.verify(&token).expect("verifies");
    assert_eq!(
        (p.tenant.as_str(), p.actor.as_str(), p.scope),
        ("acme", "alice", Scope::Service)
    );
    let es = crate::harness::jwt(
        "ES256",
        &crate::harness::claims("acme", "alice", "service", &[]),
    );
    assert!(
        verifier.verify(&es).is_err(),
        "an ES256 token against an RSA key"
    );
}
