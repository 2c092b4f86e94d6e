//! Settles whose a request's connection is, before anything else reads the
//! request: a request with a good credential makes its connection its
//! caller's (`crate::door`), or is answered 503 `overloaded` with
//! `Connection: close` when its tenant's or caller's share, or all
//! callers', is taken. It never refuses a request for its credential (that
//! is authorization's, or the route's), and never reads a body.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::door::Ticket;
use crate::state::AppState;

/// The layer: see the module's comment.
pub async fn admit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(ticket) = req.extensions().get::<Arc<Ticket>>().cloned() else {
        return next.run(req).await;
    };
    let Some(authorization) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return next.run(req).await;
    };
    if let Ok(p) = state
        .credentials
        .current()
        .authenticate(Some(authorization))
        && let Err(refused) = ticket.admit(&p)
    {
        return refused.into_response();
    }
    next.run(req).await
}
