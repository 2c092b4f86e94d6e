//! What the tests share: a receiver over a real socket that records every
//! request before it answers as told, a feed made by the real engine, and
//! waiting on conditions with generous bounds.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use leasehold_host::{Engine, OnExpiry, Priority, Settlement, Task, TaskState, Tenant};
use leasehold_webhooks::{
    Deliveries, Filter, MemoryStore, Options, Parts, RetryPolicy, Secret, Sender, SenderOptions,
    SigningKey, SubState, Subscription, TenantLimits,
};
use tokio::task::JoinHandle;

/// How long a test waits for what must happen.
pub const BOUND: Duration = Duration::from_secs(60);

/// One request a receiver heard.
#[derive(Clone, Debug)]
pub struct Got {
    pub path: String,
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
    pub user_agent: String,
    pub body: Vec<u8>,
    /// The status it was answered with (`None`: it was never answered).
    pub status: Option<u16>,
}

impl Got {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The task and history number a task entry's default body carries.
    pub fn task_seq(&self) -> Option<(String, u64)> {
        let v = self.json();
        let t = &v["data"]["change"]["task"];
        Some((t["id"].as_str()?.to_owned(), t["entry"]["seq"].as_u64()?))
    }
}

/// How a receiver answers.
#[derive(Clone, Debug)]
pub enum Reply {
    Status(u16),
    Header(u16, &'static str, String),
    /// Never answers.
    Hang,
    /// Answers after a while.
    After(Duration, u16),
    /// 200 with a body that never ends.
    Endless,
}

pub type Answer = Arc<dyn Fn(&Got, usize) -> Reply + Send + Sync>;

pub fn always(status: u16) -> Answer {
    Arc::new(move |_, _| Reply::Status(status))
}

/// A receiver on 127.0.0.1.
pub struct Receiver {
    pub addr: SocketAddr,
    got: Arc<Mutex<Vec<Got>>>,
    open: Arc<Mutex<(usize, usize)>>,
    answer: Arc<Mutex<Answer>>,
    task: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Endless;

impl hyper::body::Body for Endless {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&[b'x'; 8192])))))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts a request open until dropped.
struct Open(Arc<Mutex<(usize, usize)>>);
impl Open {
    fn new(o: &Arc<Mutex<(usize, usize)>>) -> Open {
        let mut g = lock(o);
        g.0 += 1;
        g.1 = g.1.max(g.0);
        Open(o.clone())
    }
}
impl Drop for Open {
    fn drop(&mut self) {
        lock(&self.0).0 -= 1;
    }
}

