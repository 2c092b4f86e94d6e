//! Request bodies that nothing read. A route that takes no body (escalate,
//! a GET), or a refusal made before the body was read (a bad credential,
//! an unknown route), drops the body unread; hyper then reads on only what
//! has already arrived and otherwise closes the connection after the
//! answer, without saying so, and a kept-alive client's next request on it
//! fails. This layer reads what is left of such a body before the answer
//! goes out, within the body limit, the request's time and the slow-body
//! guard's rate (`crate::body_rate`), so the connection stays usable; a body
//! it will not read (too long, too slow, held back for `Expect:
//! 100-continue`, or sent by a caller whose credential was not accepted)
//! gets `Connection: close` on the answer, so the client knows. It must
//! never read a byte of a body whose request was not authenticated: a
//! stranger's body costs the server nothing but the refusal.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// How much of an unread body is read, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct DrainLimits {
    pub max_bytes: usize,
    /// Counted from the request's arrival, as for a body a route reads: a
    /// body that already ran out of time (answered 408) is not waited for
    /// again.
    pub within: Duration,
}

/// Where a body that was dropped unfinished is left for the layer.
type Left = Arc<Mutex<Option<Body>>>;

/// The request's body as the routes see it: the same body, handed back to
/// the layer if it is dropped before its end.
struct Watched {
    inner: Option<Body>,
    left: Left,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.inner.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(body) = self.inner.take()
            && !body.is_end_stream()
        {
            *self.left.lock().unwrap_or_else(PoisonError::into_inner) = Some(body);
        }
    }
}

/// Whether the request's credential was accepted, so that its body may be
/// read to its end; set by authentication ([`settle`]).
#[derive(Clone, Default)]
struct Settled(Arc<AtomicBool>);

/// Says that `req` was sent with an accepted credential: a body of it left
/// unread may be read to its end.
pub fn settle(req: &Request) {
    if let Some(s) = req.extensions().get::<Settled>() {
        s.0.store(true, Ordering::Relaxed);
    }
}

/// The layer: see the module's comment.
pub async fn unread_bodies(limits: DrainLimits, mut req: Request, next: Next) -> Response {
    let deadline = tokio::time::Instant::now() + limits.within;
    let waits_to_send = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let left = Left::default();
    let settled = Settled::default();
    req.extensions_mut().insert(settled.clone());
    let req = req.map(|body| {
        Body::new(Watched {
            inner: Some(body),
            left: left.clone(),
        })
    });
    let mut res = next.run(req).await;
    let unread = left.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(body) = unread {
        // A client waiting for `100 Continue` has not sent the body; asking
        // for it only to throw it away would cost it the upload.
        // Nor is a stranger's body read: its connection is closed instead.
        let read = !waits_to_send
            && settled.0.load(Ordering::Relaxed)
            && read_to_end(body, limits.max_bytes, deadline).await;
        if !read {
            res.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    res
}

/// Reads and discards `body`; answers whether it ended within `max_bytes`
/// and by `deadline`.
async fn read_to_end(mut body: Body, max_bytes: usize, deadline: tokio::time::Instant) -> bool {
    if body.size_hint().lower() > max_bytes as u64 {
        return false;
    }
    let read = async {
        let mut seen = 0usize;
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                None => return true,
                Some(Ok(frame)) => {
                    seen += frame.data_ref().map_or(0, Bytes::len);
                    if seen > max_bytes {
                        return false;
                    }
                }
                Some(Err(_)) => return false,
            }
        }
    };
    tokio::time::timeout_at(deadline, read)
        .await
        .unwrap_or(false)
}
