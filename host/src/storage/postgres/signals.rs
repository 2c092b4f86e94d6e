//! Telling other host processes of this one's commits, and hearing of
//! theirs: a connection of the backend's own, on a thread of its own,
//! started when first needed. It sends a `NOTIFY` for each tenant this
//! process committed a change on, and, once anyone here waits for commits,
//! `LISTEN`s for those of every process, reconnecting when the connection
//! drops (and then saying that anything may have changed).
//!
//! The notices go out after the commit, from this connection, never inside
//! the committing transaction: PostgreSQL serializes the commits of every
//! transaction that notifies (a database-wide lock held through the commit's
//! flush), which cost more than half of eight writers' commits when tried,
//! while a notice sent after the commit takes that lock alone and, sent with
//! `synchronous_commit` off, without waiting for a flush. A call that did
//! not commit announces nothing. Notices are hints: tenants committed on
//! while one is being sent ride in the next, at most one send per
//! [`SPACING`], and a notice lost with a connection costs a waiter time,
//! never a change, since waiters read the feed.
//!
//! Nobody may be listening, and then a notice is work for nothing: a
//! listening connection holds a shared advisory lock of its schema for as
//! long as it listens, and says so on [`EARS`] when it starts. The sending
//! connection listens there, asks once when it connects whether anyone
//! else holds the lock, and asks again at most once per [`RECHECK`] while it
//! sends; with nobody listening it sends nothing, and keeps the tenants to
//! announce until someone starts (a listener that started just before a
//! commit here hears of it once its word arrives). It owns this one
//! connection and its thread; it must never touch a call's transaction or
//! block a committing call.

use std::cell::Cell;
use std::collections::HashSet;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::{Either, select};
use futures_util::stream::{Stream, StreamExt};
use tokio_postgres::AsyncMessage;

use crate::storage::backend::{Heard, HeardHook};
use crate::storage::postgres::settings::Settings;
use crate::storage::postgres::tls::MakeRustls;

/// The channel every Leasehold host notifies and listens on. A notice's
/// payload is the schema, a `/`, and the tenant: hosts of other schemas in
/// the same database hear it and pass it over.
pub(crate) const CHANNEL: &str = "leasehold";

/// The least time between two sends of notices: commits meanwhile ride in
/// the next one. It bounds what a busy process's notices cost the server
/// (each is a transaction, and takes the database's notify lock), at the
/// price of as long a delay before a waiter elsewhere hears of a commit.
pub(crate) const SPACING: Duration = Duration::from_millis(20);

/// The channel on which a connection that starts listening says so; the
/// payload is its schema.
pub(crate) const EARS: &str = "leasehold_ears";

/// How often a sending connection that believes someone listens checks
/// that someone still does (a listener that went away takes its lock with
/// it, and says nothing).
const RECHECK: Duration = Duration::from_secs(1);

/// The advisory lock class of listening connections (`LE`), keyed by the
/// schema's hash like lines' turns.
const EARS_LOCK: i32 = 19531;

/// Starts listening, and tells sending connections so: the lock first, so
/// a sender that connects later finds it, then the word for those already
/// connected. One implicit transaction: the notice goes out as it commits.
static LISTEN_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "LISTEN {CHANNEL}; \
         SELECT pg_advisory_lock_shared({EARS_LOCK}, hashtext(current_schema())); \
         SELECT pg_notify('{EARS}', current_schema())"
    )
});

/// Whether a session other than this one listens in this schema.
static OTHERS_LISTEN_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND classid = {EARS_LOCK} AND objid = hashtext(current_schema())::oid \
             AND objsubid = 2 AND pid <> pg_backend_pid())"
    )
});

/// How long the thread waits before connecting again, at first and at most.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

const NOTIFY_SQL: &str = "SELECT pg_notify('leasehold', current_schema() || '/' || t) \
     FROM unnest($1::text[]) AS t";

