//! Connections as a resource with limits: the accept loop, the cap on open
//! connections (who may hold them, strangers or callers, is
//! `crate::door`'s), each connection's TLS handshake and HTTP/1.1 session in
//! a task of its own, and shutdown with a grace. It owns how long a client may
//! hold a connection without sending a request (the header timeout, which
//! also bounds the idle wait between requests on a kept-alive connection),
//! and when the process stops waiting for connections at shutdown. It must
//! never wait on one client inside the accept loop, and never let a
//! connection outlive the shutdown grace.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::door::{Door, Ticket};
use crate::holds::Bounds;

/// The bounds on connections (see README, "The HTTP service").
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Most connections of callers that showed a good credential, open at
    /// once; past it (or a tenant's or caller's share), the request is
    /// answered 503 `overloaded` and its connection closed.
    pub max_connections: usize,
    /// Most connections of one tenant's callers open at once.
    pub max_connections_per_tenant: usize,
    /// Most connections of one caller (a credential's tenant, actor and
    /// scope) open at once.
    pub max_connections_per_caller: usize,
    /// Most connections that have shown no credential yet, apart from the
    /// callers' ones; past it, the oldest of them that the server has
    /// waited for `unauthenticated_grace` or longer is closed to make room.
    pub max_unauthenticated: usize,
    /// How long the server waits for a connection that has shown no
    /// credential before it may be closed to make room.
    pub unauthenticated_grace: Duration,
    /// How long a client has to send a request's head, counted from the
    /// connection's start or from the end of the previous answer.
    pub header_timeout: Duration,
    /// How long a client has to finish its TLS handshake.
    pub handshake_timeout: Duration,
    /// How long shutdown waits for open connections to finish before it
    /// closes them.
    pub shutdown_grace: Duration,
    /// The kernel's send buffer for each connection, in bytes; `None`
    /// leaves it to the kernel, which grows it as a connection needs (to
    /// megabytes a connection). A fixed one bounds what a reader that
    /// stopped reading holds in the kernel, so that its event stream
    /// notices it sooner and a thousand of them cannot hold gigabytes.
    pub send_buffer: Option<usize>,
    /// How long a write to a client may wait for the client to read before
    /// the connection is closed: a reader that stopped reading (an event
    /// stream's above all) gives back its buffers and its connection then.
    pub write_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            max_connections_per_tenant: 256,
            max_connections_per_caller: 128,
            max_unauthenticated: 64,
            unauthenticated_grace: Duration::from_secs(1),
            header_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            send_buffer: Some(256 * 1024),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// The answer a plain-HTTP connection past the cap gets before it is closed:
/// written once without waiting, so a client that never reads costs nothing.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/problem+json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 156\r\n\
\r\n\
{\"type\":\"urn:leasehold:problem:overloaded\",\"title\":\"Unavailable; retry later\",\"status\":503,\"detail\":\"the service has as many connections open as it allows\"}";

/// Two one-way signals every connection task watches: `soft` asks it to
/// finish the request in hand and close, `hard` closes it now.
#[derive(Clone)]
struct Stop {
    soft: watch::Receiver<bool>,
    hard: watch::Receiver<bool>,
}

async fn raised(rx: &mut watch::Receiver<bool>) {
    // A closed channel means the server is gone: as good as raised.
    let _ = rx.wait_for(|up| *up).await;
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open
/// connections finish within the grace and closes the rest.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let door = Door::new(
        limits.max_unauthenticated,
        limits.unauthenticated_grace,
        Bounds {
            all: limits.max_connections,
            per_tenant: limits.max_connections_per_tenant,
            per_caller: limits.max_connections_per_caller,
        },
    );
    // Every connection is a stranger or a caller's: the strangers' pool and
    // the callers' bound together are all the process holds.
    let max = (limits.max_connections.max(1) + limits.max_unauthenticated.max(1))
        .clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
    let (soft_tx, soft) = watch::channel(false);
    let (hard_tx, hard) = watch::channel(false);
    let stop = Stop { soft, hard };
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, addr) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // As axum's own listener does: an accept error (such as too
                // many open files) is waited out, never fatal.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Some(n) = limits.send_buffer
            && let Err(e) = socket2::SockRef::from(&tcp).set_send_buffer_size(n)
        {
            tracing::warn!(error = %e, "could not set a connection's send buffer");
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            refuse(&tcp, addr, tls.is_some());
            continue;
        };
        let ticket = tokio::select! {
            biased;
            () = &mut shutdown => break,
            ticket = door.enter() => ticket,
        };
        metrics::gauge!("leasehold_connections_open").increment(1.0);
        tokio::spawn(connection(
            tcp,
            addr,
            tls.clone(),
            app.clone(),
            limits,
            stop.clone(),
            (permit, ticket),
        ));
    }
    drop(listener);
    let open = max - slots.available_permits();
    tracing::info!(open, "no longer accepting; letting open connections finish");
    let _ = soft_tx.send(true);
    let everyone = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_grace, slots.acquire_many(everyone))
        .await
        .is_err()
    {
        let open = max - slots.available_permits();
        tracing::warn!(
            open,
            grace = ?limits.shutdown_grace,
            "closing connections still open after the shutdown grace"
        );
        let _ = hard_tx.send(true);
        // Each task drops its connection as soon as it sees the signal.
        let _ = tokio::time::timeout(Duration::from_secs(1), slots.acquire_many(everyone)).await;
    }
}

