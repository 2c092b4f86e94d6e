//! The slow-body guard: a request body must arrive at a stated minimum
//! rate, so that a client trickling a body cannot hold its connection, and
//! the request's time, for the whole `--request-timeout`. Only the time the
//! server spends waiting for the client counts (a body the server is not
//! reading is not slow), with a grace at the start; past it the body fails
//! with [`TooSlow`], which a route answers 408 `body-timeout` and the
//! connection is closed. It owns the rate and the clock; it must never
//! fail a body that keeps up, and never start the clock before the server
//! asks for the body (a body nobody reads is never read here).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The least rate a body must keep up (see README, "The HTTP service").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRate {
    /// Bytes a second a body must average, over the time the server waited
    /// for it past the grace; 0 turns the guard off.
    pub min_bytes_per_sec: u64,
    /// How long the server waits for a body before the rate applies.
    pub grace: Duration,
}

impl Default for BodyRate {
    fn default() -> Self {
        BodyRate {
            min_bytes_per_sec: 1024,
            grace: Duration::from_secs(5),
        }
    }
}

impl BodyRate {
    /// How long the server may have waited, in all, for a body of which
    /// `seen` bytes have arrived.
    fn allowed(self, seen: u64) -> Duration {
        let earned = Duration::from_secs_f64(seen as f64 / self.min_bytes_per_sec as f64);
        self.grace.saturating_add(earned)
    }
}

/// A body that arrived more slowly than the stated rate.
#[derive(Debug, thiserror::Error)]
#[error("the request body arrived more slowly than {0} bytes a second")]
pub struct TooSlow(pub u64);

/// A body under the guard.
struct Guarded {
    inner: Body,
    rate: BodyRate,
    seen: u64,
    /// The time the server waited for earlier bytes, in all.
    waited: Duration,
    /// Since when the server has been waiting for the next bytes.
    waiting_since: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    failed: bool,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(Some(Err(axum::Error::new(TooSlow(
                this.rate.min_bytes_per_sec,
            )))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(since) = this.waiting_since.take() {
                    this.waited += since.elapsed();
                }
                this.timer = None;
                if let Some(Ok(f)) = &frame {
                    this.seen += f.data_ref().map_or(0, |d| d.len() as u64);
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let since = *this.waiting_since.get_or_insert_with(Instant::now);
                let left = this.rate.allowed(this.seen).saturating_sub(this.waited);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(since + left)));
                match timer.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        this.failed = true;
                        metrics::counter!("leasehold_slow_bodies_total").increment(1);
                        Poll::Ready(Some(Err(axum::Error::new(TooSlow(
                            this.rate.min_bytes_per_sec,
                        )))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.failed && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The layer: every request's body under the guard.
pub async fn guard(rate: BodyRate, req: Request, next: Next) -> Response {
    if rate.min_bytes_per_sec == 0 {
        return next.run(req).await;
    }
    let req = req.map(|inner| {
        Body::new(Guarded {
            inner,
            rate,
            seen: 0,
            waited: Duration::ZERO,
            waiting_since: None,
            timer: None,
            failed: false,
        })
    });
    next.run(req).await
}

/// Whether `e`, or what it came from, is a body that was too slow.
pub fn too_slow(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if e.is::<TooSlow>() {
            return true;
        }
        at = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_grows_with_what_arrived() {
        let r = BodyRate {
            min_bytes_per_sec: 1000,
            grace: Duration::from_secs(2),
        };
        assert_eq!(r.allowed(0), Duration::from_secs(2));
        assert_eq!(r.allowed(3000), Duration::from_secs(5));
    }
}