/// The application name the connection shows in `pg_stat_activity`,
/// followed by its schema.
pub(crate) const APPLICATION: &str = "leasehold-signals";

#[derive(Default)]
struct State {
    /// Tenants to announce, in the order they committed, each once.
    dirty: Vec<String>,
    in_dirty: HashSet<String>,
    hooks: Vec<HeardHook>,
    started: bool,
    stopped: bool,
    /// Whether the connection is listening now.
    listening: bool,
    /// Attempts to listen that ended (listening, or failed), for
    /// [`Signals::listen`] to wait on.
    attempts: u64,
    /// Whether a caller of `listen` is waiting for the next attempt: that
    /// attempt's success is where its hearing begins, not a gap.
    awaited: bool,
}

struct Shared {
    settings: Settings,
    tls: MakeRustls,
    state: Mutex<State>,
    /// Wakes a caller of `listen` waiting for an attempt.
    attempted: Condvar,
    /// Wakes the thread: tenants to announce, a new listener, or stop.
    wake: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hear(&self, heard: Heard<'_>) {
        let hooks = self.lock().hooks.clone();
        for hook in hooks {
            hook(heard);
        }
    }
}

/// One backend's signals: its connection for notices, made when first
/// needed.
pub(crate) struct Signals {
    shared: Arc<Shared>,
}

