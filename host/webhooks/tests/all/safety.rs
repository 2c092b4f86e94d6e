//! The sender over real sockets: what it refuses before connecting, what
//! it does not follow, and what it bounds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use leasehold_webhooks::{Outcome, Secret, Sender, SenderOptions, Signed, signature_header};

use crate::harness::{Receiver, Reply, always};

fn signed() -> Signed {
    let secret = Secret::generate().expect("secret");
    let body = br#"{"type":"test"}"#;
    Signed {
        id: "msg_test".into(),
        timestamp: 1_700_000_000,
        signature: signature_header(&[&secret], "msg_test", 1_700_000_000, body),
        body: bytes::Bytes::from_static(body),
    }
}

fn sender(allow_http: bool, allowed: &[&str], names: &[(&str, &str)]) -> Sender {
    let resolve: HashMap<String, Vec<IpAddr>> = names
        .iter()
        .map(|(n, a)| ((*n).to_owned(), vec![a.parse().expect("address")]))
        .collect();
    Sender::new(SenderOptions {
        allow_http,
        allowed: allowed.iter().map(|n| n.parse().expect("net")).collect(),
        timeout: Duration::from_secs(5),
        resolve,
        ..SenderOptions::default()
    })
    .expect("sender")
}

fn refused(o: &Outcome, why: &str) {
    match o {
        Outcome::Refused(text) => assert!(text.contains(why), "{text}"),
        other => panic!("expected a refusal ({why}), got {other:?}"),
    }
}

#[tokio::test]
async fn loopback_is_refused_by_default_and_nothing_reaches_it() {
    let r = Receiver::start(always(204)).await;
    let s = sender(true, &[], &[]);
    let a = s.send(&r.url("/in"), &signed()).await;
    refused(&a.outcome, "loopback");
    let by_name = s
        .send(&format!("http://localhost:{}/in", r.addr.port()), &signed())
        .await;
    refused(&by_name.outcome, "loopback");
    assert!(r.got().is_empty(), "a refused address was connected to");
}

#[tokio::test]
async fn a_name_resolving_to_a_refused_address_is_refused_when_connecting() {
    let r = Receiver::start(always(204)).await;
    let port = r.addr.port();
    // Names this test's resolver answers, each with an address of a refused
    // kind; the URL itself names no address, so only the connect-time
    // check can stop them.
    let s = sender(
        true,
        &[],
        &[
            ("loop.hooks.test", "127.0.0.1"),
            ("private.hooks.test", "10.1.2.3"),
            ("cgnat.hooks.test", "100.64.1.1"),
            ("link.hooks.test", "169.254.7.7"),
            ("meta.hooks.test", "169.254.169.254"),
            ("meta6.hooks.test", "fd00:ec2::254"),
            ("ula.hooks.test", "fd12::1"),
            ("mapped.hooks.test", "::ffff:127.0.0.1"),
        ],
    );
    for (name, why) in [
        ("loop", "loopback"),
        ("private", "private"),
        ("cgnat", "carrier-grade"),
        ("link", "link-local"),
        ("meta", "metadata"),
        ("meta6", "metadata"),
        ("ula", "unique-local"),
        ("mapped", "loopback"),
    ] {
        let url = format!("http://{name}.hooks.test:{port}/in");
        assert!(s.check_url(&url).is_ok(), "the URL alone is fine");
        let a = s.send(&url, &signed()).await;
        refused(&a.outcome, why);
    }
    assert!(r.got().is_empty());
}

#[tokio::test]
async fn addresses_in_a_url_are_refused_before_any_connection() {
    let s = sender(true, &[], &[]);
    for (url, why) in [
        ("http://10.0.0.1/", "private"),
        ("http://192.168.1.20/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:10.0.0.1]/", "private"),
        ("http://0.0.0.0/", "unspecified"),
    ] {
        let a = s.send(url, &signed()).await;
        refused(&a.outcome, why);
        assert!(a.latency < Duration::from_secs(5), "{url} was tried");
    }
}

#[tokio::test]
async fn plain_http_is_refused_unless_allowed() {
    let r = Receiver::start(always(204)).await;
    let s = sender(false, &["127.0.0.0/8"], &[]);
    let a = s.send(&r.url("/in"), &signed()).await;
    refused(&a.outcome, "https");
    assert!(r.got().is_empty());
}

#[tokio::test]
async fn an_allowed_range_is_delivered_to_by_address_and_by_name() {
    let r = Receiver::start(always(204)).await;
    let s = sender(
        true,
        &["127.0.0.0/8"],
        &[("hooks.internal.test", "127.0.0.1")],
    );
    let a = s.send(&r.url("/in"), &signed()).await;
    assert_eq!(a.outcome, Outcome::Status(204));
    let named = format!("http://hooks.internal.test:{}/in", r.addr.port());
    assert_eq!(
        s.send(&named, &signed()).await.outcome,
        Outcome::Status(204)
    );
    let got = r.got();
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|g| g.id == "msg_test" && g.timestamp == 1_700_000_000)
    );
    // A wider allowance does not reach another range.
    let other = s.send("http://10.9.9.9/", &signed()).await;
    refused(&other.outcome, "private");
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let r = Receiver::start(always(204)).await;
    let target = r.url("/elsewhere");
    r.answer_with(std::sync::Arc::new(move |g, _| {
        if g.path == "/in" {
            Reply::Header(307, "location", target.clone())
        } else {
            Reply::Status(204)
        }
    }));
    let s = sender(true, &["127.0.0.0/8"], &[]);
    let a = s.send(&r.url("/in"), &signed()).await;
    assert_eq!(a.outcome, Outcome::Status(307));
    let got = r.got();
    assert_eq!(got.len(), 1, "the redirect's target was asked: {got:?}");
    assert_eq!(got[0].path, "/in");
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out() {
    let r = Receiver::start(std::sync::Arc::new(|_, _| Reply::Hang)).await;
    let s = Sender::new(SenderOptions {
        allow_http: true,
        allowed: vec!["127.0.0.0/8".parse().expect("net")],
        timeout: Duration::from_millis(300),
        ..SenderOptions::default()
    })
    .expect("sender");
    let a = s.send(&r.url("/in"), &signed()).await;
    assert_eq!(a.outcome, Outcome::Timeout);
    assert_eq!(r.got().len(), 1);
}

/// An answer's body is read only up to the bound: an endless one would
/// otherwise hold the attempt until the timeout.
#[tokio::test]
async fn an_endless_answer_is_read_only_up_to_the_bound() {
    let r = Receiver::start(std::sync::Arc::new(|_, _| Reply::Endless)).await;
    let s = Sender::new(SenderOptions {
        allow_http: true,
        allowed: vec!["127.0.0.0/8".parse().expect("net")],
        // Far longer than reading 4 KiB takes, so only reading on would
        // reach it.
        timeout: Duration::from_secs(30),
        ..SenderOptions::default()
    })
    .expect("sender");
    let a = s.send(&r.url("/in"), &signed()).await;
    assert_eq!(a.outcome, Outcome::Status(200));
}

#[tokio::test]
async fn retry_after_is_read_from_the_answer() {
    let r = Receiver::start(std::sync::Arc::new(|_, _| {
        Reply::Header(503, "retry-after", "7".into())
    }))
    .await;
    let s = sender(true, &["127.0.0.0/8"], &[]);
    let a = s.send(&r.url("/in"), &signed()).await;
    assert_eq!(a.outcome, Outcome::Status(503));
    assert_eq!(a.retry_after, Some(Duration::from_secs(7)));
}
