//! Kept-alive connections over raw sockets: a body that the route does not
//! read (escalate takes none; an authenticated caller's refusal comes
//! before the body is read) is read to its end, so the connection carries
//! the next request; a body the server will not read (too long, or a
//! stranger's) is answered with `Connection: close`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{Service, new_task, stores, test_options};

fn connect(svc: &Service) -> TcpStream {
    let addr = svc.url("").trim_start_matches("http://").to_owned();
    let tcp = TcpStream::connect(addr).expect("connects");
    tcp.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    tcp.set_nodelay(true).expect("nodelay");
    tcp
}

/// An answer's status and (lower-cased) head, or `None` if the server
/// closed the connection first.
type Answer = Option<(u16, String)>;

/// One answer read off the connection.
fn answer(r: &mut BufReader<TcpStream>) -> Answer {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    r.read_exact(&mut body).ok()?;
    Some((status, head.to_ascii_lowercase()))
}

fn request_head(method: &str, path: &str, token: &str, length: usize) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    )
}

/// Sends `first`'s head, then (after a pause long enough for the route to
/// have answered without its body) the body and a second request on the
/// same connection. Answers both answers.
fn two_on_one(svc: &Service, first: (&str, &str, &str, &[u8]), split: bool) -> (Answer, Answer) {
    let (method, path, token, body) = first;
    let mut tcp = connect(svc);
    let head = request_head(method, path, token, body.len());
    let second = "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
    if split {
        tcp.write_all(head.as_bytes()).expect("writes");
        std::thread::sleep(Duration::from_millis(300));
        // A server that closed meanwhile refuses these writes; the answers
        // read below tell what it did.
        let _ = tcp.write_all(body);
        let _ = tcp.write_all(second.as_bytes());
    } else {
        let mut all = head.into_bytes();
        all.extend_from_slice(body);
        all.extend_from_slice(second.as_bytes());
        tcp.write_all(&all).expect("writes");
    }
    let mut r = BufReader::new(tcp);
    let one = answer(&mut r);
    let two = answer(&mut r);
    (one, two)
}

#[test]
fn an_escalate_with_a_body_leaves_the_connection_usable() {
    let svc = Service::start(stores().remove(0), test_options());
    let sam = svc.tokens.get("sam").to_owned();
    for (i, (body, split)) in [
        (&b"{}"[..], true),
        (&b"{}"[..], false),
        (&b""[..], false),
        (&b"{\"why\": \"late\"}"[..], true),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("esc-{i}");
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task(&id)))
            .expect_ok();
        let path = format!("/v1/tasks/{id}/escalate");
        let (one, two) = two_on_one(&svc, ("POST", &path, &sam, body), split);
        let what = format!(
            "escalate with {:?}, split: {split}",
            String::from_utf8_lossy(body)
        );
        let (status, head) = one.unwrap_or_else(|| panic!("{what}: no first answer"));
        assert_eq!(status, 200, "{what}: {head}");
        assert!(!head.contains("connection: close"), "{what}: {head}");
        let (status, _) = two.unwrap_or_else(|| {
            panic!("{what}: the second request on the connection was not answered")
        });
        assert_eq!(status, 200, "{what}");
    }
}

/// A refusal of an authenticated caller (a reviewer may not open tasks)
/// reads the body it did not need, so the connection carries the next
/// request.
#[test]
fn a_refusal_after_authentication_leaves_the_connection_usable() {
    let svc = Service::start(stores().remove(0), test_options());
    let alice = svc.tokens.get("alice").to_owned();
    let body = serde_json::to_vec(&new_task("never")).expect("json");
    let (one, two) = two_on_one(&svc, ("POST", "/v1/tasks", &alice, &body), true);
    let (status, head) = one.expect("a first answer");
    assert_eq!(status, 403, "{head}");
    assert_eq!(two.expect("the second request answered").0, 200);
}

/// A request whose credential is refused has its body left unread: the
/// answer says the connection closes, and it does, so a stranger's body
/// costs the server nothing.
#[test]
fn a_refusal_before_authentication_reads_no_body_and_closes_the_connection() {
    let svc = Service::start(stores().remove(0), test_options());
    let body = serde_json::to_vec(&new_task("never")).expect("json");
    for split in [true, false] {
        let (one, two) = two_on_one(&svc, ("POST", "/v1/tasks", "lh_not-a-token", &body), split);
        let (status, head) = one.expect("a first answer");
        assert_eq!(status, 401, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(two.is_none(), "the server closes the connection");
    }
}

/// A body longer than the limit is not read to its end: the answer says
/// the connection closes, and it does.
#[test]
fn a_body_the_server_will_not_read_is_answered_with_connection_close() {
    let svc = Service::start(stores().remove(0), test_options());
    let sam = svc.tokens.get("sam").to_owned();
    svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("big")))
        .expect_ok();
    let mut tcp = connect(&svc);
    let huge = 64 * 1024 * 1024;
    tcp.write_all(request_head("POST", "/v1/tasks/big/escalate", &sam, huge).as_bytes())
        .expect("writes");
    let mut r = BufReader::new(tcp);
    let (status, head) = answer(&mut r).expect("an answer");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(answer(&mut r).is_none(), "the server closes the connection");
}