impl Signals {
    pub(crate) fn new(settings: Settings, tls: MakeRustls) -> Signals {
        Signals {
            shared: Arc::new(Shared {
                settings,
                tls,
                state: Mutex::new(State::default()),
                attempted: Condvar::new(),
                wake: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Queues a notice that this process committed on `tenant`.
    pub(crate) fn announce(&self, tenant: &str) {
        let mut s = self.shared.lock();
        if s.stopped {
            return;
        }
        if !s.in_dirty.contains(tenant) {
            s.in_dirty.insert(tenant.to_owned());
            s.dirty.push(tenant.to_owned());
        }
        self.start(&mut s);
        drop(s);
        self.shared.wake.notify_one();
    }

    /// Adds `heard` to what hears other processes' notices, and waits until
    /// the connection listens or an attempt to make it listen failed (the
    /// thread keeps trying), at most the connect timeout twice over.
    pub(crate) fn listen(&self, heard: HeardHook) -> bool {
        let mut s = self.shared.lock();
        if s.stopped {
            return false;
        }
        s.hooks.push(heard);
        if s.listening {
            return true;
        }
        self.start(&mut s);
        s.awaited = true;
        let seen = s.attempts;
        drop(s);
        self.shared.wake.notify_one();
        let wait = self.shared.settings.connect_timeout * 2;
        let s = self.shared.lock();
        let (mut s, _) = self
            .shared
            .attempted
            .wait_timeout_while(s, wait, |s| s.attempts == seen && !s.stopped)
            .unwrap_or_else(|p| p.into_inner());
        s.awaited = false;
        true
    }

    /// Starts the thread, once.
    fn start(&self, s: &mut State) {
        if s.started {
            return;
        }
        s.started = true;
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("leasehold-signals".into())
            .spawn(move || run(&shared));
        if spawned.is_err() {
            // Without the thread nothing is announced or heard: waiters here
            // still hear this process's commits, and the feed holds the rest.
            s.started = false;
            tracing::warn!("cannot start the thread that sends and hears commit notices");
        }
    }

    /// Ends the thread (it may take until its current wait ends).
    pub(crate) fn stop(&self) {
        let mut s = self.shared.lock();
        s.stopped = true;
        drop(s);
        self.shared.attempted.notify_all();
        self.shared.wake.notify_one();
    }
}

/// Why a session ended.
enum Ended {
    Stopped,
    /// The connection could not be made, failed or closed.
    Lost,
}

fn run(shared: &Arc<Shared>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        tracing::warn!("cannot start the runtime for commit notices");
        return;
    };
    rt.block_on(async {
        let mut backoff = BACKOFF.0;
        loop {
            if shared.lock().stopped {
                return;
            }
            match session(shared).await {
                Ended::Stopped => return,
                Ended::Lost => {
                    {
                        let mut s = shared.lock();
                        s.listening = false;
                        s.attempts += 1;
                    }
                    shared.attempted.notify_all();
                    let woken = shared.wake.notified();
                    let _ = tokio::time::timeout(backoff, async {
                        // Only a stop cuts the wait short.
                        let mut woken = pin!(woken);
                        loop {
                            woken.as_mut().await;
                            if shared.lock().stopped {
                                return;
                            }
                            woken.set(shared.wake.notified());
                        }
                    })
                    .await;
                    backoff = (backoff * 2).min(BACKOFF.1);
                }
            }
        }
    });
}

type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// Who this session is, to tell its own notices and other schemas' apart,
/// and what it has heard of other listeners.
struct Ears {
    pid: i32,
    schema: String,
    /// Words heard from connections of this schema that started listening.
    joined: Cell<u64>,
}

impl Ears {
    fn hear(&self, shared: &Shared, message: AsyncMessage) {
        let AsyncMessage::Notification(n) = message else {
            return;
        };
        if n.process_id() == self.pid {
            return;
        }
        if n.channel() == EARS {
            if n.payload() == self.schema {
                self.joined.set(self.joined.get() + 1);
            }
            return;
        }
        if n.channel() != CHANNEL {
            return;
        }
        if let Some((schema, tenant)) = n.payload().rsplit_once('/')
            && schema == self.schema
        {
            shared.hear(Heard::Tenant(tenant));
        }
    }
}

/// Runs `fut` while handing every message that arrives meanwhile to `ears`;
/// `Err` when the connection failed.
async fn drive<T>(
    shared: &Shared,
    messages: &mut Messages,
    ears: Option<&Ears>,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, ()> {
    let mut fut = pin!(fut);
    loop {
        match select(fut.as_mut(), messages.next()).await {
            Either::Left((answer, _)) => return answer.map_err(|_| ()),
            Either::Right((Some(Ok(m)), _)) => {
                if let Some(ears) = ears {
                    ears.hear(shared, m);
                }
            }
            Either::Right((Some(Err(_)) | None, _)) => return Err(()),
        }
    }
}

/// One connection's life: log in, then announce and listen until it fails
/// or the backend stops.
async fn session(shared: &Arc<Shared>) -> Ended {
    let settings = &shared.settings;
    let connected = tokio::time::timeout(
        settings.connect_timeout,
        settings.config.connect(shared.tls.clone()),
    )
    .await;
    let Ok(Ok((client, mut connection))) = connected else {
        return Ended::Lost;
    };
    let mut messages: Messages = Box::pin(futures_util::stream::poll_fn(move |cx| {
        connection.poll_message(cx)
    }));
    let setup = format!(
        "{} SET synchronous_commit = off; \
         SELECT set_config('application_name', '{APPLICATION} ' || current_schema(), false); \
         LISTEN {EARS}",
        settings.session_sql
    );
    let within = |what| tokio::time::timeout(settings.connect_timeout, what);
    let ready = within(drive(shared, &mut messages, None, async {
        client.batch_execute(&setup).await?;
        let row = client
            .query_one("SELECT pg_backend_pid(), current_schema()", &[])
            .await?;
        let notify = client.prepare(NOTIFY_SQL).await?;
        // Asked after listening on `EARS`: a listener that starts later is
        // heard there.
        let others = client.query_one(OTHERS_LISTEN_SQL.as_str(), &[]).await?;
        Ok((
            row.try_get::<_, i32>(0)?,
            row.try_get::<_, String>(1)?,
            notify,
            others.try_get::<_, bool>(0)?,
        ))
    }))
    .await;
    let Ok(Ok((pid, schema, notify, others))) = ready else {
        return Ended::Lost;
    };
    let ears = Ears {
        pid,
        schema,
        joined: Cell::new(0),
    };
    let mut listening = false;
    let mut sent_at: Option<tokio::time::Instant> = None;
    // Whether someone else may listen, and when that was last asked.
    let mut heard_of = others;
    let mut joined = 0;
    let mut asked_at = tokio::time::Instant::now();
    loop {
        if ears.joined.get() != joined {
            joined = ears.joined.get();
            heard_of = true;
            asked_at = tokio::time::Instant::now();
        }
        if heard_of && asked_at.elapsed() >= RECHECK && !shared.lock().dirty.is_empty() {
            let before = ears.joined.get();
            let asked = drive(
                shared,
                &mut messages,
                Some(&ears),
                client.query_one(OTHERS_LISTEN_SQL.as_str(), &[]),
            )
            .await;
            let Ok(row) = asked else {
                return Ended::Lost;
            };
            asked_at = tokio::time::Instant::now();
            // A word heard meanwhile is newer than the answer.
            heard_of = ears.joined.get() != before || row.get::<_, bool>(0);
            continue;
        }
        let (listen, dirty, stopped) = {
            let mut s = shared.lock();
            let listen = !s.hooks.is_empty() && !listening;
            let spaced = sent_at.is_none_or(|t| t.elapsed() >= SPACING);
            let dirty = if spaced && heard_of {
                s.in_dirty.clear();
                std::mem::take(&mut s.dirty)
            } else {
                Vec::new()
            };
            (listen, dirty, s.stopped)
        };
        if stopped {
            return Ended::Stopped;
        }
        if listen {
            let done = drive(
                shared,
                &mut messages,
                Some(&ears),
                client.batch_execute(LISTEN_SQL.as_str()),
            )
            .await;
            if done.is_err() {
                requeue(shared, dirty);
                return Ended::Lost;
            }
            listening = true;
            let gap = {
                let mut s = shared.lock();
                s.listening = true;
                s.attempts += 1;
                // Listening for the first caller that waits for it is where
                // its hearing begins; any other start follows a stretch in
                // which notices went unheard.
                !s.awaited
            };
            shared.attempted.notify_all();
            if gap {
                shared.hear(Heard::Any);
            }
        }
        if !dirty.is_empty() {
            let sent = drive(
                shared,
                &mut messages,
                Some(&ears),
                client.execute(&notify, &[&dirty]),
            )
            .await;
            if sent.is_err() {
                requeue(shared, dirty);
                return Ended::Lost;
            }
            sent_at = Some(tokio::time::Instant::now());
            continue;
        }
        // Nothing to send now: wait for a message, a wake, or the end of the
        // spacing if tenants wait for it and someone listens.
        let pending = heard_of && !shared.lock().dirty.is_empty();
        let woken = shared.wake.notified();
        let until = match (pending, sent_at) {
            (true, Some(t)) => t + SPACING,
            _ => tokio::time::Instant::now() + Duration::from_secs(3600),
        };
        let woken = pin!(woken);
        let waited = tokio::time::timeout_at(until, select(woken, messages.next())).await;
        let message = match waited {
            Err(_) | Ok(Either::Left(_)) => continue,
            Ok(Either::Right((message, _))) => message,
        };
        match message {
            Some(Ok(m)) => ears.hear(shared, m),
            Some(Err(_)) | None => return Ended::Lost,
        }
    }
}

/// Puts back tenants whose notice was not sent, ahead of newer ones.
fn requeue(shared: &Shared, tenants: Vec<String>) {
    if tenants.is_empty() {
        return;
    }
    let mut s = shared.lock();
    let newer = std::mem::take(&mut s.dirty);
    s.in_dirty.clear();
    for t in tenants.into_iter().chain(newer) {
        if s.in_dirty.insert(t.clone()) {
            s.dirty.push(t);
        }
    }
}
