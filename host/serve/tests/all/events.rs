//! `GET /v1/events` as server-sent events, read by a client of our own over
//! a plain socket (so that a test can stop reading): where a stream starts
//! and resumes, what a reviewer and another tenant receive, a slow reader
//! dropped with a final event, shutdown, the subscriber bounds, many
//! streams of one tenant (which share their reads; counted in
//! `tests/fanout.rs`), and two servers on one PostgreSQL database.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Service, Store, each_backend, new_task, new_timer, stores, test_options};

/// One event as a client dispatches it.
#[derive(Clone, Debug, PartialEq)]
pub struct Ev {
    pub event: String,
    pub id: Option<String>,
    pub data: Value,
    /// The event as it came, every byte.
    raw: String,
}

impl Ev {
    /// A `task` event's task id: its data is a change as a JSON read's
    /// entries are (`{position, change: {task: {id, entry}}}`).
    pub fn task(&self) -> &Value {
        &self.data["change"]["task"]["id"]
    }

    /// A `task` event's history entry.
    fn entry(&self) -> &Value {
        &self.data["change"]["task"]["entry"]
    }
}

/// A stream of server-sent events over a socket, its chunked body decoded
/// by hand.
pub struct Stream {
    r: BufReader<TcpStream>,
    text: String,
    ended: bool,
}

/// Waits this long for an event before the test fails: a bound on a
/// failure, never a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(60);

impl Stream {
    /// Subscribes as `who` (a token name), resuming after `last` when
    /// given; the status and body when the server refuses.
    pub fn open(svc: &Service, who: &str, last: Option<&str>) -> Result<Stream, (u16, String)> {
        Stream::open_at(&svc.url(""), svc.tokens.get(who), last)
    }

    fn open_at(base: &str, token: &str, last: Option<&str>) -> Result<Stream, (u16, String)> {
        Stream::open_with(base, token, last, None)
    }

    /// [`open_at`](Self::open_at), with the socket's receive buffer set
    /// (small, for a reader that falls behind soon).
    fn open_with(
        base: &str,
        token: &str,
        last: Option<&str>,
        receive_buffer: Option<usize>,
    ) -> Result<Stream, (u16, String)> {
        Stream::open_query(base, token, "", last, receive_buffer)
    }