/// A connection past the cap: a plain-HTTP client is told why, a TLS client
/// sees the connection close.
fn refuse(tcp: &TcpStream, addr: SocketAddr, tls: bool) {
    metrics::counter!("leasehold_connections_refused_total").increment(1);
    tracing::warn!(%addr, "refused a connection: at the bound of open connections");
    if !tls {
        let _ = tcp.try_write(REFUSED);
    }
}

async fn connection(
    tcp: TcpStream,
    addr: SocketAddr,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: ConnectionLimits,
    mut stop: Stop,
    (permit, ticket): (OwnedSemaphorePermit, Arc<Ticket>),
) {
    let _ = tcp.set_nodelay(true);
    let tcp = WriteTimeout::new(tcp, limits.write_timeout, ticket.clone());
    match tls {
        None => session(tcp, app, limits, stop, ticket).await,
        Some(acceptor) => {
            let handshake = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp));
            let done = tokio::select! {
                done = handshake => done,
                // A handshake unfinished when shutdown begins is not a
                // request in flight: it is dropped at once.
                () = raised(&mut stop.soft) => {
                    finish(permit);
                    return;
                }
                // A handshake is a stranger's: closed to make room too.
                () = ticket.closed() => {
                    finish(permit);
                    return;
                }
            };
            match done {
                Ok(Ok(stream)) => session(stream, app, limits, stop, ticket).await,
                Ok(Err(e)) => {
                    metrics::counter!("leasehold_tls_handshakes_failed_total").increment(1);
                    tracing::info!(%addr, error = %e, "TLS handshake failed");
                }
                Err(_) => {
                    metrics::counter!("leasehold_tls_handshakes_failed_total").increment(1);
                    tracing::info!(%addr, "TLS handshake timed out");
                }
            }
        }
    }
    finish(permit);
}

fn finish(permit: OwnedSemaphorePermit) {
    metrics::gauge!("leasehold_connections_open").decrement(1.0);
    drop(permit);
}

/// One HTTP/1.1 session until the client closes, a timeout ends it, it
/// is closed to make room for another stranger, or shutdown ends it. Each
/// request carries the connection's ticket, for `crate::admit`.
async fn session<I>(
    io: I,
    app: Router,
    limits: ConnectionLimits,
    mut stop: Stop,
    ticket: Arc<Ticket>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tagged = ticket.clone();
    let app = tower::ServiceExt::map_request(
        app,
        move |mut req: axum::extract::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(tagged.clone());
            req
        },
    );
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // What one connection may hold unread or unsent: enough for any
        // request's headers, and a reader too slow for an event stream
        // fills it soon, so that the stream's own bound decides.
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
    let mut conn = std::pin::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = ticket.closed() => {
            tracing::debug!("closed a connection that showed no credential, to make room");
            Ok(())
        }
        () = raised(&mut stop.soft) => {
            // Finish the request in hand, if any, then close; an idle
            // connection closes at once.
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                ended = conn.as_mut() => ended,
                () = raised(&mut stop.hard) => Ok(()),
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// A connection whose writes fail once one has waited `limit` for the
/// client to make room: hyper then drops the connection, and with it every
/// buffer it held. A write that makes progress starts the clock again.
/// Its reads tell the connection's ticket when the server waits for the
/// client.
struct WriteTimeout<I> {
    io: I,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    ticket: Arc<Ticket>,
}

impl<I> WriteTimeout<I> {
    fn new(io: I, limit: Duration, ticket: Arc<Ticket>) -> Self {
        WriteTimeout {
            io,
            limit,
            stalled: None,
            ticket,
        }
    }

    /// What a write that returned `poll` means, with the clock: pending
    /// past the limit is an error.
    fn timed<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let limit = self.limit;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        metrics::counter!("leasehold_write_timeouts_total").increment(1);
                        Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client read nothing within the write timeout",
                        )))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteTimeout<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
        if poll.is_pending() {
            self.ticket.waited();
        }
        poll
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.timed(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.timed(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.timed(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.timed(cx, poll)
    }
}