impl Receiver {
    pub async fn start(answer: Answer) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let open: Arc<Mutex<(usize, usize)>> = Arc::default();
        let answer = Arc::new(Mutex::new(answer));
        let (g, o, a) = (got.clone(), open.clone(), answer.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (g, o, a) = (g.clone(), o.clone(), a.clone());
                let svc = service_fn(move |req: hyper::Request<Incoming>| {
                    let (g, o, a) = (g.clone(), o.clone(), a.clone());
                    async move {
                        let _open = Open::new(&o);
                        let header = |n: &str| {
                            req.headers()
                                .get(n)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_owned()
                        };
                        let mut got = Got {
                            path: req.uri().path().to_owned(),
                            id: header("webhook-id"),
                            timestamp: header("webhook-timestamp").parse().unwrap_or(0),
                            signature: header("webhook-signature"),
                            user_agent: header("user-agent"),
                            body: Vec::new(),
                            status: None,
                        };
                        got.body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes().to_vec())
                            .unwrap_or_default();
                        let (nth, reply) = {
                            let mut all = lock(&g);
                            let nth = all.len();
                            let reply = (lock(&a))(&got, nth);
                            all.push(got);
                            (nth, reply)
                        };
                        let respond = |status: u16| {
                            lock(&g)[nth].status = Some(status);
                            status
                        };
                        let body: BoxBody<Bytes, Infallible> = match &reply {
                            Reply::Endless => Endless.boxed(),
                            _ => Full::new(Bytes::from_static(b"ok")).boxed(),
                        };
                        let mut res = hyper::Response::new(body);
                        match reply {
                            Reply::Hang => std::future::pending::<()>().await,
                            Reply::Status(s) => *res.status_mut() = status(respond(s)),
                            Reply::Header(s, name, value) => {
                                *res.status_mut() = status(respond(s));
                                res.headers_mut()
                                    .insert(name, value.parse().expect("a header value"));
                            }
                            Reply::After(d, s) => {
                                tokio::time::sleep(d).await;
                                *res.status_mut() = status(respond(s));
                            }
                            Reply::Endless => *res.status_mut() = status(respond(200)),
                        }
                        Ok::<_, Infallible>(res)
                    }
                });
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Receiver {
            addr,
            got,
            open,
            answer,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn got(&self) -> Vec<Got> {
        lock(&self.got).clone()
    }

    /// The most requests it had open at once.
    pub fn most_open(&self) -> usize {
        lock(&self.open).1
    }

    pub fn answer_with(&self, answer: Answer) {
        *lock(&self.answer) = answer;
    }
}

fn status(s: u16) -> hyper::StatusCode {
    hyper::StatusCode::from_u16(s).expect("a status")
}

/// Waits until `cond` holds, checking every 20 ms, for at most [`BOUND`].
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "waited {BOUND:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An open task of `kind`.
pub fn task(id: &str, kind: &str) -> Task {
    Task {
        id: id.to_owned(),
        run: "run-1".to_owned(),
        case: None,
        kind: kind.to_owned(),
        justification: r#"{"why":"test"}"#.to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: 1_700_000_000_000,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// Opens, claims and completes task `id`: three feed entries.
pub fn life(t: &Tenant, id: &str, kind: &str) {
    t.open(&task(id, kind)).expect("open");
    t.claim(id, "alice", &[], None).expect("claim");
    assert!(
        t.settle(id, Settlement::Completed, Some("alice"))
            .expect("settle")
    );
}

/// The feed's head now.
pub fn head(t: &Tenant) -> String {
    match t.feed(None, 1).expect("feed") {
        leasehold_host::FeedRead::Page(p) => p.head,
        leasehold_host::FeedRead::Gone(h) => h,
    }
}

/// A subscription delivering everything to `url` from the feed's start.
pub fn subscription(id: &str, url: &str, secret: &Secret) -> Subscription {
    Subscription {
        id: id.to_owned(),
        url: url.to_owned(),
        filter: Filter::default(),
        state: SubState::Active,
        position: None,
        secrets: vec![SigningKey {
            secret: secret.clone(),
            until: None,
        }],
        note: None,
        created_at: 0,
        revision: 1,
        attempts: Vec::new(),
    }
}

/// A sender that may reach this machine over plain http.
pub fn local_sender(user_agent: &str, timeout: Duration) -> Sender {
    Sender::new(SenderOptions {
        allow_http: true,
        allowed: vec!["127.0.0.0/8".parse().expect("net")],
        timeout,
        connect_timeout: timeout,
        user_agent: user_agent.to_owned(),
        ..SenderOptions::default()
    })
    .expect("sender")
}

/// Options fit for tests: quick polls, checkpoints and retries.
pub fn quick(holder: &str) -> Options {
    Options {
        holder: holder.to_owned(),
        lease: Duration::from_millis(900),
        poll: Duration::from_millis(50),
        checkpoint: Duration::from_millis(20),
        retry: RetryPolicy {
            first: Duration::from_millis(10),
            cap: Duration::from_millis(80),
            window: Duration::from_secs(60),
            retry_after_cap: Duration::from_millis(100),
        },
        tenant: TenantLimits::default(),
        ..Options::default()
    }
}

/// A delivery engine over `engine`'s feed and `store`.
pub fn deliveries(
    engine: &Engine,
    store: &Arc<MemoryStore>,
    sender: Sender,
    options: Options,
) -> Deliveries {
    Deliveries::new(
        Parts::new(store.clone(), Arc::new(engine.clone()), sender),
        options,
    )
}

/// A subscription's stored state.
pub fn stored(store: &MemoryStore, tenant: &str, id: &str) -> Subscription {
    use leasehold_webhooks::SubscriptionStore;
    store
        .get(tenant, id)
        .expect("get")
        .expect("the subscription")
}