    /// [`open_with`](Self::open_with), with a query string (`?after=…`).
    fn open_query(
        base: &str,
        token: &str,
        query: &str,
        last: Option<&str>,
        receive_buffer: Option<usize>,
    ) -> Result<Stream, (u16, String)> {
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        let to: std::net::SocketAddr = addr.parse().expect("an address");
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a socket");
        if let Some(n) = receive_buffer {
            socket.set_recv_buffer_size(n).expect("a receive buffer");
        }
        socket.connect(&to.into()).expect("connect");
        let mut s: TcpStream = socket.into();
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let mut req = format!(
            "GET /v1/events{query} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\n"
        );
        if let Some(last) = last {
            req.push_str(&format!("Last-Event-ID: {last}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("send");
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status).expect("status line");
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            r.read_line(&mut line).expect("header");
            if line.trim().is_empty() {
                break;
            }
            headers.push(line.to_ascii_lowercase());
        }
        let mut stream = Stream {
            r,
            text: String::new(),
            ended: false,
        };
        if code != 200 {
            let length = headers
                .iter()
                .find_map(|h| h.strip_prefix("content-length:"))
                .map(|n| n.trim().parse().expect("a length"));
            let body = match length {
                Some(n) => {
                    let mut body = vec![0; n];
                    stream.r.read_exact(&mut body).expect("the body");
                    String::from_utf8_lossy(&body).into_owned()
                }
                None => stream.rest(),
            };
            return Err((code, body));
        }
        assert!(
            headers
                .iter()
                .any(|h| h.starts_with("content-type: text/event-stream")),
            "{headers:?}"
        );
        Ok(stream)
    }

    /// One chunk of the body; false at its end.
    fn chunk(&mut self) -> bool {
        let mut size = String::new();
        if self.r.read_line(&mut size).expect("a chunk size") == 0 {
            return false;
        }
        let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        if n == 0 {
            return false;
        }
        let mut data = vec![0; n + 2];
        self.r.read_exact(&mut data).expect("a chunk");
        self.text
            .push_str(std::str::from_utf8(&data[..n]).expect("UTF-8"));
        true
    }

    /// The rest of a body, for a refusal.
    fn rest(&mut self) -> String {
        while self.chunk() {}
        std::mem::take(&mut self.text)
    }

    /// The next event dispatched (heartbeats skipped), or `None` at the end
    /// of the stream.
    pub fn next(&mut self) -> Option<Ev> {
        loop {
            if let Some(at) = self.text.find("\n\n") {
                let block: String = self.text.drain(..at + 2).collect();
                let mut ev = Ev {
                    event: String::new(),
                    id: None,
                    data: Value::Null,
                    raw: block.clone(),
                };
                let mut any = false;
                for line in block.lines() {
                    if let Some((field, value)) = line.split_once(':') {
                        let value = value.strip_prefix(' ').unwrap_or(value);
                        match field {
                            "" => {}
                            "event" => (ev.event, any) = (value.to_owned(), true),
                            "id" => (ev.id, any) = (Some(value.to_owned()), true),
                            "data" => {
                                ev.data = serde_json::from_str(value).expect("JSON data");
                                any = true;
                            }
                            other => panic!("unknown field {other}"),
                        }
                    }
                }
                if any {
                    return Some(ev);
                }
                continue;
            }
            if self.ended || !self.chunk() {
                self.ended = true;
                return None;
            }
        }
    }

    /// The next event that names a change (task, timer, refresh, dropped),
    /// skipping position-only ones.
    pub fn next_change(&mut self) -> Option<Ev> {
        loop {
            let ev = self.next()?;
            if !ev.event.is_empty() {
                return Some(ev);
            }
        }
    }

    /// Task events until one of task `last`, which is included.
    fn until_task(&mut self, last: &str) -> Vec<Ev> {
        let mut out = Vec::new();
        loop {
            let ev = self
                .next_change()
                .unwrap_or_else(|| panic!("the stream ended before task {last}: {out:?}"));
            let done = *ev.task() == last;
            out.push(ev);
            if done {
                return out;
            }
        }
    }
}

fn open(svc: &Service, who: &str, body: Value) {
    svc.call("POST", "/v1/tasks", Some(who), Some(body))
        .expect_ok();
}

fn claim(svc: &Service, who: &str, id: &str) -> u16 {
    svc.call(
        "POST",
        &format!("/v1/tasks/{id}/claim"),
        Some(who),
        Some(json!({})),
    )
    .status
}

fn task(id: &str, roles: &[&str]) -> Value {
    let mut t = new_task(id);
    t["candidate_roles"] = json!(roles);
    t
}

#[test]
fn a_stream_starts_at_the_head_and_resumes_exactly_after_last_event_id() {
    each_backend(|svc| {
        open(svc, "sam", task("before", &["finance"]));
        let mut s = Stream::open(svc, "sam", None).expect("subscribed");
        let ready = s.next().expect("ready");
        assert_eq!(ready.event, "ready");
        assert_eq!(ready.data["position"].as_str(), ready.id.as_deref());
        // A stream without a position starts at the head: what came before
        // is not replayed.
        open(svc, "sam", task("t0", &["finance"]));
        let first = s.next_change().expect("t0");
        assert_eq!(first.event, "task");
        assert_eq!(*first.task(), "t0");
        assert_eq!(first.entry()["verb"], "open");
        assert_eq!(first.entry()["after"], "open");
        assert_eq!(first.id.as_deref(), first.data["position"].as_str());
        drop(s);

        // Fifty changes while nobody listens.
        let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in 1..=25 {
            let id = format!("t{i}");
            open(svc, "sam", task(&id, &["finance"]));
            assert_eq!(claim(svc, "alice", &id), 200);
            expected.insert(id, vec!["open".into(), "claim".into()]);
        }
        let mut s = Stream::open(svc, "sam", first.id.as_deref()).expect("resumed");
        assert_eq!(s.next().expect("ready").id, first.id);
        let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for _ in 0..50 {
            let ev = s.next_change().expect("a missed change");
            assert_eq!(ev.event, "task");
            got.entry(ev.task().as_str().expect("id").to_owned())
                .or_default()
                .push(ev.entry()["verb"].as_str().expect("verb").to_owned());
        }
        // Each task's changes in their order, each once.
        assert_eq!(got, expected);
        // And nothing else: the next change is the next one made.
        open(svc, "sam", task("sentinel", &["finance"]));
        assert_eq!(*s.next_change().expect("sentinel").task(), "sentinel");
        drop(s);

        // Trimmed past that position: the stream says to refresh, and goes
        // on from the head.
        loop {
            let t = svc.call(
                "POST",
                "/v1/events/trim",
                Some("olga"),
                Some(json!({"keep": 1})),
            );
            if t.expect_ok()["more"] == false {
                break;
            }
        }
        let mut s = Stream::open(svc, "sam", first.id.as_deref()).expect("resumed");
        assert_eq!(s.next().expect("ready").event, "ready");
        let refresh = s.next_change().expect("refresh");
        assert_eq!(refresh.event, "refresh");
        assert_eq!(refresh.id.as_deref(), refresh.data["head"].as_str());
        open(svc, "sam", task("after-trim", &["finance"]));
        assert_eq!(*s.next_change().expect("next").task(), "after-trim");
    });
}

#[test]
fn reviewers_and_other_tenants_receive_only_what_they_may_see() {
    each_backend(|svc| {
        let mut alice = Stream::open(svc, "alice", None).expect("alice");
        let mut carol = Stream::open(svc, "carol", None).expect("carol");
        let mut sam = Stream::open(svc, "sam", None).expect("sam");
        let mut gus = Stream::open(svc, "gus", None).expect("gus");
        for s in [&mut alice, &mut carol, &mut sam, &mut gus] {
            assert_eq!(s.next().expect("ready").event, "ready");
        }
        // finance: alice may take it; bob takes it, and alice sees it go.
        open(svc, "sam", task("fin", &["finance"]));
        assert_eq!(claim(svc, "bob", "fin"), 200);
        // legal: carol's.
        open(svc, "sam", task("leg", &["legal"]));
        assert_eq!(claim(svc, "carol", "leg"), 200);
        // finance, but alice raised it: four eyes.
        let mut mine = task("four-eyes", &["finance"]);
        mine["excluded_actors"] = json!(["alice"]);
        open(svc, "sam", mine);
        assert_eq!(claim(svc, "bob", "four-eyes"), 200);
        // A refused claim changes nothing, and so sends nothing.
        assert_eq!(claim(svc, "carol", "fin"), 404);
        svc.call(
            "POST",
            "/v1/timers",
            Some("sam"),
            Some(new_timer("run-1", "wake", 9_000)),
        )
        .expect_ok();
        // Last, one every acme reviewer may see.
        open(svc, "sam", task("all", &["finance", "legal"]));
        // Another tenant's change, after all of acme's.
        open(svc, "gina", task("globex-1", &["finance"]));

        let seen = |evs: &[Ev]| -> Vec<(String, String)> {
            evs.iter()
                .map(|e| {
                    (
                        e.task().as_str().unwrap_or(&e.event).to_owned(),
                        e.entry()["verb"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        };
        let pair = |t: &str, v: &str| (t.to_owned(), v.to_owned());
        assert_eq!(
            seen(&alice.until_task("all")),
            [
                pair("fin", "open"),
                pair("fin", "claim"),
                pair("all", "open")
            ]
        );
        assert_eq!(
            seen(&carol.until_task("all")),
            [
                pair("leg", "open"),
                pair("leg", "claim"),
                pair("all", "open")
            ]
        );
        let all = sam.until_task("all");
        assert!(all.iter().any(|e| e.event == "timer"), "{all:?}");
        let tasks: BTreeSet<String> = seen(&all).into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            tasks,
            ["all", "fin", "four-eyes", "leg", "timer"]
                .map(str::to_owned)
                .into()
        );
        // Another tenant's reviewer heard nothing of acme's.
        assert_eq!(
            seen(&gus.until_task("globex-1")),
            [pair("globex-1", "open")]
        );

        // The JSON read filters as the stream does.
        let page = svc.call("GET", "/v1/events?limit=1000", Some("alice"), None);
        let ids: BTreeSet<String> = page.expect_ok()["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| {
                e["change"]["task"]["id"]
                    .as_str()
                    .expect("a task")
                    .to_owned()
            })
            .collect();
        assert_eq!(ids, ["all", "fin"].map(str::to_owned).into());
    });
}

#[test]
fn many_streams_of_a_tenant_each_receive_exactly_their_own() {
    each_backend(|svc| {
        // Four streams each of two reviewers and a service of one tenant,
        // and two of another tenant's reviewer, all at the feed's head.
        let who = ["alice", "carol", "sam"];
        let mut streams: Vec<(&str, Stream)> = Vec::new();
        for w in who.iter().cycle().take(12).chain(&["gus", "gus"]) {
            let mut s = Stream::open(svc, w, None).expect("a stream");
            assert_eq!(s.next().expect("ready").event, "ready");
            streams.push((w, s));
        }
        let mut finance = Vec::new();
        let mut legal = Vec::new();
        for i in 0..24 {
            let (id, roles) = if i % 3 == 0 {
                (format!("leg-{i}"), &["legal"][..])
            } else {
                (format!("fin-{i}"), &["finance"][..])
            };
            open(svc, "sam", task(&id, roles));
            if i % 3 == 0 { &mut legal } else { &mut finance }.push(id);
        }
        open(svc, "sam", task("all", &["finance", "legal"]));
        open(svc, "gina", task("globex-1", &["finance"]));
        let everyone: Vec<String> = (0..24)
            .map(|i| format!("{}-{i}", if i % 3 == 0 { "leg" } else { "fin" }))
            .chain(["all".to_owned()])
            .collect();
        finance.push("all".to_owned());
        legal.push("all".to_owned());
        for (w, s) in &mut streams {
            let (last, want) = match *w {
                "alice" => ("all", &finance),
                "carol" => ("all", &legal),
                "sam" => ("all", &everyone),
                _ => ("globex-1", &vec!["globex-1".to_owned()]),
            };
            let got: Vec<String> = s
                .until_task(last)
                .iter()
                .map(|e| {
                    assert_eq!(e.event, "task", "{w}: {e:?}");
                    assert_eq!(e.id.as_deref(), e.data["position"].as_str());
                    e.task().as_str().expect("a task").to_owned()
                })
                .collect();
            assert_eq!(&got, want, "{w}");
        }
    });
}

/// Held by the tests that count streams ended as slow, so that the count
/// (the process's) moves only for the one that holds it.
static SLOW: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn counting_slow() -> std::sync::MutexGuard<'static, ()> {
    SLOW.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The stream's metric of streams ended for `reason`.
fn ended(svc: &Service, reason: &str) -> u64 {
    let text = svc.call("GET", "/metrics", Some("olga"), None).text;
    let needle = format!("leasehold_event_streams_ended_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

#[test]
fn a_reader_too_slow_is_dropped_with_a_final_event_and_resumes_from_it() {
    let _one = counting_slow();
    let store = stores().into_iter().next().expect("redb");
    let mut options = test_options();
    options.events.buffer = 8;
    options.connections.send_buffer = Some(4096);
    // The test stops reading for as long as it takes to make the changes.
    options.connections.write_timeout = Duration::from_secs(600);
    let svc = Service::start(store, options);
    let before = ended(&svc, "slow");
    let mut s = Stream::open_with(&svc.url(""), svc.tokens.get("sam"), None, Some(4096))
        .expect("subscribed");
    // Long ids make each event large, so that fewer fill the way.
    let id = |i: usize| format!("{i:05}-{}", "x".repeat(200));
    // Not read from here on: changes pile up in the socket, then in the
    // server, until its buffer for this reader is full.
    let mut opened = 0;
    while ended(&svc, "slow") == before {
        assert!(opened < 20_000, "never dropped after {opened} changes");
        for _ in 0..50 {
            open(&svc, "sam", task(&id(opened), &["finance"]));
            opened += 1;
        }
    }
    eprintln!("dropped after {opened} changes were made");
    assert_eq!(s.next().expect("ready").event, "ready");
    let mut received = Vec::new();
    let last = loop {
        let ev = s.next_change().expect("the stream ends with an event");
        if ev.event == "dropped" {
            break ev;
        }
        assert_eq!(ev.event, "task");
        received.push(ev);
    };
    assert_eq!(last.data["reason"], "slow");
    // Every change up to the drop arrived, in order, with none skipped.
    let names: Vec<String> = received
        .iter()
        .map(|e| e.task().as_str().expect("id").to_owned())
        .collect();
    let expected: Vec<String> = (0..names.len()).map(id).collect();
    assert!(names == expected, "{} received, not in order", names.len());
    assert!(
        names.len() < opened,
        "dropped after all {opened} changes were sent"
    );
    assert_eq!(
        last.data["resume"].as_str(),
        received.last().and_then(|e| e.id.as_deref())
    );
    assert!(s.next().is_none(), "the stream ends after `dropped`");
    // Resuming from where it was dropped loses nothing.
    let mut s = Stream::open(&svc, "sam", last.data["resume"].as_str()).expect("resumed");
    assert_eq!(s.next().expect("ready").event, "ready");
    let next = s.next_change().expect("the next change");
    assert_eq!(*next.task(), id(names.len()));
}

#[test]
fn shutdown_ends_every_stream_with_a_final_event() {
    let store = stores().into_iter().next().expect("redb");
    let mut options = test_options();
    options.connections.shutdown_grace = Duration::from_secs(300);
    let mut svc = Service::start(store, options);
    let mut s = Stream::open(&svc, "sam", None).expect("subscribed");
    assert_eq!(s.next().expect("ready").event, "ready");
    let started = Instant::now();
    svc.stop();
    // The stream did not hold shutdown for its grace.
    assert!(started.elapsed() < Duration::from_secs(300));
    let last = s.next_change().expect("a final event");
    assert_eq!(last.event, "dropped");
    assert_eq!(last.data["reason"], "shutdown");
    assert!(s.next().is_none());
}

#[test]
fn subscribers_are_bounded_in_all_and_per_tenant() {
    let store = stores().into_iter().next().expect("redb");
    let mut options = test_options();
    options.events.max_subscribers = 3;
    options.events.max_subscribers_per_tenant = 2;
    // Short, so that a subscriber that went away is noticed soon.
    options.events.heartbeat = Duration::from_millis(100);
    let svc = Service::start(store, options);
    let alice = Stream::open(&svc, "alice", None).expect("first");
    let _bob = Stream::open(&svc, "bob", None).expect("second");
    let refused = Stream::open(&svc, "carol", None)
        .err()
        .expect("a third of acme");
    assert_eq!(refused.0, 503);
    assert!(refused.1.contains("overloaded"), "{}", refused.1);
    let _gus = Stream::open(&svc, "gus", None).expect("globex's first");
    let refused = Stream::open(&svc, "gina", None)
        .err()
        .expect("a fourth in all");
    assert_eq!(refused.0, 503);
    // A subscriber that leaves gives its place back.
    drop(alice);
    let deadline = Instant::now() + PATIENCE;
    loop {
        match Stream::open(&svc, "carol", None) {
            Ok(_) => break,
            Err((503, _)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("the place was never given back: {e:?}"),
        }
    }
}

#[test]
fn a_change_through_one_server_reaches_a_subscriber_of_another() {
    let Some(store) = stores()
        .into_iter()
        .find(|s| matches!(s, Store::Postgres(_)))
    else {
        eprintln!("skipped: no PostgreSQL (LEASEHOLD_TEST_PG)");
        return;
    };
    let one = Service::start(store, test_options());
    let two = one.twin();
    let mut s = Stream::open_at(&two.url, one.tokens.get("alice"), None).expect("subscribed");
    assert_eq!(s.next().expect("ready").event, "ready");
    open(&one, "sam", task("pay-1", &["finance"]));
    // A refused call commits nothing and sends nothing.
    assert_eq!(claim(&one, "carol", "pay-1"), 404);
    assert_eq!(claim(&one, "bob", "pay-1"), 200);
    let got = s.until_task("pay-1");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].entry()["verb"], "open");
    let next = s.next_change().expect("the claim");
    assert_eq!(next.entry()["verb"], "claim");
    assert_eq!(next.entry()["actor"], "bob");
    assert_eq!(next.entry()["assignee"], "bob");
    drop(two);
}

/// A position that is not one, on the stream (as `?after` and as
/// `Last-Event-ID`) and on the JSON read alike: 400, naming the field, and
/// the server answers on; a position of the right shape this feed never
/// gave is `gone` (a `refresh` on a stream); a reviewer's position is one
/// sealed for it alone.
#[test]
fn malformed_positions_are_refused_everywhere_and_never_panic() {
    each_backend(|svc| {
        let base = svc.url("");
        let sam = svc.tokens.get("sam");
        for bad in ["%0A", "%00", "garbage", "f01.1", "f1.1_0.1", "f0.1%0Aid:x"] {
            let r = svc.call("GET", &format!("/v1/events?after={bad}"), Some("sam"), None);
            r.expect_problem(400, "invalid");
            let refused = Stream::open_query(&base, sam, &format!("?after={bad}"), None, None);
            let (status, body) = refused
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert_eq!(status, 400, "{bad}: {body}");
            assert!(body.contains("after"), "{body}");
        }
        for bad in ["garbage", "f0.1x", "f0.01"] {
            let (status, body) = Stream::open_at(&base, sam, Some(bad))
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert_eq!(status, 400, "{bad}: {body}");
            assert!(body.contains("Last-Event-ID"), "{body}");
        }
        // A reviewer's page is read by the service itself: its limit is
        // checked all the same.
        svc.call("GET", "/v1/events?limit=0", Some("alice"), None)
            .expect_problem(400, "invalid");
        // The server is whole: it answers, and a good position works.
        svc.call("GET", "/v1/whoami", Some("sam"), None).expect_ok();
        let r = svc.call("GET", "/v1/events?after=f0.999999", Some("sam"), None);
        assert_eq!(r.expect_ok()["gone"], true, "{r:?}");
        let mut s = Stream::open_at(&base, sam, Some("f0.999999")).expect("a stream");
        assert_eq!(s.next_change().expect("an event").event, "ready");
        assert_eq!(s.next_change().expect("an event").event, "refresh");
        // A reviewer's positions are sealed for it: the feed's own spelling,
        // and another reviewer's sealed one, are not positions for it.
        svc.call("GET", "/v1/events?after=f", Some("alice"), None)
            .expect_problem(400, "invalid");
        let bobs = svc.call("GET", "/v1/events", Some("bob"), None);
        let next = bobs.expect_ok()["next"].as_str().expect("next").to_owned();
        svc.call(
            "GET",
            &format!("/v1/events?after={next}"),
            Some("alice"),
            None,
        )
        .expect_problem(400, "invalid");
        svc.call(
            "GET",
            &format!("/v1/events?after={next}"),
            Some("bob"),
            None,
        )
        .expect_ok();
    });
}

/// Everything a finance reviewer is sent, every byte: JSON reads of the
/// feed from the start and from a position it was given, page by page,
/// and streams opened at such positions; while finance tasks are opened,
/// claimed and settled, with or without a legal team's changes before,
/// between and after them. Both servers seal under one key and record
/// changes at one instant, as two servers behind one balancer would.
fn finance_view(legal_noise: bool) -> Vec<String> {
    let clock = leasehold_host::ManualClock::new(1_700_000_000_000);
    let svc = Service::start_keyed(
        crate::harness::redb_store(),
        test_options(),
        leasehold_host::Engine::builder().clock(clock),
        Some([7; 32]),
    );
    let base = svc.url("");
    let alice = svc.tokens.get("alice");
    let mut seen = Vec::new();
    let body = |r: crate::harness::Reply| -> (Value, String) {
        let v = r.expect_ok().clone();
        (v, r.text.clone())
    };
    // The empty feed's start, and a stream from it.
    let (first, text) = body(svc.call("GET", "/v1/events", Some("alice"), None));
    seen.push(text);
    let start = first["next"].as_str().expect("next").to_owned();
    let mut s = Stream::open_at(&base, alice, Some(&start)).expect("subscribed");
    seen.push(s.next().expect("ready").raw);
    let noise = |round: usize| {
        if legal_noise {
            for j in 0..7 {
                let id = format!("legal-{round}-{j}");
                let mut t = task(&id, &["legal"]);
                t["created_at"] = json!(1_000 + round);
                open(&svc, "sam", t);
                assert_eq!(claim(&svc, "carol", &id), 200);
            }
        }
    };
    for i in 0..3 {
        noise(i);
        let id = format!("fin-{i}");
        let mut t = task(&id, &["finance"]);
        t["created_at"] = json!(1_000 + i);
        open(&svc, "sam", t);
        noise(10 + i);
        if i == 1 {
            assert_eq!(claim(&svc, "alice", &id), 200);
        }
    }
    noise(99);
    let mut events = Vec::new();
    while events.len() < 4 {
        let ev = s.next().expect("an event");
        assert!(!ev.event.is_empty(), "no event with only an id: {ev:?}");
        events.push(ev);
    }
    seen.extend(events.iter().map(|e| e.raw.clone()));
    // Reads from the start and from the stream's start, whole and a page
    // of one at a time (whose `next` and `head` say whether more is
    // there).
    for path in [
        "/v1/events?limit=100".to_owned(),
        format!("/v1/events?after={start}"),
    ] {
        seen.push(body(svc.call("GET", &path, Some("alice"), None)).1);
    }
    let mut after = start.clone();
    loop {
        let (page, text) = body(svc.call(
            "GET",
            &format!("/v1/events?limit=1&after={after}"),
            Some("alice"),
            None,
        ));
        seen.push(text);
        after = page["next"].as_str().expect("next").to_owned();
        if page["next"] == page["head"] {
            break;
        }
        assert!(seen.len() < 40, "pages end");
    }
    // A stream resumed from each event's id sends what followed it.
    for (i, e) in events.iter().enumerate() {
        let id = e.id.as_deref().expect("an id");
        let mut r = Stream::open_at(&base, alice, Some(id)).expect("resumed");
        seen.push(r.next().expect("ready").raw);
        for later in &events[i + 1..] {
            let ev = r.next().expect("an event");
            assert_eq!(ev.raw, later.raw, "resumed after event {i}");
            seen.push(ev.raw);
        }
    }
    seen
}

/// A reviewer learns nothing of the changes it may not see: every byte it
/// is sent, positions included, is the same whether or not another team
/// made changes before, between and after its own.
#[test]
fn a_reviewers_reads_are_byte_identical_whether_or_not_others_made_changes() {
    let quiet = finance_view(false);
    let busy = finance_view(true);
    assert_eq!(quiet.len(), busy.len());
    for (q, b) in quiet.iter().zip(&busy) {
        assert_eq!(q, b);
    }
    // And it was sent something to compare: the stream's changes, and
    // pages of them.
    assert!(quiet.iter().filter(|t| t.contains("fin-")).count() >= 10);
}

/// Where a history entry sits in the feed, as services and operators may
/// ask: the entry's slot and number, the same the feed's positions count.
#[test]
fn a_history_entry_names_its_place_in_the_feed() {
    each_backend(|svc| {
        open(svc, "sam", task("placed", &["finance"]));
        assert_eq!(claim(svc, "alice", "placed"), 200);
        let feed = svc.call("GET", "/v1/events?limit=100", Some("sam"), None);
        let positions: Vec<String> = feed.expect_ok()["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["change"]["task"]["id"] == "placed")
            .map(|e| e["position"].as_str().expect("position").to_owned())
            .collect();
        assert_eq!(positions.len(), 2);
        for (seq, position) in [1, 2].iter().zip(&positions) {
            let r = svc.call(
                "GET",
                &format!("/v1/tasks/placed/history/{seq}/place"),
                Some("sam"),
                None,
            );
            let place = r.expect_ok();
            let slot = place["slot"].as_u64().expect("slot");
            let n = place["seq"].as_u64().expect("seq");
            // The feed's position after the entry holds its number in its slot.
            assert!(
                position
                    .trim_start_matches('f')
                    .split('_')
                    .any(|p| p == format!("{slot}.{n}")),
                "{place} in {position}"
            );
        }
        svc.call("GET", "/v1/tasks/placed/history/3/place", Some("sam"), None)
            .expect_problem(404, "not-found");
        svc.call("GET", "/v1/tasks/nobody/history/1/place", Some("sam"), None)
            .expect_problem(404, "not-found");
        svc.call("GET", "/v1/tasks/placed/history/0/place", Some("sam"), None)
            .expect_problem(400, "invalid");
        // A reviewer's positions are its own: the feed's numbers are not
        // for it.
        svc.call(
            "GET",
            "/v1/tasks/placed/history/1/place",
            Some("alice"),
            None,
        )
        .expect_problem(403, "forbidden");
    });
}

/// A validator of `schema`, a schema of the served document `doc` (its
/// `$ref`s resolve against the document's components), by JSON Schema
/// 2020-12, as OpenAPI 3.1 reads its schemas.
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .expect("the document's schema compiles")
}

/// The text of an event's `data` line, as it was sent.
fn data_text(ev: &Ev) -> String {
    ev.raw
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d).to_owned())
        .expect("a data line")
}

/// A change has one shape on the wire: a JSON read's entries and the data
/// of a stream's `task` and `timer` events are the document's `Event`, the
/// schema the document gives both (the stream's with `contentSchema`), and
/// a service is sent the same bytes of JSON for the same change either way.
/// Checked with a JSON Schema validator against the served document; the
/// shape the stream sent before it was one type is refused.
#[test]
fn a_served_change_is_the_documents_event_in_a_read_and_on_the_stream() {
    each_backend(|svc| {
        let doc = svc.openapi().clone();
        let feed = &doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"];
        let entry_schema =
            &doc["components"]["schemas"]["Events"]["properties"]["entries"]["items"];
        let stream_schema = &feed["text/event-stream"]["schema"];
        let change_data = &stream_schema["then"]["properties"]["data"]["contentSchema"];
        assert_eq!(
            feed["application/json"]["schema"]["$ref"],
            "#/components/schemas/Events"
        );
        assert_eq!(entry_schema["$ref"], "#/components/schemas/Event");
        assert_eq!(
            change_data, entry_schema,
            "the stream's changes and a read's entries are one schema"
        );
        assert_eq!(
            stream_schema["if"]["properties"]["event"]["enum"],
            json!(["task", "timer"])
        );
        let entry = validator(&doc, entry_schema);
        let event = validator(&doc, stream_schema);

        let mut sam = Stream::open(svc, "sam", None).expect("sam's stream");
        let mut alice = Stream::open(svc, "alice", None).expect("alice's stream");
        for s in [&mut sam, &mut alice] {
            assert_eq!(s.next().expect("ready").event, "ready");
        }
        open(svc, "sam", task("shaped", &["finance"]));
        assert_eq!(claim(svc, "alice", "shaped"), 200);
        svc.call(
            "POST",
            "/v1/timers",
            Some("sam"),
            Some(new_timer("run-1", "shaped", 9_000)),
        )
        .expect_ok();
        let mut sent = Vec::new();
        while sent.len() < 3 {
            let ev = sam.next_change().expect("a change");
            sent.push(ev);
        }
        assert_eq!(
            sent.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
            ["task", "task", "timer"]
        );
        sent.extend(alice.until_task("shaped"));
        sent.push(alice.next_change().expect("alice's claim"));
        assert_eq!(sent.len(), 5, "alice is sent the open and the claim");

        let page = svc.call("GET", "/v1/events?limit=100", Some("sam"), None);
        let entries = page.expect_ok()["entries"]
            .as_array()
            .expect("entries")
            .clone();
        assert_eq!(entries.len(), 3);
        for e in &entries {
            entry
                .validate(e)
                .unwrap_or_else(|err| panic!("{err}: {e:#}"));
        }
        let page = svc.call("GET", "/v1/events?limit=100", Some("alice"), None);
        for e in page.expect_ok()["entries"].as_array().expect("entries") {
            entry
                .validate(e)
                .unwrap_or_else(|err| panic!("{err}: {e:#}"));
        }
        for ev in &sent {
            entry
                .validate(&ev.data)
                .unwrap_or_else(|err| panic!("{err}: {:#}", ev.data));
            let whole = json!({"event": ev.event, "id": ev.id, "data": data_text(ev)});
            event
                .validate(&whole)
                .unwrap_or_else(|err| panic!("{err}: {whole:#}"));
            assert_eq!(ev.id.as_deref(), ev.data["position"].as_str());
            assert!(ev.data["change"][&ev.event].is_object(), "{ev:?}");
        }
        // A service is sent each change as the same JSON either way.
        for (ev, e) in sent[..3].iter().zip(&entries) {
            assert_eq!(&ev.data, e);
        }

        // The shape the stream once sent, of its own field names, is not
        // the document's: the check can fail.
        let flat = json!({
            "position": "f0.1", "task": "shaped", "seq": 1, "verb": "open", "actor": "sam",
            "before": null, "state": "open", "assignee": null, "lease_until": null, "at": 1,
        });
        assert!(!entry.is_valid(&flat));
    });
}

/// Two reviewers whose streams stop reading hold at most their callers'
/// shares of the tenant's event budget: their streams are the ones dropped
/// as slow, and a third stream of the tenant, reading, receives every
/// change, in order, through and past their drop.
#[test]
fn two_reviewers_that_stop_reading_never_get_a_reading_stream_dropped() {
    let _one = counting_slow();
    let store = stores().into_iter().next().expect("redb");
    let mut options = test_options();
    // Bytes alone bound the queues, and one stream may hold the tenant's
    // whole budget: only the callers' shares keep the slow ones from it.
    options.events.buffer = 1_000_000;
    options.events.tenant_buffer_bytes = 96 * 1024;
    options.events.buffer_bytes = options.events.tenant_buffer_bytes;
    options.connections.send_buffer = Some(4096);
    // The slow streams are read only at the end.
    options.connections.write_timeout = Duration::from_secs(600);
    let svc = Service::start(store, options);
    let before = ended(&svc, "slow");
    let stalled: Vec<(&str, Stream)> = ["alice", "alice", "bob", "bob"]
        .into_iter()
        .map(|who| {
            let s = Stream::open_with(&svc.url(""), svc.tokens.get(who), None, Some(4096))
                .expect("subscribed");
            (who, s)
        })
        .collect();
    let mut reading = Stream::open(&svc, "sam", None).expect("subscribed");
    assert_eq!(reading.next().expect("ready").event, "ready");
    let id = |i: usize| format!("{i:05}-{}", "x".repeat(200));
    let mut received: Vec<String> = Vec::new();
    let mut opened = 0;
    // A batch at a time, each read to its end by the reading stream, so
    // that it never has more than a batch queued; until every stalled
    // stream is dropped, and one batch more.
    let mut after_the_drops = 0;
    while after_the_drops < 2 {
        assert!(opened < 20_000, "not dropped after {opened} changes");
        if ended(&svc, "slow") - before >= 4 {
            after_the_drops += 1;
        }
        for _ in 0..20 {
            open(&svc, "sam", task(&id(opened), &["finance"]));
            opened += 1;
        }
        for ev in reading.until_task(&id(opened - 1)) {
            assert_eq!(ev.event, "task", "the reading stream: {:?}", ev.data);
            received.push(ev.task().as_str().expect("an id").to_owned());
        }
    }
    eprintln!("the stalled streams were dropped within {opened} changes");
    assert_eq!(ended(&svc, "slow") - before, 4, "only the stalled streams");
    let expected: Vec<String> = (0..opened).map(id).collect();
    assert!(
        received == expected,
        "{} of {opened} received",
        received.len()
    );
    for (who, mut s) in stalled {
        assert_eq!(s.next().expect("ready").event, "ready");
        let last = loop {
            let ev = s.next_change().expect("ends with an event");
            if ev.event != "task" {
                break ev;
            }
        };
        assert_eq!(last.event, "dropped", "{who}");
        assert_eq!(last.data["reason"], "slow", "{who}");
    }
}

/// A stream asked for one run carries only that run's changes, for a
/// service and a reviewer alike, a settle's with its decision; a run that
/// is not a name is refused.
#[test]
fn a_stream_of_one_run_carries_only_that_runs_changes() {
    each_backend(|svc| {
        for who in ["sam", "alice"] {
            let base = svc.url("");
            let mut s = Stream::open_query(&base, svc.tokens.get(who), "?run=run-a", None, None)
                .expect("subscribed");
            assert_eq!(s.next().expect("ready").event, "ready");
            let (a, b) = (format!("a-{who}"), format!("b-{who}"));
            let mut other = task(&b, &["finance"]);
            other["run"] = json!("run-b");
            let mut mine = task(&a, &["finance"]);
            mine["run"] = json!("run-a");
            open(svc, "sam", other);
            open(svc, "sam", mine);
            let settle = |id: &str, decision: Value| {
                svc.call(
                    "POST",
                    &format!("/v1/tasks/{id}/settle"),
                    Some("sam"),
                    Some(json!({"settlement": "completed", "decision": decision})),
                )
                .expect_ok();
            };
            settle(&b, json!({"outcome": "approved"}));
            settle(&a, json!({"outcome": "approved", "reason": "in budget"}));
            let got = s.next_change().expect("the open");
            assert_eq!(*got.task(), a.as_str(), "{got:?}");
            assert_eq!(got.entry()["verb"], "open");
            assert_eq!(got.data["change"]["task"]["run"], "run-a");
            let got = s.next_change().expect("the settle");
            assert_eq!(*got.task(), a.as_str(), "{got:?}");
            assert_eq!(got.entry()["decision"]["reason"], "in budget");
        }
        svc.call("GET", "/v1/events?run=%07", Some("sam"), None)
            .expect_problem(400, "invalid");
    });
}
